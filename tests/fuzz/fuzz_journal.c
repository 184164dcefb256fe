/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_journal.c - libFuzzer harness for the rendezvous journal reader:
 * rdzv_journal_open replays DIR/journal (records "RDZJ" | len | crc |
 * seq | JSON) into a fresh state; whatever the bytes, it must either
 * recover (cutting a damaged tail) or refuse with an error, never crash,
 * leak or allocate from an unchecked length. The input is written as the
 * journal of a fresh directory under /dev/shm (the reader takes a path).
 *
 * The journal reader is private to rendezvous/ (rendezvous/journal.h), so
 * this harness is built with -Irendezvous. Corpus: tests/fuzz/corpus/journal.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/log.h"
#include "dlaunch/rdzv_state.h"
#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char path[96];

static void remove_dir_files(void)
{
	static const char *const names[] = {"journal", "snapshot", "lock",
					    "snapshot.tmp"};
	char p[128];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		unlink(p);
	}
}

static void remove_dir(void)
{
	remove_dir_files();
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdzv_state *st;
	struct rdzv_journal *jr = NULL;
	char err[256];
	int fd;

	if (dir[0] == '\0') {
		log_set_level(LOG_ERROR); /* a damaged tail warns every time */
		snprintf(dir, sizeof(dir), "/dev/shm/fuzz_journal.%d",
			 (int)getpid());
		if (mkdir(dir, 0700) != 0)
			abort();
		atexit(remove_dir);
		snprintf(path, sizeof(path), "%s/journal", dir);
	}
	remove_dir_files();
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		abort();
	if (size > 0 && write(fd, data, size) != (ssize_t)size)
		abort();
	close(fd);

	st = rdzv_state_new(NULL);
	if (st == NULL)
		return 0;
	if (rdzv_journal_open(dir, st, 1000, &jr, err, sizeof(err)) == 0)
		rdzv_journal_close(jr);
	rdzv_state_free(st);
	return 0;
}
