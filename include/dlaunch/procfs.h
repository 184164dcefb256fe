/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procfs.h - the one reader of /proc/PID/stat, for the agent (strays of a
 * round, hang reports, the control channel's checks) and the keeper (what
 * a dead agent left behind).
 *
 * The line is "pid (comm) S ppid pgrp session tty_nr tpgid flags minflt
 * cminflt majflt cmajflt utime stime cutime cstime priority nice
 * num_threads itrealvalue starttime ..." (proc(5)). comm is whatever the
 * process named itself, spaces and parentheses included, so it ends at the
 * last ')'; every field after it is checked: a number of its type (a sign
 * only where proc(5) gives one), then a space or the end of the line.
 */
#ifndef DLAUNCH_PROCFS_H
#define DLAUNCH_PROCFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* what the parts of dlaunch read of a process */
struct procfs_stat {
	char comm[64];	 /* its name, cut to fit (kernel threads run long) */
	char state;	 /* R S D Z T t X I ... */
	pid_t ppid;	 /* its parent */
	pid_t pgid;	 /* its process group */
	pid_t sid;	 /* its session */
	uint64_t utime;	 /* user CPU, clock ticks */
	uint64_t stime;	 /* system CPU, clock ticks */
	int64_t threads; /* num_threads */
	uint64_t start;	 /* starttime: clock ticks after boot */
};

/* procfs_parse_stat parses the text of a /proc/PID/stat file (NUL
 * terminated; what follows starttime is not read). 0, or DL_EINVAL
 * when it is not of that form or a number is out of its range; *out is
 * then unspecified. */
int procfs_parse_stat(const char *text, struct procfs_stat *out);

/* procfs_read_stat reads and parses /proc/PID/stat. 0; DL_ENOTFOUND when
 * pid is gone (or never was); DL_ESYS when the file cannot be read for
 * another reason (errno says which); DL_EINVAL when it does not parse. */
int procfs_read_stat(pid_t pid, struct procfs_stat *out);

/* procfs_read_small reads up to size - 1 bytes of the file at path into
 * buf (size > 0) and NUL-terminates them: the length, or -1 (errno set)
 * when the file cannot be opened or read. For small /proc and /sys files,
 * which the kernel hands out in one piece. */
ssize_t procfs_read_small(const char *path, char *buf, size_t size);

#endif
