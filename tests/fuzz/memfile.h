/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memfile.h - for the reader fuzzers: an input written to an anonymous
 * memory file (memfd), opened by path as a reader opens real files.
 */
#ifndef DLAUNCH_FUZZ_MEMFILE_H
#define DLAUNCH_FUZZ_MEMFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* memfile writes n bytes to a new memfd and puts its /proc/self/fd path in
 * path; returns the descriptor (close it when done) or -1. */
static inline int memfile(const uint8_t *p, size_t n, char *path,
			  size_t path_size)
{
	int fd = memfd_create("fuzz", 0);

	if (fd < 0)
		return -1;
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	snprintf(path, path_size, "/proc/self/fd/%d", fd);
	return fd;
}

#endif
