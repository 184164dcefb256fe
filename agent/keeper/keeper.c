/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper.c - the keeper process and the workers' cgroup (see keeper.h and
 * docs/reliability.md, "What outlives an agent").
 *
 * The keeper is forked, not exec'd: it runs a few hundred lines already in
 * memory, closes every descriptor of the agent's but its pipe, and waits
 * in read(). It holds the process groups the workers announce (each
 * worker writes a spawn_notice before it execs, so none can fork before
 * the keeper could know of it) until the agent says the group is killed
 * and reaped. At the pipe's end of file it kills those groups, any
 * process left in their sessions (a worker's child that made its own
 * group) and, with a cgroup, everything in it (what made its own session
 * too), then removes the cgroup and the agent's record and exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "keeper.h"
#include "keeper_proc.h"
#include "keeper_record.h"

struct keeper {
	pid_t pid; /* the keeper process; 0: none (or gone) */
	int fd;	   /* write end of its pipe; -1: none */
	struct spawn_watch watch;
	char cgroup[PATH_MAX]; /* the workers' cgroup; "" when none */
	char record[PATH_MAX]; /* our record; "" when none is kept */
	char job[256];
	char boot_id[64];
	uint64_t self_start;
};

/* ------------------------------------------------------ the cgroup */

/* cgroup_self: the directory of our own cgroup v2, from
 * /proc/self/cgroup ("0::PATH") and the cgroup2 mount in mountinfo */
static int cgroup_self(char *out, size_t size)
{
	char line[4096], rel[PATH_MAX] = "", mnt[PATH_MAX] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(rel, sizeof(rel), "%s", line + 3);
		}
	fclose(f);
	if (rel[0] != '/')
		return -1;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char root[PATH_MAX], point[PATH_MAX], type[64];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash, " - %63s", type) != 1 ||
		    strcmp(type, "cgroup2") != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) !=
			2 ||
		    strcmp(root, "/") != 0 || strchr(point, '\\'))
			continue;
		snprintf(mnt, sizeof(mnt), "%s", point);
		break;
	}
	fclose(f);
	if (!mnt[0])
		return -1;
	if ((size_t)snprintf(out, size, "%s%s", mnt,
			     strcmp(rel, "/") == 0 ? "" : rel) >= size)
		return -1;
	return 0;
}

/* cgroup_make makes the workers' cgroup below our own: where cgroup v2 is
 * mounted, we may move processes (write our cgroup.procs) and make a
 * directory there. k->cgroup and k->watch.cgroup_fd, or nothing. */
static void cgroup_make(struct keeper *k)
{
	const char *env = getenv("DLAUNCH_CGROUP");
	char self[PATH_MAX], file[PATH_MAX + 32];
	if (env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0)) {
		log_debug("DLAUNCH_CGROUP=%s: workers are held by their "
			  "process groups only",
			  env);
		return;
	}
	if (cgroup_self(self, sizeof(self)) != 0)
		goto none;
	snprintf(file, sizeof(file), "%s/cgroup.procs", self);
	if (access(file, W_OK) != 0)
		goto none;
	if ((size_t)snprintf(k->cgroup, sizeof(k->cgroup), "%s/dlaunch.%ld",
			     self, (long)getpid()) >= sizeof(k->cgroup))
		goto none;
	/* one of an earlier process with our pid is garbage */
	if (mkdir(k->cgroup, 0755) != 0 &&
	    (errno != EEXIST || cgroup_kill(k->cgroup, 1, 2000) != 0 ||
	     mkdir(k->cgroup, 0755) != 0))
		goto none;
	k->watch.cgroup_fd =
	    open(k->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->watch.cgroup_fd < 0) {
		rmdir(k->cgroup);
		goto none;
	}
	log_debug("workers start in cgroup %s", k->cgroup);
	return;
none:
	k->cgroup[0] = '\0';
	log_debug("no cgroup v2 of ours to start the workers in; they are "
		  "held by their process groups and sessions only");
}

/* ------------------------------------------------------ the agent side */

/* keeper_exec starts dlaunch-keeper from our own binary's directory (a
 * small program: a copy of the agent would cost a fork of its whole
 * address space, and its copy-on-write faults after), in our process
 * group, not dying with us, the pipe's read end rfd as its stdin. Its pid,
 * or -1 when there is no such program or it cannot run. */
static pid_t keeper_exec(const struct keeper *k, int rfd)
{
	char self[PATH_MAX], path[PATH_MAX + 32], err[PATH_MAX + 128];
	char *argv[4];
	struct spawn_opts o;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;
	pid_t pid;
	int devnull;
	if (n <= 0)
		return -1;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/dlaunch-keeper", self);
	if (access(path, X_OK) != 0)
		return -1;
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (devnull < 0)
		return -1;
	argv[0] = path;
	argv[1] = (char *)(k->cgroup[0] ? k->cgroup : "-");
	argv[2] = (char *)(k->record[0] ? k->record : "-");
	argv[3] = NULL;
	memset(&o, 0, sizeof(o));
	o.file = path;
	o.argv = argv;
	o.stdin_fd = rfd;
	o.stdout_fd = devnull;
	o.stderr_fd = -1;
	o.flags = SPAWN_SAME_GROUP | SPAWN_OUTLIVE_PARENT;
	if (spawn_process(&o, &pid, err, sizeof(err)) != 0) {
		log_debug("%s", err);
		pid = -1;
	}
	close(devnull);
	return pid;
}

int keeper_start(const char *job, struct keeper **out)
{
	struct keeper *k = calloc(1, sizeof(*k));
	struct procfs_stat self;
	char dir[PATH_MAX];
	int p[2];
	pid_t pid;

	*out = NULL;
	if (!k)
		return DL_ENOMEM;
	k->fd = -1;
	k->watch.cgroup_fd = -1;
	k->watch.notify_fd = -1;
	snprintf(k->job, sizeof(k->job), "%s", job);
	record_boot_id(k->boot_id, sizeof(k->boot_id));
	if (procfs_read_stat(getpid(), &self) == 0)
		k->self_start = self.start;
	if (record_dir(dir, sizeof(dir)) == 0) {
		record_end_predecessors(dir, job, k->boot_id);
		if ((size_t)snprintf(k->record, sizeof(k->record),
				     "%s/%s.%ld.rec", dir, job,
				     (long)getpid()) >= sizeof(k->record))
			k->record[0] = '\0';
	} else {
		log_warn("no runtime directory of ours to keep a record of "
			 "the workers in (set DLAUNCH_RUNTIME_DIR); a later "
			 "agent could not end what this one leaves if it "
			 "and its keeper were both killed");
	}
	cgroup_make(k);
	keeper_record(k, NULL, 0);
	if (pipe2(p, O_CLOEXEC) != 0) {
		log_warn("cannot start the keeper: pipe: %s", strerror(errno));
		goto out;
	}
	pid = keeper_exec(k, p[0]);
	if (pid < 0) {
		/* no dlaunch-keeper beside us: a copy of this process keeps */
		pid = fork();
		if (pid == 0)
			keeper_run(p[0], k->cgroup, k->record);
	}
	if (pid < 0) {
		log_warn("cannot start the keeper: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		goto out;
	}
	close(p[0]);
	k->pid = pid;
	k->fd = p[1];
	k->watch.notify_fd = p[1];
	log_debug("keeper started as pid %ld", (long)pid);
out:
	*out = k;
	return 0;
}

const struct spawn_watch *keeper_watch(const struct keeper *k)
{
	return k ? &k->watch : NULL;
}

pid_t keeper_pid(const struct keeper *k)
{
	return k ? k->pid : 0;
}

int keeper_has_cgroup(const struct keeper *k)
{
	return k && k->watch.cgroup_fd >= 0;
}

/* keeper_lost: the keeper is gone; the workers go on without one */
static void keeper_lost(struct keeper *k, const char *why)
{
	log_warn("the keeper (pid %ld) is gone (%s): if this agent dies now, "
		 "its workers' children may outlive it until the next agent "
		 "of the job starts",
		 (long)k->pid, why);
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->watch.notify_fd = -1;
}

void keeper_forget(struct keeper *k, pid_t pgid)
{
	struct spawn_notice m = {SPAWN_NOTICE_GONE, (int)pgid};
	ssize_t n;
	if (!k || k->fd < 0)
		return;
	do
		n = write(k->fd, &m, sizeof(m));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(m))
		keeper_lost(k, n < 0 ? strerror(errno) : "short write");
}

int keeper_reaped(struct keeper *k, pid_t pid, int wstatus)
{
	char why[64], tmp[16];
	if (!k || k->pid <= 0 || pid != k->pid)
		return 0;
	if (WIFSIGNALED(wstatus))
		snprintf(
		    why, sizeof(why), "killed by %s",
		    spawn_signal_name(WTERMSIG(wstatus), tmp, sizeof(tmp)));
	else
		snprintf(why, sizeof(why), "exited with status %d",
			 WEXITSTATUS(wstatus));
	if (k->fd >= 0)
		keeper_lost(k, why);
	k->pid = 0;
	return 1;
}

void keeper_record(struct keeper *k, const pid_t *pgids, int n)
{
	struct record r;
	uint64_t *starts = NULL;
	if (!k || !k->record[0])
		return;
	memset(&r, 0, sizeof(r));
	if (n > 0) {
		starts = calloc((size_t)n, sizeof(*starts));
		if (!starts)
			return;
		for (int i = 0; i < n; i++) {
			struct procfs_stat pi;
			if (pgids[i] > 0 &&
			    procfs_read_stat(pgids[i], &pi) == 0)
				starts[i] = pi.start;
		}
	}
	snprintf(r.boot_id, sizeof(r.boot_id), "%s", k->boot_id);
	snprintf(r.job, sizeof(r.job), "%s", k->job);
	snprintf(r.cgroup, sizeof(r.cgroup), "%s", k->cgroup);
	r.agent = getpid();
	r.agent_start = k->self_start;
	r.pgids = (pid_t *)pgids;
	r.starts = starts;
	r.n = n;
	if (record_write(k->record, &r) != 0)
		log_warn("cannot write the record %s: %s", k->record,
			 strerror(errno));
	free(starts);
}

void keeper_kill_cgroup(struct keeper *k)
{
	int n;
	if (!keeper_has_cgroup(k))
		return;
	/* each pid, not cgroup.kill: on some kernels (6.18 here) a child
	 * started into a cgroup by clone3 after a cgroup.kill of it is
	 * killed at birth. No wait: the next round may start while these
	 * die. */
	n = cgroup_kill_procs(k->cgroup);
	if (n)
		log_debug("killed %d stray processes in the workers' cgroup",
			  n);
}

void keeper_free(struct keeper *k)
{
	if (!k)
		return;
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	if (k->pid > 0) {
		/* it removes the cgroup and the record, then exits */
		while (waitpid(k->pid, NULL, 0) < 0 && errno == EINTR)
			;
	} else {
		if (k->cgroup[0] && cgroup_kill(k->cgroup, 1, 5000) != 0)
			log_warn("cannot remove cgroup %s", k->cgroup);
		if (k->record[0])
			unlink(k->record);
	}
	if (k->watch.cgroup_fd >= 0)
		close(k->watch.cgroup_fd);
	free(k);
}
