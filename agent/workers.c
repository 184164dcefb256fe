/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workers.c - one round's workers: spawn, reap, stop.
 *
 * Every worker is its own process group (spawn.h), so stopping one stops
 * whatever it started too: SIGTERM and SIGCONT to the group, then SIGKILL
 * to the group after --shutdown-timeout. Children reaped by the SIGCHLD
 * event; the agent is a child subreaper, so descendants that left their
 * group (setsid daemons) become its children when their parent dies, and
 * are killed as strays once no worker of the round is left.
 */
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control_proto.h"
#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "dlaunch/spawn.h"
#include "env.h"
#include "internal.h"

extern char **environ;

static void workers_kill_strays(struct agent *a);

static void spawn_failed(struct agent_worker *w, const char *msg)
{
	size_t n = strlen(msg);
	w->spawn_failed = 1;
	w->reaped = 1;
	w->finished = 1;
	w->end_wall_ms = clock_wall_ms();
	if (n > AGENT_TAIL_BYTES - 1)
		n = AGENT_TAIL_BYTES - 1;
	memcpy(w->tail, msg, n);
	w->tail_len = n;
	w->tail_pos = n;
}

/* worker_files makes the worker's log directory of this attempt and names
 * its error and progress files in it (neither exists until the worker
 * writes it). 0, or -1 with the reason in err. */
static int worker_files(struct agent *a, struct agent_worker *w, char *err,
			size_t err_size)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s/attempt_%d/rank_%d", a->log_dir,
		     a->fsm.r.restart_count,
		     w->rank) >= (int)sizeof(dir) - 16 ||
	    snprintf(w->error_file, sizeof(w->error_file), "%s/error.json",
		     dir) >= (int)sizeof(w->error_file) ||
	    snprintf(w->progress_file, sizeof(w->progress_file), "%s/progress",
		     dir) >= (int)sizeof(w->progress_file) ||
	    snprintf(w->pystack_file, sizeof(w->pystack_file), "%s/%s", dir,
		     HANG_PYSTACK_FILE) >= (int)sizeof(w->pystack_file) - 8) {
		snprintf(err, err_size, "log directory path too long");
		return -1;
	}
	/* its parents exist from the second worker on: one mkdir then */
	if (mkdir(dir, 0755) != 0 && errno != EEXIST &&
	    fs_mkdir_p(dir, 0755) != 0) {
		snprintf(err, err_size, "cannot create log directory %s: %s",
			 dir, strerror(errno));
		return -1;
	}
	/* files from an earlier attempt must not pass for this one's */
	unlink(w->error_file);
	unlink(w->progress_file);
	unlink(w->pystack_file);
	{
		char pid_file[PATH_MAX + 8];
		snprintf(pid_file, sizeof(pid_file), "%s.pid", w->pystack_file);
		unlink(pid_file);
	}
	return 0;
}

/* worker_env: what the worker's environment is made of (DESIGN.md
 * section 1), from the round and the agent's settings */
static void worker_env(const struct agent *a, const struct agent_worker *w,
		       struct agent_worker_env *e)
{
	const struct agent_round *r = &a->fsm.r;
	memset(e, 0, sizeof(*e));
	e->rank = w->rank;
	e->local_rank = w->local_rank;
	e->world_size = r->world_size;
	e->local_world_size = a->cfg.nproc;
	e->group_rank = r->node_rank;
	e->group_world_size = r->nnodes;
	e->role_rank = w->rank; /* one role per job: role ranks are global */
	e->role_world_size = r->world_size;
	e->role_name = a->cfg.role;
	e->master_addr = r->master_addr;
	e->master_port = r->master_port;
	e->restart_count = r->restart_count;
	e->max_restarts = a->cfg.max_restarts;
	e->run_id = a->cfg.run_id;
	e->error_file = w->error_file;
	e->job_id = a->cfg.run_id;
	e->round = r->round;
	e->node_id = a->node_id;
	e->progress_file = w->progress_file;
	if (a->site_dir[0]) {
		e->site_dir = a->site_dir;
		e->pystack_file = w->pystack_file;
	}
	/* one node alone talks over loopback: its environment stays what
	 * torchrun gives (DESIGN.md section 1) */
	if (r->nnodes > 1 && a->socket_ifname[0])
		e->socket_ifname = a->socket_ifname;
}

/* A worker between its preparation and its start: what the spawn borrows
 * lives here until every child of the round has exec'd. */
struct pending {
	struct spawn_opts o;
	char **env;
	int out_fd, err_fd; /* the child's ends of its output pipes */
	int ctl_fd;	    /* the child's end of its control channel */
	int ready;	    /* prepared: to be started */
	char err[PATH_MAX + 256];
};

static void pending_release(struct pending *p)
{
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	if (p->ctl_fd >= 0)
		close(p->ctl_fd);
	p->out_fd = p->err_fd = p->ctl_fd = -1;
	agent_env_free(p->env);
	p->env = NULL;
}

/* start_failed: w could not be started (message in err) */
static void start_failed(struct agent_worker *w, const char *err)
{
	log_error("rank %d: %s", w->rank, err);
	output_close(&w->out[0]);
	output_close(&w->out[1]);
	spawn_failed(w, err);
}

/* prepare_one makes what worker w is started with: its files, its
 * environment and its output pipes. A worker that cannot have them is
 * marked failed. */
static void prepare_one(struct agent *a, struct agent_worker *w,
			struct pending *p)
{
	struct agent_worker_env e;

	p->out_fd = p->err_fd = p->ctl_fd = -1;
	if (worker_files(a, w, p->err, sizeof(p->err)) != 0)
		goto fail;
	worker_env(a, w, &e);
	/* without a channel the worker is plain, as under torchrun */
	if (control_open(w, &p->ctl_fd) != 0)
		log_warn("rank %d: cannot make its control channel: %s; it "
			 "runs without one",
			 w->rank, strerror(errno));
	e.control_fd = p->ctl_fd;
	e.control_version = CONTROL_VERSION;
	if (agent_env_build(environ, &e, &p->env) != 0) {
		snprintf(p->err, sizeof(p->err), "out of memory");
		goto fail;
	}
	if (output_open(w, AGENT_STD_OUT, &p->out_fd) != 0 ||
	    output_open(w, AGENT_STD_ERR, &p->err_fd) != 0) {
		snprintf(p->err, sizeof(p->err),
			 "cannot set up output of rank %d", w->rank);
		goto fail;
	}
	memset(&p->o, 0, sizeof(p->o));
	p->o.file = a->cfg.argv[0];
	p->o.argv = a->cfg.argv;
	p->o.envp = p->env;
	p->o.stdin_fd = -1;
	p->o.stdout_fd = p->out_fd;
	p->o.stderr_fd = p->err_fd;
	p->o.watch = keeper_watch(a->keeper);
	p->o.keep_fd = p->ctl_fd;
	p->ready = 1;
	return;
fail:
	pending_release(p);
	start_failed(w, p->err);
}

/* finish_one waits for a started worker's exec; a failed exec counts as
 * a failed start. */
static void finish_one(struct agent *a, struct agent_worker *w)
{
	char err[PATH_MAX + 256];
	pid_t child = w->child.pid;
	if (w->spawn_failed)
		return;
	if (spawn_finish(&w->child, &w->pid, err, sizeof(err)) != 0) {
		/* spawn_finish reaped it: its group is no one's now */
		keeper_forget(a->keeper, child);
		start_failed(w, err);
		return;
	}
	a->n_live++;
	progress_worker_started(w);
	log_debug("started rank %d (local %d) as pid %ld", w->rank,
		  w->local_rank, (long)w->pid);
}

/* start_all starts the prepared workers, all under way at once
 * (spawn_start_many), then waits for their execs; errors are logged in
 * rank order. 0, or DL_ENOMEM when the round's bookkeeping cannot be
 * had (the workers are then marked failed). */
static int start_all(struct agent *a, struct pending *pend)
{
	int n = a->n_workers, m = 0, *rc = NULL, rcode = 0;
	struct spawn_opts *o = calloc((size_t)n, sizeof(*o));
	struct spawn_child *c = calloc((size_t)n, sizeof(*c));
	char *errs = calloc((size_t)n, PATH_MAX + 256);
	int *idx = calloc((size_t)n, sizeof(*idx));
	pid_t *pgids = calloc((size_t)n, sizeof(*pgids));
	rc = calloc((size_t)n, sizeof(*rc));
	if (!o || !c || !errs || !idx || !rc || !pgids) {
		for (int i = 0; i < n; i++)
			if (pend[i].ready)
				start_failed(&a->workers[i], "out of memory");
		rcode = DL_ENOMEM;
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (pend[i].ready) {
			o[m] = pend[i].o;
			idx[m++] = i;
		}
	spawn_start_many(o, c, rc, errs, PATH_MAX + 256, m);
	for (int j = 0; j < m; j++) {
		struct agent_worker *w = &a->workers[idx[j]];
		w->child = c[j];
		/* the children have their copies (or never will) */
		pending_release(&pend[idx[j]]);
		if (rc[j] != 0)
			start_failed(w, errs + (size_t)j * (PATH_MAX + 256));
		else if (c[j].cgroup_errno && !a->cgroup_warned) {
			a->cgroup_warned = 1;
			log_warn("cannot start workers in their cgroup: %s; "
				 "they are held by their process groups only",
				 strerror(c[j].cgroup_errno));
		}
	}
	for (int j = 0; j < m; j++)
		finish_one(a, &a->workers[idx[j]]);
	/* the record holds every live group: kept workers' too */
	m = 0;
	for (int i = 0; i < n; i++)
		if (a->workers[i].pid > 0 && !a->workers[i].reaped)
			pgids[m++] = a->workers[i].pid;
	keeper_record(a->keeper, pgids, m);
out:
	free(o);
	free(c);
	free(errs);
	free(idx);
	free(rc);
	free(pgids);
	return rcode;
}

/* workers_gone: the set is over. What is left of it are descendants that
 * escaped their group (setsid daemons) and were handed to us; they may
 * hold a worker's pipe open, so they go now. */
static void workers_gone(struct agent *a)
{
	if (a->gone)
		return;
	a->gone = 1;
	if (a->kill_timer)
		evtimer_del(a->kill_timer);
	control_cancel(a); /* no worker is left to answer */
	workers_kill_strays(a);
	agent_fsm_post_kind(&a->fsm, AGENT_EV_WORKERS_GONE, 0);
}

static int worker_failed(const struct agent_worker *w)
{
	return w->spawn_failed || !WIFEXITED(w->wstatus) ||
	       WEXITSTATUS(w->wstatus) != 0;
}

static void log_finished(struct agent *a, const struct agent_worker *w)
{
	/* an exit we did not ask for is news; one during a stop is not */
	int level = a->fsm.state == AGENT_RUNNING ? LOG_WARN : LOG_INFO;
	char tmp[16];
	if (w->spawn_failed)
		log_error("rank %d could not be started", w->rank);
	else if (WIFSIGNALED(w->wstatus))
		log_msg(
		    level, "rank %d (pid %ld) killed by %s", w->rank,
		    (long)w->pid,
		    spawn_signal_name(WTERMSIG(w->wstatus), tmp, sizeof(tmp)));
	else if (worker_failed(w))
		log_msg(level, "rank %d (pid %ld) exited with status %d",
			w->rank, (long)w->pid, WEXITSTATUS(w->wstatus));
	else
		log_debug("rank %d (pid %ld) exited with status 0", w->rank,
			  (long)w->pid);
}

/* worker_finished: w is reaped and its output drained. A failure goes to
 * the loop with its record; the last one ends the set. */
static void worker_finished(struct agent *a, struct agent_worker *w)
{
	w->finished = 1;
	if (!w->spawn_failed)
		a->n_live--;
	log_finished(a, w);
	control_worker_finished(w);
	if (worker_failed(w)) {
		struct agent_event ev;
		memset(&ev, 0, sizeof(ev));
		ev.kind = AGENT_EV_WORKER_FAILED;
		/* only the running round keeps it; stops end in "failures" */
		if (a->fsm.state == AGENT_RUNNING) {
			ev.json = report_failure(w);
			if (ev.json)
				json_object_set_new(ev.json, "node_id",
						    json_string(a->node_id));
		}
		agent_fsm_post(&a->fsm, &ev);
	}
	if (a->n_live == 0 && !a->starting)
		workers_gone(a);
}

void workers_check_finished(struct agent_worker *w)
{
	if (w->reaped && w->out[0].fd < 0 && w->out[1].fd < 0 && !w->finished)
		worker_finished(w->a, w);
}

/* slot_init: worker slot i of this round, empty (no process, no fd) */
static void slot_init(struct agent *a, struct agent_worker *w, int i)
{
	memset(w, 0, sizeof(*w));
	w->a = a;
	w->local_rank = i;
	w->rank = a->fsm.r.rank_offset + i;
	w->out[0].fd = w->out[1].fd = -1;
	w->out[0].file_fd = w->out[1].file_fd = -1;
	w->ctl.fd = -1;
}

/*
 * workers_start spawns cfg.nproc workers for round a->fsm.r. A worker that
 * cannot be started counts as failed (posted once every other worker has
 * been started). Returns 0, or DL_ENOMEM.
 */
int workers_start(struct agent *a)
{
	struct pending *pend;
	int i, n = a->cfg.nproc;
	control_cancel(a);
	workers_free(a);
	a->gone = 0;
	a->workers = calloc((size_t)n, sizeof(*a->workers));
	if (!a->workers) {
		/* a round whose workers cannot exist has failed at once */
		log_error("cannot start %d worker(s): out of memory", n);
		agent_fsm_post_kind(&a->fsm, AGENT_EV_WORKER_FAILED, 0);
		workers_gone(a);
		return DL_ENOMEM;
	}
	a->n_workers = n;
	a->n_live = 0;
	a->starting = 1;
	if (a->fsm.r.nnodes > 1 && a->socket_ifname[0] && !a->socket_said) {
		log_info("%s", a->socket_why);
		a->socket_said = 1;
	}
	for (i = 0; i < n; i++)
		slot_init(a, &a->workers[i], i);
	pend = calloc((size_t)n, sizeof(*pend));
	if (!pend) {
		for (i = 0; i < n; i++)
			start_failed(&a->workers[i], "out of memory");
	} else {
		for (i = 0; i < n; i++)
			prepare_one(a, &a->workers[i], &pend[i]);
		start_all(a, pend);
		free(pend);
	}
	if (a->n_live > 0 && progress_arm(a) != 0)
		log_warn("cannot start the progress timer: out of memory; "
			 "hung workers go undetected this round");
	for (i = 0; i < n; i++)
		if (a->workers[i].spawn_failed)
			worker_finished(a, &a->workers[i]);
	a->starting = 0;
	if (a->n_live == 0)
		workers_gone(a);
	return 0;
}

/*
 * workers_reform: the in-place path's new round. The live workers stay,
 * renumbered for round a->fsm.r, and are sent its membership
 * (control_membership); a worker that has finished (the one that failed)
 * is started again as a new process with the round's environment.
 */
void workers_reform(struct agent *a)
{
	struct pending *pend;
	int n = a->n_workers, n_new = 0;
	for (int i = 0; i < n; i++) {
		struct agent_worker *w = &a->workers[i];
		w->rank = a->fsm.r.rank_offset + w->local_rank;
		w->kept = w->pid > 0 && !w->reaped;
	}
	for (int i = 0; i < n; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (!w->kept && !w->finished) {
			/* reaped, its output still draining: it cannot be
			 * replaced yet, so the node cannot stay */
			log_warn("rank %d has not finished yet; restarting "
				 "this node's workers",
				 w->rank);
			agent_fsm_post_kind(&a->fsm, AGENT_EV_REFORM_MISSED, 0);
			return;
		}
	}
	control_membership(a);
	pend = calloc((size_t)n, sizeof(*pend));
	a->starting = 1;
	for (int i = 0; i < n; i++) {
		struct agent_worker *w = &a->workers[i];
		if (w->kept)
			continue;
		output_close(&w->out[0]);
		output_close(&w->out[1]);
		control_close(w);
		slot_init(a, w, i);
		if (!pend) {
			start_failed(w, "out of memory");
			continue;
		}
		log_info("starting rank %d again as a new process (the others "
			 "of this node stay)",
			 w->rank);
		prepare_one(a, w, &pend[i]);
		n_new++;
	}
	if (pend && n_new > 0) {
		a->gone = 0;
		start_all(a, pend);
	}
	free(pend);
	/* a slot that could not start counts as failed, as in
	 * workers_start (the slots kept were never spawn_failed) */
	for (int i = 0; i < n; i++)
		if (!a->workers[i].kept && a->workers[i].spawn_failed)
			worker_finished(a, &a->workers[i]);
	a->starting = 0;
	if (a->n_live == 0)
		workers_gone(a);
}

/* signal_group signals a worker's process group (pgid == the worker's
 * pid); never the bare pid, which may belong to someone else once reaped */
static void signal_group(pid_t pgid, int sig)
{
	kill(-pgid, sig);
}

static void on_kill_timer(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	(void)fd;
	(void)what;
	if (a->n_live > 0)
		log_warn("%d worker(s) still running %llums after SIGTERM; "
			 "sending SIGKILL",
			 a->n_live,
			 (unsigned long long)a->cfg.shutdown_timeout_ms);
	workers_kill_all(a);
}

/*
 * workers_stop sends sig (and SIGCONT, so stopped ones see it) to every
 * live worker's group and arms the SIGKILL deadline; the set's
 * WORKERS_GONE follows once the last one has finished.
 */
void workers_stop(struct agent *a, int sig)
{
	struct timeval tv;
	int i;
	control_cancel(a); /* no re-form is awaited from a stopping set */
	if (a->n_live == 0)
		return;
	for (i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (w->pid > 0 && !w->reaped) {
			signal_group(w->pid, sig);
			signal_group(w->pid, SIGCONT);
		}
	}
	if (!a->kill_timer)
		a->kill_timer = evtimer_new(a->base, on_kill_timer, a);
	if (a->kill_timer && !evtimer_pending(a->kill_timer, NULL)) {
		tv.tv_sec = (time_t)(a->cfg.shutdown_timeout_ms / 1000);
		tv.tv_usec =
		    (suseconds_t)(a->cfg.shutdown_timeout_ms % 1000) * 1000;
		evtimer_add(a->kill_timer, &tv);
	}
}

/* workers_kill_all sends SIGKILL to every worker group not yet reaped and
 * to strays. */
void workers_kill_all(struct agent *a)
{
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		if (w->pid > 0 && !w->reaped)
			signal_group(w->pid, SIGKILL);
	}
	workers_kill_strays(a);
}

/* kill_if_stray SIGKILLs our child pid unless it is a live worker. */
static void kill_if_stray(struct agent *a, pid_t pid)
{
	if (pid == keeper_pid(a->keeper) || hang_owns(a, pid))
		return;
	for (int i = 0; i < a->n_workers; i++)
		if (a->workers[i].pid == pid && !a->workers[i].reaped)
			return;
	log_debug("killing stray process %lld", (long long)pid);
	kill(pid, SIGKILL);
}

/* strays_from_children kills the strays listed in our threads'
 * /proc/self/task/TID/children files (one small read per thread instead
 * of one per process on the machine). Returns -1 when the kernel offers
 * no such files (CONFIG_PROC_CHILDREN off). */
static int strays_from_children(struct agent *a)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int seen = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], list[4096], *p, *end;
		struct buf all;
		ssize_t n;
		int fd;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children",
			 de->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		seen = 1;
		/* a long list arrives in several reads */
		buf_init(&all, 1 << 20);
		while ((n = read(fd, list, sizeof(list))) > 0)
			if (buf_append(&all, list, (size_t)n) != 0)
				break;
		close(fd);
		for (p = all.data; p && *p; p = end) {
			long long pid = strtoll(p, &end, 10);
			if (end == p)
				break;
			if (pid > 0)
				kill_if_stray(a, (pid_t)pid);
		}
		buf_release(&all);
	}
	closedir(d);
	return seen ? 0 : -1;
}

/*
 * workers_kill_strays kills children of the agent that are not workers of
 * the round: descendants reparented to us (we are a subreaper) after their
 * own parent died. A process that is gone meanwhile is simply skipped.
 */
static void workers_kill_strays(struct agent *a)
{
	DIR *d;
	struct dirent *de;
	pid_t self = getpid();
	if (strays_from_children(a) == 0)
		return;
	/* no children files: every process's parent, from /proc/PID/stat */
	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		struct procfs_stat st;
		int64_t pid;
		if (parse_i64(de->d_name, 1, INT32_MAX, &pid) != 0 ||
		    procfs_read_stat((pid_t)pid, &st) != 0)
			continue;
		if (st.ppid != self || st.state == 'Z')
			continue;
		kill_if_stray(a, (pid_t)pid);
	}
	closedir(d);
}

static int all_reaped(const struct agent *a)
{
	for (int i = 0; i < a->n_workers; i++)
		if (a->workers[i].pid > 0 && !a->workers[i].reaped)
			return 0;
	return 1;
}

/* workers_on_sigchld reaps every exited child. A reaped worker's group is
 * killed at once: what it left behind has no one to wait for it. */
void workers_on_sigchld(struct agent *a)
{
	pid_t pid;
	int status, reaped = 0;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct agent_worker *w = NULL;
		for (int i = 0; i < a->n_workers; i++)
			if (a->workers[i].pid == pid && !a->workers[i].reaped)
				w = &a->workers[i];
		if (!w) {
			/* a helper of a hang diagnosis (eu-stack, gdb) */
			if (hang_reaped(a, pid, status))
				continue;
			/* the keeper, or a stray we adopted (whose death may
			 * have handed us its own children: sweep again) */
			if (!keeper_reaped(a->keeper, pid, status))
				reaped++;
			continue;
		}
		reaped++;
		w->reaped = 1;
		w->wstatus = status;
		w->end_wall_ms = clock_wall_ms();
		signal_group(w->pid, SIGKILL);
		/* killed and reaped: the keeper lets the group go */
		keeper_forget(a->keeper, w->pid);
		workers_check_finished(w);
	}
	/* once every worker is reaped, what is left of the round are
	 * descendants that escaped their group (setsid daemons) and were
	 * handed to us, or are still in the workers' cgroup; they may hold
	 * a worker's pipe open, so they go now (once per batch of deaths:
	 * with many spawning threads a sweep reads a file per thread) */
	if (reaped > 0 && all_reaped(a)) {
		workers_kill_strays(a);
		keeper_kill_cgroup(a->keeper);
	}
}

void workers_free(struct agent *a)
{
	for (int i = 0; i < a->n_workers; i++) {
		output_close(&a->workers[i].out[0]);
		output_close(&a->workers[i].out[1]);
		control_close(&a->workers[i]);
	}
	free(a->workers);
	a->workers = NULL;
	a->n_workers = 0;
	a->n_live = 0;
	if (a->kill_timer)
		evtimer_del(a->kill_timer);
}
