/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.c - hung-worker detection (--progress-timeout).
 *
 * A worker shows progress by writing to its stdout or stderr (output.c
 * notes the time of every read), by a `step` on its control channel
 * (control.c) or, when it is quiet or buffers its output, by touching
 * its progress file: DLAUNCH_PROGRESS_FILE, in its
 * attempt's log directory. One timer per agent, every min(timeout / 4,
 * 1 s), looks at the files: an mtime other than the one seen last time is
 * progress. The mtime is only compared with its previous value, never with
 * our clock, so a file system with another clock does no harm.
 *
 * A live worker without progress for the timeout is taken as hung (a
 * SIGSTOPped process, a deadlock, a collective that never returns): the
 * agent reports it as failed and stops the group like after any failure
 * (SIGTERM and SIGCONT to each group, so a stopped worker sees the
 * SIGTERM; SIGKILL after the grace), and the usual restart follows.
 */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "internal.h"

#define PROGRESS_CHECK_MAX_MS 1000
#define PROGRESS_CHECK_MIN_MS 10

/* file_mtime: the progress file's mtime, zero when it does not exist */
static struct timespec file_mtime(const struct agent_worker *w)
{
	struct stat st;
	struct timespec none = {0, 0};
	if (!w->progress_file[0] || stat(w->progress_file, &st) != 0)
		return none;
	return st.st_mtim;
}

/* progress_worker_started starts w's clock: a worker has the whole
 * timeout from its start to show its first progress. */
void progress_worker_started(struct agent_worker *w)
{
	w->last_progress_ms = clock_now_ms();
	w->progress_mtime = file_mtime(w);
}

static int by_last_progress(const void *x, const void *y)
{
	const struct agent_worker *a = *(struct agent_worker *const *)x;
	const struct agent_worker *b = *(struct agent_worker *const *)y;
	if (a->last_progress_ms != b->last_progress_ms)
		return a->last_progress_ms < b->last_progress_ms ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/*
 * report_hung tells the loop of the n workers found without progress,
 * longest silent first. Each is still alive: its record has exit code -1
 * and no signal, as the SIGTERM/SIGKILL of the stop that follows is ours,
 * not its failure. The loop takes them as the group's failure.
 */
static void report_hung(struct agent *a, struct agent_worker **hung, int n)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_WORKER_FAILED;
	ev.json = json_array();
	for (int i = 0; i < n; i++) {
		struct agent_worker *w = hung[i];
		json_t *f = report_hang(w, a->cfg.progress_timeout_ms);
		log_warn("rank %d (pid %ld) showed no progress for %g s (no "
			 "output, no step, progress file untouched): taking it "
			 "as hung",
			 w->rank, (long)w->pid,
			 (double)a->cfg.progress_timeout_ms / 1000);
		if (f) {
			json_object_set_new(f, "node_id",
					    json_string(a->node_id));
			json_array_append_new(ev.json, f);
		}
	}
	agent_fsm_post(&a->fsm, &ev);
}

static void on_progress_timer(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	struct agent_worker **hung;
	uint64_t now = clock_now_ms();
	int n = 0;
	(void)fd;
	(void)what;
	/* only a running group can hang; a stopping one has its deadline */
	if (a->fsm.state != AGENT_RUNNING || a->n_live == 0) {
		evtimer_del(a->progress_timer);
		return;
	}
	hung = calloc((size_t)a->n_workers, sizeof(*hung));
	if (!hung)
		return; /* the next tick tries again */
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		struct timespec m;
		if (w->pid <= 0 || w->reaped)
			continue;
		m = file_mtime(w);
		if (m.tv_sec != w->progress_mtime.tv_sec ||
		    m.tv_nsec != w->progress_mtime.tv_nsec) {
			w->progress_mtime = m;
			w->last_progress_ms = now;
		}
		if (now - w->last_progress_ms >= a->cfg.progress_timeout_ms)
			hung[n++] = w;
	}
	if (n > 0) {
		/* the one silent longest is the likeliest cause: it goes
		 * first, as the root cause of the report */
		qsort(hung, (size_t)n, sizeof(*hung), by_last_progress);
		report_hung(a, hung, n);
	}
	free(hung);
}

/*
 * progress_arm starts the agent's progress timer for the workers just
 * started (nothing without a progress timeout). Returns 0 or DL_ENOMEM.
 */
int progress_arm(struct agent *a)
{
	uint64_t every_ms = a->cfg.progress_timeout_ms / 4;
	struct timeval tv;
	if (a->cfg.progress_timeout_ms == 0)
		return 0;
	if (every_ms > PROGRESS_CHECK_MAX_MS)
		every_ms = PROGRESS_CHECK_MAX_MS;
	if (every_ms < PROGRESS_CHECK_MIN_MS)
		every_ms = PROGRESS_CHECK_MIN_MS;
	if (!a->progress_timer)
		a->progress_timer =
		    event_new(a->base, -1, EV_PERSIST, on_progress_timer, a);
	if (!a->progress_timer)
		return DL_ENOMEM;
	tv.tv_sec = (time_t)(every_ms / 1000);
	tv.tv_usec = (suseconds_t)(every_ms % 1000) * 1000;
	event_add(a->progress_timer, &tv);
	return 0;
}

void progress_release(struct agent *a)
{
	if (a->progress_timer)
		event_free(a->progress_timer);
	a->progress_timer = NULL;
}
