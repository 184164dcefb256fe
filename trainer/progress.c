/*
 * progress.c - dlaunch-train shows its agent that it is alive and moving.
 *
 * With --progress-timeout, the agent takes a worker that shows no progress
 * for that long as hung. Output counts, but only rank 0 prints progress
 * lines; so every rank also touches DLAUNCH_PROGRESS_FILE (the agent's file
 * for this worker) as it completes steps, at most every PROGRESS_EVERY_MS,
 * whether or not it speaks the control channel (whose `step` messages the
 * agent counts too). Without the variable nothing is done.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "train_progress.h"

#define PROGRESS_EVERY_MS 250

static int progress_fd = -1;
static int progress_off; /* no variable, or it cannot be opened */
static uint64_t progress_last_ms;

void train_progress_step(void)
{
	uint64_t now;

	if (progress_off)
		return;
	if (progress_fd < 0) {
		const char *path = getenv("DLAUNCH_PROGRESS_FILE");

		if (path == NULL || path[0] == '\0') {
			progress_off = 1;
			return;
		}
		progress_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (progress_fd < 0) {
			log_warn("cannot open the progress file %s; the agent "
				 "sees progress only from output and the "
				 "control channel",
				 path);
			progress_off = 1;
			return;
		}
	}
	now = clock_now_ms();
	if (progress_last_ms != 0 && now - progress_last_ms < PROGRESS_EVERY_MS)
		return;
	progress_last_ms = now;
	/* the agent compares the mtime with its previous value only */
	(void)futimens(progress_fd, NULL);
}
