/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_collect.c - one node's collection for a hang report (docs/hangs.md,
 * "The node report"), on the agent's event loop.
 *
 * For every worker of the round, each part with its own deadline so that
 * nothing a worker does (or fails to do) can hold the agent:
 *   1. /proc at once: state letter, CPU ticks, threads, wait channel; the
 *      last step it reported on its control channel and its age;
 *   2. its Python stacks, asked for at once: `dump` on the control channel
 *      where the worker declared it (the answer file also carries
 *      dlaunch-train's flight recorder), else SIGUSR2 to the Python
 *      process that dlaunch's sitecustomize registered (hang_site.c);
 *      HANG_PYTHON_TIMEOUT_MS;
 *   3. after HANG_CPU_INTERVAL_MS, /proc again (the CPU it used over the
 *      interval), then its native stacks: `eu-stack -p PID`, or gdb in
 *      batch mode where eu-stack is missing, as a helper process whose
 *      output a pipe brings onto the loop; killed at
 *      HANG_NATIVE_TIMEOUT_MS (a process in uninterruptible sleep holds
 *      ptrace's attach).
 * A 50 ms tick polls the Python files and the deadlines; once every part
 * is in or late, the node report is built (what is late or refused is in
 * the worker's "notes") and handed to the callback. Helpers are reaped by
 * the agent's SIGCHLD handler, which hands us theirs (hang_reaped).
 */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
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
#include "dlaunch/fsutil.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "dlaunch/spawn.h"
#include "hang.h"
#include "internal.h"

#define TICK_MS		     50
#define NATIVE_READ_MAX	     (256 * 1024) /* read at most this of eu-stack */
#define DUMP_FILE_MAX	     (4 * 1024 * 1024)
#define PYSTACK_STABLE_TICKS 2 /* unchanged this many ticks: complete */

enum py_how { PY_NONE, PY_CONTROL, PY_SIGNAL, PY_DONE };

struct hc_worker {
	struct hang_collect *c;
	int rank, local_rank;
	pid_t pid; /* 0: never started */
	int alive; /* when the collection began */
	struct hang_proc p0, p1;
	int have_p1;
	int has_step;
	uint64_t step, step_ms;
	char dir[PATH_MAX]; /* the worker's log directory */
	/* Python */
	enum py_how py;
	char py_file[PATH_MAX + 32];
	uint64_t py_deadline;
	off_t py_size;
	int py_stable;
	json_t *python; /* text */
	json_t *flight; /* array */
	/* native */
	pid_t nat_pid;
	int nat_fd;
	struct event *nat_ev;
	struct buf nat_out;
	int nat_running, nat_reaped, nat_eof, nat_status, nat_late;
	int nat_done;
	int nat_zombie; /* the leader is a zombie: a live thread is traced */
	uint64_t nat_deadline;
	json_t *notes;
};

struct hang_collect {
	struct agent *a;
	json_t *trigger;
	char id[HANG_ID_MAX + 1];
	hang_collect_cb done;
	struct hc_worker *w;
	int n;
	struct event *tick;
	uint64_t t0, t_interval;
	int natives_started;
	int finished;
	char native_tool[PATH_MAX]; /* "" when none */
	int native_is_gdb;
};

static void note(struct hc_worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(struct hc_worker *w, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	json_array_append_new(w->notes, hang_text(text, strlen(text), 512));
}

static struct agent_worker *agent_worker_of(struct hang_collect *c,
					    const struct hc_worker *w)
{
	struct agent *a = c->a;
	for (int i = 0; i < a->n_workers; i++)
		if (a->workers[i].pid == w->pid && w->pid > 0 &&
		    !a->workers[i].reaped)
			return &a->workers[i];
	return NULL;
}

static int is_python_command(const struct agent *a)
{
	const char *p = a->cfg.argv && a->cfg.argv[0] ? a->cfg.argv[0] : "";
	const char *base = strrchr(p, '/');
	return strncmp(base ? base + 1 : p, "python", 6) == 0;
}

/* ------------------------------------------------------------ Python */

/* py_target: the pid dlaunch's sitecustomize registered in w, when it is
 * still a live process of w's group; 0 otherwise */
static pid_t py_target(const struct hc_worker *w)
{
	char path[PATH_MAX + 40], *data = NULL, *nl;
	size_t len;
	int64_t pid;
	pid_t out = 0;
	struct procfs_stat pi;
	snprintf(path, sizeof(path), "%s.pid", w->py_file);
	if (fs_read_file(path, 64, &data, &len) != 0)
		return 0;
	nl = strchr(data, '\n');
	if (nl)
		*nl = '\0';
	/* only a process of the worker's own group: never a stranger that
	 * might die of SIGUSR2 */
	if (parse_i64(data, 1, INT32_MAX, &pid) == 0 &&
	    procfs_read_stat((pid_t)pid, &pi) == 0 && pi.pgid == w->pid &&
	    pi.state != 'Z')
		out = (pid_t)pid;
	free(data);
	return out;
}

static void py_request(struct hang_collect *c, struct hc_worker *w)
{
	struct agent_worker *aw = agent_worker_of(c, w);
	char dump[PATH_MAX + 32];
	pid_t target;
	w->py_deadline = c->t0 + HANG_PYTHON_TIMEOUT_MS;
	snprintf(dump, sizeof(dump), "%s/%s", w->dir, HANG_DUMP_FILE);
	unlink(dump);
	if (aw && control_send_dump(aw, c->id, dump) == 0) {
		snprintf(w->py_file, sizeof(w->py_file), "%s", dump);
		w->py = PY_CONTROL;
		return;
	}
	snprintf(w->py_file, sizeof(w->py_file), "%s/%s", w->dir,
		 HANG_PYSTACK_FILE);
	target = py_target(w);
	if (target > 0 && truncate(w->py_file, 0) == 0 &&
	    kill(target, HANG_PY_SIGNAL) == 0) {
		w->py = PY_SIGNAL;
		w->py_size = 0;
		w->py_stable = 0;
		return;
	}
	w->py = PY_DONE;
	if (is_python_command(c->a))
		note(w, "python: no stacks (the interpreter did not load "
			"dlaunch's sitecustomize, e.g. python -E or -I, and "
			"the worker did not declare dump)");
}

/* py_take_dump reads the control channel's answer file */
static void py_take_dump(struct hc_worker *w)
{
	char *data = NULL;
	size_t len = 0;
	json_t *o = NULL, *v;
	w->py = PY_DONE;
	if (fs_read_file(w->py_file, DUMP_FILE_MAX, &data, &len) != 0) {
		note(w, "python: dumped, but %s could not be read", w->py_file);
		return;
	}
	if (jsonh_parse(data, len, 16, &o, NULL, 0) != 0) {
		note(w, "python: the dump file is not a JSON object");
		free(data);
		return;
	}
	free(data);
	v = json_object_get(o, "python");
	if (json_is_string(v))
		w->python = hang_text(json_string_value(v),
				      json_string_length(v), HANG_TEXT_MAX);
	v = json_object_get(o, "flight");
	if (json_is_array(v))
		w->flight = json_incref(v);
	json_decref(o);
}

/* py_poll: a signalled worker's file is complete once it has stopped
 * growing for a few ticks */
static void py_poll(struct hang_collect *c, struct hc_worker *w, uint64_t now)
{
	struct stat st;
	if (w->py == PY_SIGNAL && stat(w->py_file, &st) == 0 &&
	    st.st_size > 0) {
		if (st.st_size == w->py_size) {
			if (++w->py_stable >= PYSTACK_STABLE_TICKS) {
				char *data = NULL;
				size_t len = 0;
				w->py = PY_DONE;
				if (fs_read_file(w->py_file, DUMP_FILE_MAX,
						 &data, &len) == 0)
					w->python =
					    hang_text(data, len, HANG_TEXT_MAX);
				free(data);
				return;
			}
		} else {
			w->py_size = st.st_size;
			w->py_stable = 0;
		}
	}
	if ((w->py == PY_SIGNAL || w->py == PY_CONTROL) &&
	    now >= w->py_deadline) {
		struct hang_proc p;
		int stopped = hang_proc_read(w->pid, &p) == 0 &&
			      (p.state == 'T' || p.state == 't');
		int signalled = w->py == PY_SIGNAL;
		w->py = PY_DONE;
		note(w, "python: no answer in %d ms%s", HANG_PYTHON_TIMEOUT_MS,
		     stopped	 ? " (the process is stopped)"
		     : signalled ? " (it ignores or blocks SIGUSR2, or a "
				   "handler of its own replaced dlaunch's)"
				 : " to dump (its control thread is blocked)");
	}
	(void)c;
}

/* ------------------------------------------------------------ native */

static void native_check(struct hc_worker *w);

static void on_native(evutil_socket_t fd, short what, void *arg)
{
	struct hc_worker *w = arg;
	char chunk[8192];
	(void)what;
	for (int i = 0; i < 16; i++) {
		ssize_t n = read((int)fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			w->nat_eof = 1;
			event_del(w->nat_ev);
			close(w->nat_fd);
			w->nat_fd = -1;
			native_check(w);
			return;
		}
		/* past the maximum: read on, keep nothing more */
		buf_append(&w->nat_out, chunk, (size_t)n);
	}
}

static void find_native_tool(struct hang_collect *c)
{
	char err[256];
	if (spawn_resolve("eu-stack", c->native_tool, sizeof(c->native_tool),
			  err, sizeof(err)) == 0)
		return;
	if (spawn_resolve("gdb", c->native_tool, sizeof(c->native_tool), err,
			  sizeof(err)) == 0) {
		c->native_is_gdb = 1;
		return;
	}
	c->native_tool[0] = '\0';
}

/* native_start runs the stack helper on target: the worker's pid, or a
 * thread of it that still runs where the leader is a zombie (either
 * tool then shows every thread of the group) */
static void native_start(struct hang_collect *c, struct hc_worker *w,
			 pid_t target)
{
	char pid[32], err[512];
	int pfd[2], fl;
	struct spawn_opts o;
	char *eu[] = {c->native_tool, "-p", pid, NULL};
	char *gdb[] = {c->native_tool,	      "-batch", "-nx", "-p", pid, "-ex",
		       "thread apply all bt", NULL};
	w->nat_done = 1;
	if (!c->native_tool[0]) {
		note(w, "native: neither eu-stack (elfutils) nor gdb found");
		return;
	}
	snprintf(pid, sizeof(pid), "%ld", (long)target);
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		note(w, "native: no pipe: %s", strerror(errno));
		return;
	}
	memset(&o, 0, sizeof(o));
	o.file = c->native_tool;
	o.argv = c->native_is_gdb ? gdb : eu;
	o.stdin_fd = -1;
	o.stdout_fd = pfd[1];
	o.stderr_fd = pfd[1];
	if (spawn_process(&o, &w->nat_pid, err, sizeof(err)) != 0) {
		close(pfd[0]);
		close(pfd[1]);
		note(w, "native: %s", err);
		return;
	}
	close(pfd[1]);
	fl = fcntl(pfd[0], F_GETFL);
	if (fl >= 0)
		fcntl(pfd[0], F_SETFL, fl | O_NONBLOCK);
	w->nat_fd = pfd[0];
	w->nat_ev =
	    event_new(c->a->base, pfd[0], EV_READ | EV_PERSIST, on_native, w);
	if (!w->nat_ev) {
		close(pfd[0]);
		w->nat_fd = -1;
		w->nat_eof = 1;
	} else {
		event_add(w->nat_ev, NULL);
	}
	w->nat_running = 1;
	w->nat_done = 0;
	w->nat_deadline = clock_now_ms() + HANG_NATIVE_TIMEOUT_MS;
}

/* native_refusal: the first line of the helper's output that says why it
 * could not attach, or NULL */
static const char *native_refusal(const char *out)
{
	if (strstr(out, "Operation not permitted"))
		return "ptrace refused (Operation not permitted)";
	if (strstr(out, "No such process"))
		return "the process was gone";
	return NULL;
}

/* late_helper_killed: the helper was killed while it waited to stop
 * the worker. Its PTRACE_ATTACH left a SIGSTOP pending in the worker,
 * which would stop it the moment it leaves its uninterruptible sleep:
 * SIGCONT discards it (a worker already stopped stays so). */
static void late_helper_killed(struct hc_worker *w)
{
	struct hang_proc now;
	int in_d = w->have_p1 && w->p1.state == 'D';
	if (in_d)
		note(w,
		     "native: no answer in %d ms (the process is in "
		     "uninterruptible sleep (D)%s%s: ptrace cannot stop it)",
		     HANG_NATIVE_TIMEOUT_MS, w->p1.wchan[0] ? " in " : "",
		     w->p1.wchan);
	else
		note(w,
		     "native: no answer in %d ms (uninterruptible sleep, "
		     "or a slow symbol lookup)",
		     HANG_NATIVE_TIMEOUT_MS);
	if (agent_worker_of(w->c, w) && hang_proc_read(w->pid, &now) == 0 &&
	    (!w->have_p1 || (w->p1.state != 'T' && w->p1.state != 't')))
		kill(w->pid, SIGCONT);
}

static void native_check(struct hc_worker *w)
{
	const char *out, *why;
	if (w->nat_done || !w->nat_reaped || !w->nat_eof)
		return;
	w->nat_done = 1;
	w->nat_running = 0;
	out = buf_cstr(&w->nat_out);
	/* a zombie leader refuses the attach; its live threads do not */
	why = w->nat_zombie ? NULL : native_refusal(out);
	if (w->nat_late) {
		late_helper_killed(w);
		if (!*out)
			return;
	} else if (why) {
		char comm[32];
		pid_t tracer = hang_proc_tracer(w->pid, comm, sizeof(comm));
		if (tracer > 0)
			note(w,
			     "native: %s: it is already traced by pid %ld (%s)",
			     why, (long)tracer, comm[0] ? comm : "?");
		else
			note(w, "native: %s", why);
		return;
	} else if (w->nat_zombie) {
		if (strstr(out, "#0"))
			note(w, "native: the stacks of the threads that still "
				"run (the exited main thread has none)");
		else
			note(w,
			     "native: no stack of the threads that still "
			     "run came (%s exited with status %d)",
			     w->c->native_is_gdb ? "gdb" : "eu-stack",
			     WIFEXITED(w->nat_status)
				 ? WEXITSTATUS(w->nat_status)
				 : 128 + WTERMSIG(w->nat_status));
		if (!*out)
			return;
	} else if (!WIFEXITED(w->nat_status) ||
		   WEXITSTATUS(w->nat_status) != 0) {
		/* eu-stack exits 1 when one thread could not be unwound,
		 * with the other threads' stacks printed: keep them */
		note(w, "native: %s exited with status %d",
		     w->c->native_is_gdb ? "gdb" : "eu-stack",
		     WIFEXITED(w->nat_status) ? WEXITSTATUS(w->nat_status)
					      : 128 + WTERMSIG(w->nat_status));
		if (!*out)
			return;
	}
}

/* ------------------------------------------------------------ report */

static json_t *worker_entry(struct hang_collect *c, struct hc_worker *w,
			    uint64_t now)
{
	json_t *e = json_object();
	const struct hang_proc *p = w->have_p1 ? &w->p1 : &w->p0;
	char letter[2] = {0, 0};
	const char *state;
	uint64_t interval = (w->have_p1 ? c->t_interval : now) - c->t0;
	long hz = sysconf(_SC_CLK_TCK);
	if (!e)
		return NULL;
	if (!w->alive) {
		state = "gone";
	} else {
		letter[0] = p->state;
		state = hang_state_name(p->state);
	}
	json_object_set_new(e, "rank", json_integer(w->rank));
	json_object_set_new(e, "local_rank", json_integer(w->local_rank));
	json_object_set_new(e, "pid", json_integer(w->pid));
	json_object_set_new(e, "state", json_string(state));
	json_object_set_new(e, "proc_state", json_string(letter));
	json_object_set_new(e, "wchan", json_string(w->alive ? p->wchan : ""));
	json_object_set_new(
	    e, "cpu_ms",
	    json_integer(
		w->alive && w->have_p1 && hz > 0 &&
			w->p1.cpu_ticks >= w->p0.cpu_ticks
		    ? (json_int_t)((w->p1.cpu_ticks - w->p0.cpu_ticks) * 1000 /
				   (uint64_t)hz)
		    : 0));
	json_object_set_new(e, "interval_ms",
			    json_integer((json_int_t)interval));
	json_object_set_new(e, "threads",
			    json_integer(w->alive ? p->threads : 0));
	if (w->has_step) {
		json_object_set_new(e, "step",
				    json_integer((json_int_t)w->step));
		json_object_set_new(
		    e, "step_age_ms",
		    json_integer((json_int_t)(now - w->step_ms)));
	} else {
		json_object_set_new(e, "step", json_null());
		json_object_set_new(e, "step_age_ms", json_null());
	}
	if (w->python)
		json_object_set(e, "python", w->python);
	if (w->nat_out.len > 0)
		json_object_set_new(
		    e, "native",
		    hang_text(w->nat_out.data, w->nat_out.len, HANG_TEXT_MAX));
	if (w->flight)
		json_object_set(e, "flight", w->flight);
	json_object_set(e, "notes", w->notes);
	return e;
}

static json_t *build_report(struct hang_collect *c)
{
	struct agent *a = c->a;
	uint64_t now = clock_now_ms();
	char host[256] = "";
	json_t *r = json_object(), *workers = json_array();
	if (!r || !workers) {
		json_decref(r);
		json_decref(workers);
		return NULL;
	}
	gethostname(host, sizeof(host) - 1);
	json_object_set_new(r, "version", json_integer(1));
	json_object_set_new(r, "job", json_string(a->cfg.run_id));
	json_object_set_new(r, "node", json_string(a->node_id));
	json_object_set_new(r, "host", hang_text(host, strlen(host), 255));
	json_object_set_new(r, "round",
			    json_integer((json_int_t)a->fsm.r.round));
	json_object_set(r, "trigger", c->trigger);
	json_object_set_new(r, "nproc", json_integer(a->cfg.nproc));
	for (int i = 0; i < c->n; i++)
		json_array_append_new(workers, worker_entry(c, &c->w[i], now));
	json_object_set_new(r, "workers", workers);
	json_object_set_new(r, "time_ms",
			    json_integer((json_int_t)clock_wall_ms()));
	if (hang_report_bound(r, HANG_REPORT_MAX) != 0)
		log_warn("hang report of node %s is over %d bytes even without "
			 "its stacks",
			 a->node_id, HANG_REPORT_MAX);
	return r;
}

/* ------------------------------------------------------------- steps */

static void finish(struct hang_collect *c)
{
	json_t *report;
	if (c->finished)
		return;
	c->finished = 1;
	evtimer_del(c->tick);
	report = build_report(c);
	c->done(c->a, report);
}

static void start_natives(struct hang_collect *c, uint64_t now)
{
	c->natives_started = 1;
	c->t_interval = now;
	find_native_tool(c);
	for (int i = 0; i < c->n; i++) {
		struct hc_worker *w = &c->w[i];
		if (!w->alive) {
			w->nat_done = 1;
			continue;
		}
		if (hang_proc_read(w->pid, &w->p1) != 0) {
			w->alive = 0;
			w->nat_done = 1;
			note(w, "gone: it exited during the dump");
			continue;
		}
		w->have_p1 = 1;
		if (w->p1.state == 'Z') {
			char threads[512];
			pid_t live = 0;
			int n = hang_proc_threads(w->pid, threads,
						  sizeof(threads), &live);
			if (n > 0) {
				/* pthread_exit in main: the process lives on
				 * in its other threads */
				note(w,
				     "zombie: its main thread exited, %d "
				     "other thread(s) still run: %s",
				     n, threads);
				w->nat_zombie = 1;
				native_start(c, w, live);
				continue;
			}
		}
		if (w->p1.state == 'Z' || w->p1.state == 'X') {
			w->nat_done = 1;
			note(w, "zombie: no stacks (it exited and was not "
				"reaped)");
			continue;
		}
		native_start(c, w, w->pid);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct hang_collect *c = arg;
	uint64_t now = clock_now_ms();
	int pending = 0;
	(void)fd;
	(void)what;
	if (!c->natives_started && now - c->t0 >= HANG_CPU_INTERVAL_MS)
		start_natives(c, now);
	for (int i = 0; i < c->n; i++) {
		struct hc_worker *w = &c->w[i];
		py_poll(c, w, now);
		if (w->nat_running && !w->nat_late && now >= w->nat_deadline) {
			w->nat_late = 1;
			kill(-w->nat_pid, SIGKILL);
		}
		if (w->py == PY_SIGNAL || w->py == PY_CONTROL ||
		    (c->natives_started && !w->nat_done))
			pending = 1;
	}
	/* a helper that does not even die of SIGKILL is given up on */
	if ((c->natives_started && !pending) ||
	    now - c->t0 > HANG_CPU_INTERVAL_MS + HANG_NATIVE_TIMEOUT_MS + 1000)
		finish(c);
}

struct hang_collect *hang_collect_start(struct agent *a, json_t *trigger,
					hang_collect_cb done)
{
	struct hang_collect *c = calloc(1, sizeof(*c));
	struct timeval tv = {0, TICK_MS * 1000};
	const char *id;
	if (!c)
		return NULL;
	c->a = a;
	c->done = done;
	c->trigger = json_deep_copy(trigger);
	id = json_string_value(json_object_get(trigger, "id"));
	snprintf(c->id, sizeof(c->id), "%s", id ? id : "");
	c->n = a->n_workers;
	c->w = calloc((size_t)(c->n ? c->n : 1), sizeof(*c->w));
	c->tick = event_new(a->base, -1, EV_PERSIST, on_tick, c);
	if (!c->trigger || !c->w || !c->tick) {
		hang_collect_free(c);
		return NULL;
	}
	c->t0 = clock_now_ms();
	for (int i = 0; i < c->n; i++) {
		struct agent_worker *aw = &a->workers[i];
		struct hc_worker *w = &c->w[i];
		char *slash;
		w->c = c;
		w->nat_fd = -1;
		buf_init(&w->nat_out, NATIVE_READ_MAX);
		w->notes = json_array();
		w->rank = aw->rank;
		w->local_rank = aw->local_rank;
		w->pid = aw->pid;
		snprintf(w->dir, sizeof(w->dir), "%s", aw->error_file);
		slash = strrchr(w->dir, '/');
		if (slash)
			*slash = '\0';
		if (aw->ctl.has_step) {
			w->has_step = 1;
			w->step = aw->ctl.step;
			w->step_ms = aw->ctl.step_ms;
		}
		w->alive = aw->pid > 0 && !aw->reaped &&
			   hang_proc_read(aw->pid, &w->p0) == 0;
		if (!w->alive) {
			note(w, "gone: %s",
			     aw->pid > 0 ? "it exited before the dump"
					 : "it was never started");
			w->py = PY_DONE;
			continue;
		}
		if (w->p0.state == 'Z' || w->p0.state == 'X') {
			w->py = PY_DONE; /* no stacks: noted with the native */
			continue;
		}
		py_request(c, w);
	}
	event_add(c->tick, &tv);
	return c;
}

void hang_collect_free(struct hang_collect *c)
{
	if (!c)
		return;
	for (int i = 0; c->w && i < c->n; i++) {
		struct hc_worker *w = &c->w[i];
		if (w->nat_running && !w->nat_reaped && w->nat_pid > 0)
			kill(-w->nat_pid, SIGKILL);
		if (w->nat_ev)
			event_free(w->nat_ev);
		if (w->nat_fd >= 0)
			close(w->nat_fd);
		buf_release(&w->nat_out);
		json_decref(w->python);
		json_decref(w->flight);
		json_decref(w->notes);
	}
	if (c->tick)
		event_free(c->tick);
	json_decref(c->trigger);
	free(c->w);
	free(c);
}

int hang_collect_reaped(struct hang_collect *c, pid_t pid, int status)
{
	for (int i = 0; c && i < c->n; i++) {
		struct hc_worker *w = &c->w[i];
		if (w->nat_running && !w->nat_reaped && w->nat_pid == pid) {
			w->nat_reaped = 1;
			w->nat_status = status;
			/* whatever it started goes with it */
			kill(-pid, SIGKILL);
			native_check(w);
			return 1;
		}
	}
	return 0;
}

int hang_collect_owns(const struct hang_collect *c, pid_t pid)
{
	for (int i = 0; c && i < c->n; i++)
		if (c->w[i].nat_running && !c->w[i].nat_reaped &&
		    c->w[i].nat_pid == pid)
			return 1;
	return 0;
}

void hang_collect_dumped(struct hang_collect *c, struct agent_worker *aw,
			 const char *id)
{
	for (int i = 0; c && i < c->n; i++) {
		struct hc_worker *w = &c->w[i];
		if (w->pid != aw->pid || w->py != PY_CONTROL)
			continue;
		if (strcmp(id, c->id) != 0) {
			log_debug("rank %d: dumped %s ignored (not awaited)",
				  w->rank, id);
			return;
		}
		py_take_dump(w);
		return;
	}
}
