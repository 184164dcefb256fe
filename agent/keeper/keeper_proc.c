/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper_proc.c - the keeper's life (keeper_run), and finding processes
 * in /proc (dlaunch/procfs.h reads them) and emptying a cgroup, which the
 * keeper and the record of a dead agent share (keeper_proc.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "dlaunch/spawn.h"
#include "keeper_proc.h"

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
		struct procfs_stat pi;
		int64_t pid;
		if (parse_i64(de->d_name, 1, INT32_MAX, &pid) != 0 ||
		    pid == self || procfs_read_stat((pid_t)pid, &pi) != 0 ||
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
	if (procfs_read_small(file, buf, sizeof(buf)) < 0)
		return 0;
	return strstr(buf, "populated 1") != NULL;
}

int cgroup_kill_procs(const char *path)
{
	char file[4200], line[32];
	FILE *f;
	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	int n = 0;
	f = fopen(file, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		int64_t pid;
		line[strcspn(line, "\n")] = '\0';
		if (parse_i64(line, 1, INT32_MAX, &pid) == 0 &&
		    kill((pid_t)pid, SIGKILL) == 0)
			n++;
	}
	fclose(f);
	return n;
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

struct held {
	pid_t *ids;
	int n, cap;
};

static void held_add(struct held *h, pid_t id)
{
	if (h->n == h->cap) {
		int cap = h->cap ? 2 * h->cap : 64;
		pid_t *p = realloc(h->ids, (size_t)cap * sizeof(*p));
		if (!p)
			return; /* the session scan of the others goes on */
		h->ids = p;
		h->cap = cap;
	}
	h->ids[h->n++] = id;
}

static void held_drop(struct held *h, pid_t id)
{
	for (int i = 0; i < h->n; i++)
		if (h->ids[i] == id) {
			h->ids[i] = h->ids[--h->n];
			return;
		}
}

/* keeper_end: the agent is gone; nothing it started may stay. Passes
 * until a pass finds nothing, for at most KEEPER_END_MS (a process in
 * uninterruptible sleep may outlast it: the keeper does not wait forever) */
#define KEEPER_END_MS 10000
static void keeper_end(struct held *h, const char *cgroup)
{
	uint64_t deadline = clock_now_ms() + KEEPER_END_MS;
	for (;;) {
		int found;
		/* a group's members are all in its leader's session, which
		 * the scan also finds (zombies aside, which kill() would
		 * count) */
		for (int i = 0; i < h->n; i++)
			kill(-h->ids[i], SIGKILL);
		found = proc_kill_sessions(h->ids, NULL, h->n);
		if (cgroup[0] && cgroup_kill(cgroup, 0, 1000) != 0)
			found++;
		if (found == 0 || clock_now_ms() >= deadline)
			break;
		usleep(5000); /* the killed are on their way out */
	}
}

void keeper_run(int rfd, const char *cgroup, const char *record)
{
	static const int ignored[] = {SIGINT,  SIGTERM, SIGHUP,	 SIGQUIT,
				      SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE,
				      SIGUSR1, SIGUSR2};
	struct held h = {NULL, 0, 0};
	struct sigaction sa;
	char buf[4096];
	size_t have = 0;
	sigset_t none;
	int devnull;

	prctl(PR_SET_NAME, "dlaunch-keeper");
	/* the pipe may come as stdin: out of the way of the dup2s below */
	if (rfd <= STDERR_FILENO) {
		int moved = fcntl(rfd, F_DUPFD_CLOEXEC, 3);
		if (moved >= 0)
			rfd = moved;
	}
	/* the agent's handlers mean nothing here; signals that would end
	 * the agent's session or group do not end its keeper */
	memset(&sa, 0, sizeof(sa));
	for (int sig = 1; sig < NSIG; sig++) {
		sa.sa_handler = SIG_DFL;
		for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]);
		     i++)
			if (ignored[i] == sig)
				sa.sa_handler = SIG_IGN;
		sigaction(sig, &sa, NULL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, STDIN_FILENO);
		dup2(devnull, STDOUT_FILENO);
	}
	/* none of the agent's sockets, pipes or listeners stays open here */
	if (rfd > 3)
		syscall(SYS_close_range, 3U, (unsigned)rfd - 1, 0U);
	syscall(SYS_close_range, (unsigned)rfd + 1, ~0U, 0U);
	if (chdir("/") != 0)
		log_debug("keeper: cannot change to /: %s", strerror(errno));

	for (;;) {
		ssize_t n = read(rfd, buf + have, sizeof(buf) - have);
		size_t off = 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* end of file: the agent is gone */
		have += (size_t)n;
		while (have - off >= sizeof(struct spawn_notice)) {
			struct spawn_notice m;
			memcpy(&m, buf + off, sizeof(m));
			off += sizeof(m);
			if (m.pid <= 1)
				continue;
			if (m.kind == SPAWN_NOTICE_STARTED)
				held_add(&h, (pid_t)m.pid);
			else if (m.kind == SPAWN_NOTICE_GONE)
				held_drop(&h, (pid_t)m.pid);
		}
		memmove(buf, buf + off, have - off);
		have -= off;
	}
	keeper_end(&h, cgroup);
	if (cgroup[0] && cgroup_kill(cgroup, 1, 1000) != 0)
		log_warn("keeper: cannot remove cgroup %s", cgroup);
	if (record[0])
		unlink(record);
	_exit(0);
}
