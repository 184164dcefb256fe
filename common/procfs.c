/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procfs.c - the one reader of /proc/PID/stat (contract in
 * include/dlaunch/procfs.h): the line is split at the last ')' and each
 * field up to starttime is parsed with the checked helpers of parse.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/error.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"

/* the fields after comm, in order, up to starttime (proc(5) numbers them
 * from 1 with pid; state is field 3) */
enum stat_field {
	F_PPID = 4,
	F_PGRP,
	F_SESSION,
	F_TTY_NR,
	F_TPGID,
	F_FLAGS,
	F_MINFLT,
	F_CMINFLT,
	F_MAJFLT,
	F_CMAJFLT,
	F_UTIME,
	F_STIME,
	F_CUTIME,
	F_CSTIME,
	F_PRIORITY,
	F_NICE,
	F_NUM_THREADS,
	F_ITREALVALUE,
	F_STARTTIME,
};

/* the longest number a field holds: 20 digits and a sign */
#define FIELD_MAX 21

/* next_field copies the field at *p (up to a space, a newline or the end)
 * into out and moves *p past it and one space. 0, or DL_EINVAL when the
 * field is empty or too long. */
static int next_field(const char **p, char out[FIELD_MAX + 1])
{
	size_t n = strcspn(*p, " \n");
	if (n == 0 || n > FIELD_MAX)
		return DL_EINVAL;
	memcpy(out, *p, n);
	out[n] = '\0';
	*p += n;
	if (**p == ' ')
		(*p)++;
	return 0;
}

/* signed_field: tty_nr, tpgid, cutime, cstime, priority, nice,
 * itrealvalue are signed in proc(5) (%d, %ld); the others are not */
static int signed_field(int f)
{
	return f == F_TTY_NR || f == F_TPGID || f == F_CUTIME ||
	       f == F_CSTIME || f == F_PRIORITY || f == F_NICE ||
	       f == F_ITREALVALUE || f == F_NUM_THREADS;
}

int procfs_parse_stat(const char *text, struct procfs_stat *out)
{
	const char *open = strchr(text, '(');
	const char *close = strrchr(text, ')');
	const char *p;
	size_t len;

	if (open == NULL || close == NULL || close < open || close[1] != ' ' ||
	    close[2] == '\0' || close[3] != ' ')
		return DL_EINVAL;
	memset(out, 0, sizeof(*out));
	len = (size_t)(close - open - 1);
	if (len >= sizeof(out->comm))
		len = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, len);
	out->state = close[2];
	p = close + 4;
	for (int f = F_PPID; f <= F_STARTTIME; f++) {
		char field[FIELD_MAX + 1];
		uint64_t u = 0;
		int64_t s = 0;
		int rc = next_field(&p, field);
		if (rc == 0)
			rc = signed_field(f)
				 ? parse_i64(field, INT64_MIN, INT64_MAX, &s)
				 : parse_u64(field, 0, UINT64_MAX, &u);
		if (rc != 0)
			return DL_EINVAL;
		switch (f) {
		case F_PPID:
		case F_PGRP:
		case F_SESSION:
			if (u > INT32_MAX)
				return DL_EINVAL;
			if (f == F_PPID)
				out->ppid = (pid_t)u;
			else if (f == F_PGRP)
				out->pgid = (pid_t)u;
			else
				out->sid = (pid_t)u;
			break;
		case F_UTIME: out->utime = u; break;
		case F_STIME: out->stime = u; break;
		case F_NUM_THREADS:
			if (s < 0)
				return DL_EINVAL;
			out->threads = s;
			break;
		case F_STARTTIME: out->start = u; break;
		default: break;
		}
	}
	return 0;
}

ssize_t procfs_read_small(const char *path, char *buf, size_t size)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((size_t)got < size - 1 &&
	       (n = read(fd, buf + got, size - 1 - (size_t)got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;
			close(fd);
			errno = saved;
			return -1;
		}
		got += n;
	}
	close(fd);
	buf[got] = '\0';
	return got;
}

int procfs_read_stat(pid_t pid, struct procfs_stat *out)
{
	/* 22 fields of at most 21 bytes and a comm: 1 KiB holds them */
	char path[64], text[1024];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	n = procfs_read_small(path, text, sizeof(text));
	if (n < 0)
		return errno == ENOENT || errno == ESRCH ? DL_ENOTFOUND
							 : DL_ESYS;
	return procfs_parse_stat(text, out);
}
