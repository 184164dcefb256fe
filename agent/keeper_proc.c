/*
 * keeper_proc.c - reading processes from /proc and emptying a cgroup, for
 * the keeper and for the record of a dead agent (keeper.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/parse.h"
#include "keeper.h"

/* read_small reads up to size-1 bytes of path into buf, NUL-terminated;
 * the length, or -1 */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((size_t)got < size - 1 &&
	       (n = read(fd, buf + got, size - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	return got;
}

int proc_stat(pid_t pid, struct proc_info *pi)
{
	char path[64], stat[1024], *p, *end;
	unsigned long long v[20];
	int i;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (read_small(path, stat, sizeof(stat)) <= 0)
		return -1;
	/* "pid (comm) S ppid pgrp session ...": comm may hold spaces and
	 * ')'; the start time is the 22nd field, the 20th after comm */
	p = strrchr(stat, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -1;
	pi->state = p[2];
	p += 3;
	for (i = 0; i < 19; i++) {
		while (*p == ' ')
			p++;
		errno = 0;
		v[i] = strtoull(p, &end, 10);
		if (end == p || errno)
			return -1;
		p = end;
	}
	pi->ppid = (pid_t)v[0];
	pi->pgid = (pid_t)v[1];
	pi->sid = (pid_t)v[2];
	pi->start = v[18];
	return 0;
}

int proc_kill_sessions(const pid_t *ids, const uint64_t *min_start, int n)
{
	DIR *d;
	struct dirent *de;
	int found = 0;
	pid_t self = getpid();
	if (n <= 0)
		return 0;
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct proc_info pi;
		int64_t pid;
		if (parse_i64(de->d_name, 1, INT32_MAX, &pid) != 0 ||
		    pid == self || proc_stat((pid_t)pid, &pi) != 0 ||
		    pi.state == 'Z' || pi.state == 'X')
			continue;
		for (int i = 0; i < n; i++) {
			if (pi.pgid != ids[i] && pi.sid != ids[i])
				continue;
			if (min_start && pi.start < min_start[i])
				continue;
			kill((pid_t)pid, SIGKILL);
			found++;
			break;
		}
	}
	closedir(d);
	return found;
}

/* cgroup_populated: 1 while processes are in the cgroup at path, 0 when
 * none (or it is gone) */
static int cgroup_populated(const char *path)
{
	char file[4200], buf[256];
	snprintf(file, sizeof(file), "%s/cgroup.events", path);
	if (read_small(file, buf, sizeof(buf)) < 0)
		return 0;
	return strstr(buf, "populated 1") != NULL;
}

/* cgroup_kill_procs SIGKILLs every pid listed in the cgroup (kernels
 * without cgroup.kill) */
static void cgroup_kill_procs(const char *path)
{
	char file[4200], line[32];
	FILE *f;
	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	f = fopen(file, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int64_t pid;
		line[strcspn(line, "\n")] = '\0';
		if (parse_i64(line, 1, INT32_MAX, &pid) == 0)
			kill((pid_t)pid, SIGKILL);
	}
	fclose(f);
}

int cgroup_kill(const char *path, int rmdir_too, int timeout_ms)
{
	char file[4200];
	uint64_t deadline = clock_now_ms() + (uint64_t)timeout_ms;
	int fd, killed = 0;
	snprintf(file, sizeof(file), "%s/cgroup.kill", path);
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		killed = write(fd, "1", 1) == 1;
		close(fd);
	}
	for (;;) {
		if (!killed)
			cgroup_kill_procs(path);
		if (!cgroup_populated(path))
			break;
		if (clock_now_ms() >= deadline)
			return -1;
		/* cgroup.events changes when the last one is gone (POLLPRI);
		 * the timeout bounds the wait where that is not signalled */
		snprintf(file, sizeof(file), "%s/cgroup.events", path);
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			struct pollfd p = {.fd = fd, .events = POLLPRI};
			char buf[256];
			ssize_t r = read(fd, buf, sizeof(buf));
			(void)r;
			poll(&p, 1, 10);
			close(fd);
		}
		killed = 0; /* a fork racing the first pass: kill again */
	}
	if (rmdir_too && rmdir(path) != 0 && errno != ENOENT)
		return -1;
	return 0;
}
