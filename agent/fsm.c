/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm.c - the agent's round loop: one table of states x events.
 *
 *   IDLE -start-> JOINING -joined-> RUNNING -gone (all succeeded)-> DONE
 *                   ^                 | failed          | restart
 *                   |                 v                 v
 *                   +--- REPORTING <- FAILING -----> RESTARTING
 *                   |       (report answered / workers gone)  |
 *                   +-----------------------------------------+
 *
 * and, once the job has ended, ENDING (or FAILING_END / REPORTING_END
 * while a failure report is still in flight) -> FETCHING (the job failed:
 * the root cause is fetched and printed) -> EXITED; a signal leads
 * through SIGNALLED -> LEAVING -> EXITED.
 *
 * The in-place path (docs/worker-protocol.md), taken instead of a stop
 * when every live worker of the node declared abort and membership:
 *
 *   RUNNING -restart-> ABORTING -aborted-> JOINING_KEPT -joined->
 *   REFORMING -reformed-> RUNNING
 *
 * and after a failure of one of ours FAILING_KEPT (report and abort in
 * flight) -> REPORTING_KEPT or ABORTING -> JOINING_KEPT. Any miss (a
 * deadline, a kept worker exiting or breaking the protocol) leaves for
 * the plain path: the workers are stopped (RESTARTING, FAILING) and,
 * once the new round is known, started again in it (RESPAWNING). Those
 * cells are in fsm_inplace.c.
 *
 * Each cell is a small named function; an empty cell ignores the event.
 * A preemption (SIGTERM, every worker declared preempt; preempt.c):
 *
 *   RUNNING -SIGTERM-> PREEMPT_ASKING -preempt (the stop step)->
 *   PREEMPTING -gone-> DONE -stop (PREEMPTED)-> EXITED
 *
 * and a node that hears the stop step first from the rendezvous goes
 * from RUNNING to PREEMPTING at once. A refusal, the end of the round or
 * the end of --preempt-grace falls back to the plain signal
 * (SIGNALLED).
 *
 * The table is the documentation of how the agent behaves: read it from
 * the bottom of this file. The loop decides; the effects (fsm.h) act.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/spawn.h"
#include "fsm.h"
#include "fsm_cells.h"
#include "rdzv/rdzv.h"

typedef void (*cell_fn)(struct agent_fsm *f, struct agent_event *ev);

static const char *const state_names[AGENT_N_STATES] = {
    [AGENT_IDLE] = "IDLE",
    [AGENT_JOINING] = "JOINING",
    [AGENT_RUNNING] = "RUNNING",
    [AGENT_DONE] = "DONE",
    [AGENT_FAILING] = "FAILING",
    [AGENT_FAILING_END] = "FAILING_END",
    [AGENT_REPORTING] = "REPORTING",
    [AGENT_REPORTING_END] = "REPORTING_END",
    [AGENT_RESTARTING] = "RESTARTING",
    [AGENT_ENDING] = "ENDING",
    [AGENT_SIGNALLED] = "SIGNALLED",
    [AGENT_FETCHING] = "FETCHING",
    [AGENT_LEAVING] = "LEAVING",
    [AGENT_EXITED] = "EXITED",
    [AGENT_ABORTING] = "ABORTING",
    [AGENT_FAILING_KEPT] = "FAILING_KEPT",
    [AGENT_REPORTING_KEPT] = "REPORTING_KEPT",
    [AGENT_JOINING_KEPT] = "JOINING_KEPT",
    [AGENT_REFORMING] = "REFORMING",
    [AGENT_RESPAWNING] = "RESPAWNING",
    [AGENT_PREEMPT_ASKING] = "PREEMPT_ASKING",
    [AGENT_PREEMPTING] = "PREEMPTING",
};

static const char *const event_names[AGENT_N_EVENTS] = {
    [AGENT_EV_START] = "start",
    [AGENT_EV_JOINED] = "joined",
    [AGENT_EV_JOIN_ENDED] = "join_ended",
    [AGENT_EV_JOIN_FAILED] = "join_failed",
    [AGENT_EV_WORKER_FAILED] = "worker_failed",
    [AGENT_EV_WORKERS_GONE] = "workers_gone",
    [AGENT_EV_RESTART] = "restart",
    [AGENT_EV_STOP] = "stop",
    [AGENT_EV_REPORT_DONE] = "report_done",
    [AGENT_EV_SIGNAL] = "signal",
    [AGENT_EV_STATUS] = "status",
    [AGENT_EV_LEFT] = "left",
    [AGENT_EV_ABORTED] = "aborted",
    [AGENT_EV_REFORMED] = "reformed",
    [AGENT_EV_REFORM_MISSED] = "reform_missed",
    [AGENT_EV_PREEMPT] = "preempt",
    [AGENT_EV_PREEMPT_FAILED] = "preempt_failed",
    [AGENT_EV_PREEMPT_EXPIRED] = "preempt_expired",
};

const char *agent_state_name(enum agent_state s)
{
	return (unsigned)s < AGENT_N_STATES ? state_names[s] : "?";
}

const char *agent_event_name(enum agent_event_kind k)
{
	return (unsigned)k < AGENT_N_EVENTS ? event_names[k] : "?";
}

void fsm_enter(struct agent_fsm *f, enum agent_state s)
{
	log_debug("agent: %s -> %s", state_names[f->state], state_names[s]);
	f->state = s;
}

/* ------------------------------------------------------ shared steps */

/* fsm_end_job takes the job's final state: exit 0 when it succeeded, else 1
 * with the root-cause report. */
void fsm_end_job(struct agent_fsm *f, const struct agent_event *ev)
{
	/* a preempted job stopped every rank at one step and saved it */
	int failed = strcmp(ev->job_state, "SUCCEEDED") != 0 &&
		     strcmp(ev->job_state, "PREEMPTED") != 0;
	log_info("job %s ended: %s", f->job,
		 ev->job_state[0] ? ev->job_state : "?");
	f->exit_status = failed ? 1 : 0;
	f->report_on_exit = failed;
}

/* after_end: no worker is left and the job is over. */
static void after_end(struct agent_fsm *f)
{
	if (f->report_on_exit) {
		fsm_enter(f, AGENT_FETCHING);
		f->ops->status(f->ctx);
		return;
	}
	fsm_enter(f, AGENT_EXITED);
	f->ops->finish(f->ctx);
}

/* fsm_after_signal: no worker is left and we were told to go. */
void fsm_after_signal(struct agent_fsm *f)
{
	if (f->joined) {
		fsm_enter(f, AGENT_LEAVING);
		f->ops->leave(f->ctx);
		return;
	}
	fsm_enter(f, AGENT_EXITED);
	f->ops->finish(f->ctx);
}

void fsm_rejoin(struct agent_fsm *f)
{
	fsm_enter(f, AGENT_JOINING);
	f->ops->join(f->ctx);
}

void fsm_set_recovery(struct agent_fsm *f, const char *how, const char *why)
{
	snprintf(f->recovery, sizeof(f->recovery), "%s", how);
	snprintf(f->recovery_why, sizeof(f->recovery_why), "%s", why);
}

/* fsm_restarted: the workers of this node are stopped; why goes with the
 * round they are started again in */
void fsm_restarted(struct agent_fsm *f, const char *why)
{
	fsm_set_recovery(f, "restarted", why);
}

#define NOT_DECLARED "not every worker declared abort and membership"

/* fsm_entered: this node's workers are running in the round; says how they
 * came there (the rendezvous hears it with the next heartbeat) */
void fsm_entered(struct agent_fsm *f)
{
	log_info("job=%s round=%llu event=round_entered recovery=%s why=\"%s\"",
		 f->job, (unsigned long long)f->r.round, f->recovery,
		 f->recovery_why);
	if (f->ops->entered)
		f->ops->entered(f->ctx);
}

void fsm_log_round_over(struct agent_fsm *f, const struct agent_event *ev)
{
	log_info("round %llu ended (job %s); stopping workers to rejoin",
		 (unsigned long long)f->r.round,
		 ev->job_state[0] ? ev->job_state : "?");
}

/* fsm_keep_failures appends the record (an object) or records (an array) of
 * ev to this round's failures. */
void fsm_keep_failures(struct agent_fsm *f, struct agent_event *ev)
{
	if (json_is_array(ev->json))
		json_array_extend(f->failures, ev->json);
	else if (json_is_object(ev->json))
		json_array_append(f->failures, ev->json);
}

/* ------------------------------------------------------------- cells */

static void start(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_rejoin(f);
}

static void joined(struct agent_fsm *f, struct agent_event *ev)
{
	if (!f->joined)
		fsm_set_recovery(f, "started", "the first round of this node");
	else if (strcmp(f->recovery, "restarted") != 0)
		fsm_restarted(f, "no worker was left to keep");
	f->r = ev->assign;
	f->joined = 1;
	json_array_clear(f->failures);
	fsm_entered(f);
	fsm_enter(f, AGENT_RUNNING);
	f->ops->round_begin(f->ctx, f->r.round);
	f->ops->start_workers(f->ctx, &f->r);
}

/* the job ended before this join. A node that took part in it ends as
 * the job did; one that never joined it (late, or a rerun the rendezvous
 * refused) ran nothing, which is never a success (exit 1). */
static void join_ended(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	if (!f->joined) {
		log_error(
		    "job %s had ended before this node joined it: nothing "
		    "ran here (a late node, or a rerun of an ended job id "
		    "that the rendezvous refused: see its message above)",
		    f->job);
		f->exit_status = 1;
	}
	after_end(f);
}

static void join_failed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	f->exit_status = 1;
	f->report_on_exit = 0;
	after_end(f);
}

/* a worker of the running round failed: the round is over for us;
 * nothing more is said about it but the report, whose answer decides
 * what follows */
static void run_failed(struct agent_fsm *f, struct agent_event *ev)
{
	int keep = f->ops->in_place(f->ctx);
	fsm_keep_failures(f, ev);
	fsm_enter(f, keep ? AGENT_FAILING_KEPT : AGENT_FAILING);
	f->ops->round_end(f->ctx);
	f->ops->report(f->ctx, f->r.round, 1, f->failures);
	if (keep) {
		f->ops->abort_workers(f->ctx, f->r.round,
				      "a worker of this node failed");
		return;
	}
	fsm_restarted(f, NOT_DECLARED);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

static void run_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	log_info("all %d worker(s) of this node succeeded", f->nproc);
	fsm_enter(f, AGENT_DONE);
	f->ops->report(f->ctx, f->r.round, 0, NULL);
}

static void run_restart(struct agent_fsm *f, struct agent_event *ev)
{
	if (f->ops->in_place(f->ctx)) {
		char reason[64];
		log_info("round %llu ended (job %s); keeping this node's "
			 "workers: abort, rejoin, re-form",
			 (unsigned long long)f->r.round,
			 ev->job_state[0] ? ev->job_state : "?");
		snprintf(reason, sizeof(reason), "round %llu ended",
			 (unsigned long long)f->r.round);
		fsm_enter(f, AGENT_ABORTING);
		f->ops->round_end(f->ctx);
		f->ops->abort_workers(f->ctx, f->r.round, reason);
		return;
	}
	fsm_log_round_over(f, ev);
	fsm_restarted(f, NOT_DECLARED);
	fsm_enter(f, AGENT_RESTARTING);
	f->ops->round_end(f->ctx);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

static void run_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_ENDING);
	f->ops->round_end(f->ctx);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

static void done_restart(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_log_round_over(f, ev);
	fsm_restarted(f, "its workers had finished");
	f->ops->round_end(f->ctx);
	fsm_rejoin(f);
}

static void done_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	f->ops->round_end(f->ctx);
	after_end(f);
}

static void failing_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_REPORTING);
}

static void failing_end_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_REPORTING_END);
}

static void failing_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_FAILING_END);
}

static void failing_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_RESTARTING);
}

static void failing_end_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_ENDING);
}

static void reporting_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_REPORTING_END);
}

static void reporting_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_rejoin(f);
}

static void reporting_end_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	after_end(f);
}

static void restarting_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_rejoin(f);
}

static void restarting_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_ENDING);
}

static void ending_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	after_end(f);
}

/* a signal to the agent: forwarded to the workers; then leave */
void fsm_signalled(struct agent_fsm *f, struct agent_event *ev)
{
	char tmp[16];
	log_warn("received %s; forwarding it to the workers and stopping",
		 spawn_signal_name(ev->sig, tmp, sizeof(tmp)));
	f->exit_status = 128 + ev->sig;
	f->report_on_exit = 0;
	f->ops->cancel(f->ctx);
	if (!agent_fsm_has_workers(f->state)) {
		fsm_after_signal(f);
		return;
	}
	fsm_enter(f, AGENT_SIGNALLED);
	f->ops->stop_workers(f->ctx, ev->sig);
}

static void signalled_again(struct agent_fsm *f, struct agent_event *ev)
{
	char tmp[16];
	log_warn("received %s again; killing workers",
		 spawn_signal_name(ev->sig, tmp, sizeof(tmp)));
	f->ops->kill_workers(f->ctx);
}

static void signalled_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_after_signal(f);
}

/* a signal while the job's failures are fetched: report what we know */
static void fetching_signal(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	f->ops->cancel(f->ctx);
	f->ops->print_report(f->ctx, NULL, f->failures);
	fsm_enter(f, AGENT_EXITED);
	f->ops->finish(f->ctx);
}

static void fetched(struct agent_fsm *f, struct agent_event *ev)
{
	f->ops->print_report(f->ctx, ev->json, f->failures);
	fsm_enter(f, AGENT_EXITED);
	f->ops->finish(f->ctx);
}

static void left(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_EXITED);
	f->ops->finish(f->ctx);
}

/* ------------------------------------------------------------- table */

#define LIVE_SIGNAL [AGENT_EV_SIGNAL] = fsm_signalled

static const cell_fn table[AGENT_N_STATES][AGENT_N_EVENTS] = {
    [AGENT_IDLE] = {[AGENT_EV_START] = start},
    [AGENT_JOINING] = {[AGENT_EV_JOINED] = joined,
		       [AGENT_EV_JOIN_ENDED] = join_ended,
		       [AGENT_EV_JOIN_FAILED] = join_failed,
		       LIVE_SIGNAL},
    [AGENT_RUNNING] = {[AGENT_EV_WORKER_FAILED] = run_failed,
		       [AGENT_EV_WORKERS_GONE] = run_gone,
		       [AGENT_EV_RESTART] = run_restart,
		       [AGENT_EV_STOP] = run_stop,
		       [AGENT_EV_PREEMPT] = fsm_run_preempt,
		       [AGENT_EV_SIGNAL] = fsm_run_signal},
    [AGENT_DONE] = {[AGENT_EV_RESTART] = done_restart,
		    [AGENT_EV_STOP] = done_stop,
		    [AGENT_EV_PREEMPT_EXPIRED] = fsm_done_expired,
		    LIVE_SIGNAL},
    [AGENT_FAILING] = {[AGENT_EV_WORKERS_GONE] = failing_gone,
		       [AGENT_EV_STOP] = failing_stop,
		       [AGENT_EV_REPORT_DONE] = failing_reported,
		       LIVE_SIGNAL},
    [AGENT_FAILING_END] = {[AGENT_EV_WORKERS_GONE] = failing_end_gone,
			   [AGENT_EV_REPORT_DONE] = failing_end_reported,
			   LIVE_SIGNAL},
    [AGENT_REPORTING] = {[AGENT_EV_STOP] = reporting_stop,
			 [AGENT_EV_REPORT_DONE] = reporting_reported,
			 LIVE_SIGNAL},
    [AGENT_REPORTING_END] = {[AGENT_EV_REPORT_DONE] = reporting_end_reported,
			     LIVE_SIGNAL},
    [AGENT_RESTARTING] = {[AGENT_EV_WORKERS_GONE] = restarting_gone,
			  [AGENT_EV_STOP] = restarting_stop,
			  LIVE_SIGNAL},
    [AGENT_ENDING] = {[AGENT_EV_WORKERS_GONE] = ending_gone, LIVE_SIGNAL},
    [AGENT_SIGNALLED] = {[AGENT_EV_WORKERS_GONE] = signalled_gone,
			 [AGENT_EV_SIGNAL] = signalled_again},
    [AGENT_FETCHING] =
	{[AGENT_EV_STATUS] = fetched, [AGENT_EV_SIGNAL] = fetching_signal},
    [AGENT_LEAVING] = {[AGENT_EV_LEFT] = left},
    [AGENT_ABORTING] = {[AGENT_EV_ABORTED] = fsm_aborting_aborted,
			[AGENT_EV_REFORM_MISSED] = fsm_aborting_missed,
			[AGENT_EV_WORKER_FAILED] = fsm_aborting_missed,
			[AGENT_EV_WORKERS_GONE] = fsm_aborting_gone,
			[AGENT_EV_STOP] = fsm_aborting_stop,
			LIVE_SIGNAL},
    [AGENT_FAILING_KEPT] = {[AGENT_EV_ABORTED] = fsm_failing_kept_aborted,
			    [AGENT_EV_REPORT_DONE] = fsm_failing_kept_reported,
			    [AGENT_EV_REFORM_MISSED] = fsm_failing_kept_missed,
			    [AGENT_EV_WORKER_FAILED] = fsm_failing_kept_missed,
			    [AGENT_EV_WORKERS_GONE] = fsm_kept_reporting_gone,
			    [AGENT_EV_STOP] = fsm_failing_kept_stop,
			    LIVE_SIGNAL},
    [AGENT_REPORTING_KEPT] =
	{[AGENT_EV_REPORT_DONE] = fsm_reporting_kept_reported,
	 [AGENT_EV_REFORM_MISSED] = fsm_failing_kept_missed,
	 [AGENT_EV_WORKER_FAILED] = fsm_failing_kept_missed,
	 [AGENT_EV_WORKERS_GONE] = fsm_kept_reporting_gone,
	 [AGENT_EV_STOP] = fsm_failing_kept_stop,
	 LIVE_SIGNAL},
    [AGENT_JOINING_KEPT] = {[AGENT_EV_JOINED] = fsm_joining_kept_joined,
			    [AGENT_EV_JOIN_ENDED] = fsm_joining_kept_ended,
			    [AGENT_EV_JOIN_FAILED] = fsm_joining_kept_failed,
			    [AGENT_EV_REFORM_MISSED] = fsm_joining_kept_missed,
			    [AGENT_EV_WORKER_FAILED] = fsm_joining_kept_missed,
			    [AGENT_EV_WORKERS_GONE] = fsm_joining_kept_gone,
			    LIVE_SIGNAL},
    [AGENT_REFORMING] = {[AGENT_EV_REFORMED] = fsm_reforming_reformed,
			 [AGENT_EV_REFORM_MISSED] = fsm_reforming_missed,
			 [AGENT_EV_WORKER_FAILED] = fsm_reforming_missed,
			 [AGENT_EV_WORKERS_GONE] = fsm_respawn_gone,
			 [AGENT_EV_RESTART] = run_restart,
			 [AGENT_EV_STOP] = run_stop,
			 LIVE_SIGNAL},
    [AGENT_RESPAWNING] = {[AGENT_EV_WORKERS_GONE] = fsm_respawn_gone,
			  [AGENT_EV_RESTART] = fsm_respawning_restart,
			  [AGENT_EV_STOP] = fsm_respawning_stop,
			  LIVE_SIGNAL},
    [AGENT_PREEMPT_ASKING] = {[AGENT_EV_PREEMPT] = fsm_asking_preempt,
			      [AGENT_EV_PREEMPT_FAILED] = fsm_preempt_fall_back,
			      [AGENT_EV_PREEMPT_EXPIRED] =
				  fsm_preempt_fall_back,
			      [AGENT_EV_RESTART] = fsm_preempt_fall_back,
			      [AGENT_EV_WORKER_FAILED] = fsm_preempting_failed,
			      [AGENT_EV_WORKERS_GONE] = run_gone,
			      [AGENT_EV_STOP] = run_stop,
			      [AGENT_EV_SIGNAL] = fsm_signalled},
    [AGENT_PREEMPTING] = {[AGENT_EV_PREEMPT_EXPIRED] = fsm_preempt_fall_back,
			  [AGENT_EV_RESTART] = fsm_preempt_fall_back,
			  [AGENT_EV_WORKER_FAILED] = fsm_preempting_failed,
			  [AGENT_EV_WORKERS_GONE] = run_gone,
			  [AGENT_EV_STOP] = run_stop,
			  [AGENT_EV_SIGNAL] = fsm_preempting_signal},
    /* IDLE takes nothing but start; EXITED takes nothing */
};

/* the states with workers alive are exactly those WORKERS_GONE ends */
int agent_fsm_has_workers(enum agent_state s)
{
	return (unsigned)s < AGENT_N_STATES &&
	       table[s][AGENT_EV_WORKERS_GONE] != NULL;
}

/* ---------------------------------------------------------- dispatch */

int agent_fsm_init(struct agent_fsm *f, const struct agent_fsm_ops *ops,
		   void *ctx, const char *job, int nproc)
{
	memset(f, 0, sizeof(*f));
	f->state = AGENT_IDLE;
	f->ops = ops;
	f->ctx = ctx;
	f->job = job;
	f->nproc = nproc;
	f->failures = json_array();
	return f->failures ? 0 : DL_ENOMEM;
}

void agent_fsm_release(struct agent_fsm *f)
{
	while (f->q_len > 0) {
		json_decref(f->queue[f->q_head].json);
		f->q_head = (f->q_head + 1) % f->q_cap;
		f->q_len--;
	}
	free(f->queue);
	f->queue = NULL;
	f->q_cap = 0;
	json_decref(f->failures);
	f->failures = NULL;
}

/* about_round: the kinds of event that answer a request about a round */
static int about_round(enum agent_event_kind k)
{
	return k == AGENT_EV_RESTART || k == AGENT_EV_STOP ||
	       k == AGENT_EV_REPORT_DONE || k == AGENT_EV_ABORTED ||
	       k == AGENT_EV_REFORMED;
}

static void handle(struct agent_fsm *f, struct agent_event *ev)
{
	cell_fn cell = NULL;
	if (about_round(ev->kind) && ev->round != f->r.round) {
		log_debug("agent: ignoring %s about round %llu (now in round "
			  "%llu)",
			  event_names[ev->kind], (unsigned long long)ev->round,
			  (unsigned long long)f->r.round);
	} else if ((unsigned)ev->kind < AGENT_N_EVENTS) {
		cell = table[f->state][ev->kind];
		if (!cell)
			log_debug("agent: %s has no cell in %s; dropped",
				  event_names[ev->kind], state_names[f->state]);
	}
	if (cell)
		cell(f, ev);
	json_decref(ev->json);
	ev->json = NULL;
}

/* queue_push keeps ev for later; 0, or DL_ENOMEM */
static int queue_push(struct agent_fsm *f, const struct agent_event *ev)
{
	if (f->q_len == f->q_cap) {
		size_t cap = f->q_cap ? f->q_cap * 2 : 16;
		struct agent_event *q = malloc(cap * sizeof(*q));
		if (!q)
			return DL_ENOMEM;
		for (size_t i = 0; i < f->q_len; i++)
			q[i] = f->queue[(f->q_head + i) % f->q_cap];
		free(f->queue);
		f->queue = q;
		f->q_cap = cap;
		f->q_head = 0;
	}
	f->queue[(f->q_head + f->q_len) % f->q_cap] = *ev;
	f->q_len++;
	return 0;
}

void agent_fsm_post(struct agent_fsm *f, struct agent_event *ev)
{
	struct agent_event cur;
	if (f->dispatching) {
		if (queue_push(f, ev) != 0) {
			/* losing an event could leave the agent waiting
			 * forever; handling it now is the lesser evil */
			log_error("agent: out of memory queueing %s; handling "
				  "it at once",
				  event_names[ev->kind]);
			handle(f, ev);
		}
		ev->json = NULL;
		return;
	}
	f->dispatching = 1;
	cur = *ev;
	ev->json = NULL;
	for (;;) {
		handle(f, &cur);
		if (f->q_len == 0)
			break;
		cur = f->queue[f->q_head];
		f->q_head = (f->q_head + 1) % f->q_cap;
		f->q_len--;
	}
	f->dispatching = 0;
}

void agent_fsm_post_kind(struct agent_fsm *f, enum agent_event_kind kind,
			 uint64_t round)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.round = round;
	agent_fsm_post(f, &ev);
}

static void post_to_loop(void *ctx, struct agent_event *ev)
{
	agent_fsm_post(ctx, ev);
}

void agent_fsm_rdzv_loop(struct agent_fsm *f, struct agent_rdzv_loop *out)
{
	memset(out, 0, sizeof(*out));
	out->post = post_to_loop;
	out->ctx = f;
	out->current = &f->r;
	out->recovery = f->recovery;
	out->recovery_why = f->recovery_why;
}
