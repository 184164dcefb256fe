/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - every rank touches DLAUNCH_PROGRESS_FILE as it steps (see
 * progress.h). The file is opened once; each touch is one
 * futimens(2), and touches closer than TRAIN_PROGRESS_EVERY_MS apart are
 * skipped, so the cost per step is a clock read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"

static int progress_fd = -1;
static int progress_off; /* no file, or it failed: touch nothing */
static uint64_t last_touch_ms;

void train_progress_touch(void)
{
	uint64_t now;

	if (progress_off)
		return;
	if (progress_fd < 0) {
		const char *path = getenv("DLAUNCH_PROGRESS_FILE");
		if (!path || !path[0]) {
			progress_off = 1;
			return;
		}
		progress_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (progress_fd < 0) {
			log_warn("progress file %s: %s; not reporting progress",
				 path, strerror(errno));
			progress_off = 1;
			return;
		}
	} else {
		now = clock_now_ms();
		if (now - last_touch_ms < TRAIN_PROGRESS_EVERY_MS)
			return;
	}
	last_touch_ms = clock_now_ms();
	if (futimens(progress_fd, NULL) != 0) {
		log_warn("progress file: %s; not reporting progress",
			 strerror(errno));
		close(progress_fd);
		progress_fd = -1;
		progress_off = 1;
	}
}
