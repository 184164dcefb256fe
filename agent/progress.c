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
 * SIGTERM; SIGKILL after the grace), and the usual restart follows --
 * after a hang diagnosis (hang.c), whose verdict the failure then carries.
 *
 * The same timer finds stalls and stragglers (--hang-timeout,
 * --straggler-steps) from what ranks report of their progress: a `step`
 * on the control channel or a touch of the progress file (output does not
 * count: a rank stuck in a collective may still log). When no rank of the
 * node has moved for the hang timeout, after one did at least once (so a
 * long start-up is no stall), the node is stalled: a diagnosis, then the
 * same failure as a hung worker, once per round. A rank whose step is
 * more than --straggler-steps behind the node's median while another rank
 * moved within the last interval is logged as a straggler and counted.
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
	w->moved_ms = 0; /* a stall counts from its first move */
	w->straggling = 0;
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
	json_t *failures = json_array();
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
			json_array_append_new(failures, f);
		}
	}
	/* the stacks first, then the kill (hang.c posts the failures) */
	hang_diagnose(a, "progress-timeout", failures);
}

/* stalled: no rank of the node moved for the hang timeout, after one
 * did; taken as the failure of every live rank, the one still longest
 * first */
static void stalled(struct agent *a, uint64_t now)
{
	struct agent_worker **live;
	json_t *failures = json_array();
	int n = 0;
	live = calloc((size_t)a->n_workers, sizeof(*live));
	if (!live || !failures) {
		free(live);
		json_decref(failures);
		return;
	}
	a->stall_round = a->fsm.r.round + 1;
	for (int i = 0; i < a->n_workers; i++)
		if (a->workers[i].pid > 0 && !a->workers[i].reaped)
			live[n++] = &a->workers[i];
	qsort(live, (size_t)n, sizeof(*live), by_last_progress);
	log_warn("no rank of this node moved its step for %g s (ranks %d-%d): "
		 "a stall; diagnosing",
		 (double)a->cfg.hang_timeout_ms / 1000, n ? live[0]->rank : -1,
		 n ? live[n - 1]->rank : -1);
	for (int i = 0; i < n; i++) {
		json_t *f = report_hang(live[i], a->cfg.hang_timeout_ms);
		char msg[256];
		if (!f)
			continue;
		snprintf(msg, sizeof(msg),
			 "stalled: no rank of node %s moved its step for %g s "
			 "(this rank last moved %g s ago)",
			 a->node_id, (double)a->cfg.hang_timeout_ms / 1000,
			 live[i]->moved_ms
			     ? (double)(now - live[i]->moved_ms) / 1000
			     : -1.0);
		json_object_set_new(f, "message", json_string(msg));
		json_object_set_new(f, "node_id", json_string(a->node_id));
		json_array_append_new(failures, f);
	}
	free(live);
	hang_diagnose(a, "stall", failures);
}

static int by_step(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* stragglers: ranks more than straggler_steps behind the node's median
 * step of STRAGGLER_LAG_MS (or a little more) ago, while another rank
 * moved within the last window_ms. Not the median of now: the ranks'
 * step lines reach the agent at slightly different times, so at
 * thousands of steps a second a snapshot finds a synchronous rank steps
 * behind (190 such in 10 minutes of bench.py hangfp); a rank that is
 * slow for real has not even reached where the others were a second
 * ago. Judged once per STRAGGLER_LAG_MS. */
#define STRAGGLER_LAG_MS 1000
static void stragglers(struct agent *a, uint64_t now, uint64_t window_ms)
{
	uint64_t steps[AGENT_MAX_NPROC], median, ref, newest = 0;
	int n = 0;
	for (int i = 0; i < a->n_workers && n < AGENT_MAX_NPROC; i++) {
		struct agent_worker *w = &a->workers[i];
		if (w->pid > 0 && !w->reaped && w->ctl.has_step) {
			steps[n++] = w->ctl.step;
			if (w->moved_ms > newest)
				newest = w->moved_ms;
		}
	}
	if (n < 2 || now - newest > window_ms)
		return;
	qsort(steps, (size_t)n, sizeof(steps[0]), by_step);
	median = steps[n / 2];
	if (a->straggler_ref_ms && now - a->straggler_ref_ms < STRAGGLER_LAG_MS)
		return;
	ref = a->straggler_ref_step;
	a->straggler_ref_step = median;
	if (!a->straggler_ref_ms) {
		a->straggler_ref_ms = now;
		return;
	}
	a->straggler_ref_ms = now;
	for (int i = 0; i < a->n_workers; i++) {
		struct agent_worker *w = &a->workers[i];
		int behind;
		if (w->pid <= 0 || w->reaped || !w->ctl.has_step)
			continue;
		behind = w->ctl.step + (uint64_t)a->cfg.straggler_steps < ref;
		if (behind && !w->straggling) {
			a->stragglers++;
			log_warn(
			    "job=%s event=straggler rank=%d pid=%ld step=%llu "
			    "median=%llu count=%u: rank %d is more than %d "
			    "steps behind the others of this node",
			    a->cfg.run_id, w->rank, (long)w->pid,
			    (unsigned long long)w->ctl.step,
			    (unsigned long long)median, a->stragglers, w->rank,
			    a->cfg.straggler_steps);
		} else if (!behind && w->straggling) {
			log_info("rank %d caught up (step %llu)", w->rank,
				 (unsigned long long)w->ctl.step);
		}
		w->straggling = behind;
	}
}

/* check_stall: the node's newest move is older than the hang timeout */
static void check_stall(struct agent *a, uint64_t now)
{
	uint64_t newest = 0;
	if (a->stall_round == a->fsm.r.round + 1 || hang_busy(a))
		return;
	for (int i = 0; i < a->n_workers; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (w->pid > 0 && !w->reaped && w->moved_ms > newest)
			newest = w->moved_ms;
	}
	if (newest && now - newest >= a->cfg.hang_timeout_ms)
		stalled(a, now);
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
	/* a diagnosis whose end fails the round is under way */
	if (hang_failing(a))
		return;
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
			w->moved_ms = now;
		}
		if (a->cfg.progress_timeout_ms &&
		    now - w->last_progress_ms >= a->cfg.progress_timeout_ms)
			hung[n++] = w;
	}
	if (n > 0) {
		/* the one silent longest is the likeliest cause: it goes
		 * first, as the root cause of the report */
		qsort(hung, (size_t)n, sizeof(*hung), by_last_progress);
		report_hung(a, hung, n);
	} else if (a->cfg.hang_timeout_ms) {
		check_stall(a, now);
	}
	if (a->cfg.straggler_steps > 0)
		stragglers(a, now,
			   a->cfg.hang_timeout_ms ? a->cfg.hang_timeout_ms
						  : 60000);
	free(hung);
}

/*
 * progress_arm starts the agent's progress timer for the workers just
 * started (nothing without a progress timeout). Returns 0 or DL_ENOMEM.
 */
int progress_arm(struct agent *a)
{
	uint64_t every_ms = PROGRESS_CHECK_MAX_MS;
	struct timeval tv;
	if (a->cfg.progress_timeout_ms == 0 && a->cfg.hang_timeout_ms == 0 &&
	    a->cfg.straggler_steps == 0)
		return 0;
	/* new workers: steps start over (or from a checkpoint) */
	a->straggler_ref_ms = 0;
	a->straggler_ref_step = 0;
	if (a->cfg.progress_timeout_ms &&
	    a->cfg.progress_timeout_ms / 4 < every_ms)
		every_ms = a->cfg.progress_timeout_ms / 4;
	if (a->cfg.hang_timeout_ms && a->cfg.hang_timeout_ms / 4 < every_ms)
		every_ms = a->cfg.hang_timeout_ms / 4;
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
