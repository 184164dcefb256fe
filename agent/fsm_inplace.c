/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm_inplace.c - the round loop's cells of the in-place path
 * (docs/worker-protocol.md): when every live worker of the node declared
 * abort and membership, a new round keeps them (ABORTING, JOINING_KEPT,
 * REFORMING, and after a failure of one of ours FAILING_KEPT and
 * REPORTING_KEPT); any miss falls back to the plain path, and the workers
 * are started again in the new round (RESPAWNING). The table that places
 * these cells is fsm.c's, and the steps they take are fsm.c's too
 * (fsm_cells.h).
 */
#include <signal.h>
#include <string.h>

#include "dlaunch/log.h"
#include "fsm.h"
#include "fsm_cells.h"

/* fall_back: a re-form step missed; this node's workers are stopped and
 * the plain path takes over in state s */
static void fall_back(struct agent_fsm *f, enum agent_state s)
{
	fsm_restarted(f, "the in-place re-form failed");
	fsm_enter(f, s);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

void fsm_aborting_aborted(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_JOINING_KEPT);
	f->ops->join(f->ctx);
}

void fsm_aborting_missed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fall_back(f, AGENT_RESTARTING);
}

/* every kept worker died meanwhile: a plain rejoin */
void fsm_aborting_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_restarted(f, "no worker was left to keep");
	fsm_rejoin(f);
}

void fsm_aborting_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_ENDING);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

void fsm_failing_kept_aborted(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_REPORTING_KEPT);
}

void fsm_failing_kept_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_ABORTING);
}

void fsm_failing_kept_missed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fall_back(f, AGENT_FAILING);
}

void fsm_kept_reporting_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_restarted(f, "no worker was left to keep");
	fsm_enter(f, AGENT_REPORTING);
}

void fsm_failing_kept_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_FAILING_END);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

void fsm_reporting_kept_reported(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_enter(f, AGENT_JOINING_KEPT);
	f->ops->join(f->ctx);
}

void fsm_joining_kept_joined(struct agent_fsm *f, struct agent_event *ev)
{
	f->r = ev->assign;
	json_array_clear(f->failures);
	fsm_set_recovery(f, "", ""); /* not known before the answers */
	fsm_enter(f, AGENT_REFORMING);
	f->ops->round_begin(f->ctx, f->r.round);
	f->ops->reform_workers(f->ctx, &f->r);
}

void fsm_joining_kept_ended(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_ENDING);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

void fsm_joining_kept_failed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	f->exit_status = 1;
	f->report_on_exit = 0;
	fsm_enter(f, AGENT_ENDING);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

/* the join in flight is dropped: the plain path joins again once the
 * workers are gone */
void fsm_joining_kept_missed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	f->ops->round_end(f->ctx);
	fall_back(f, AGENT_RESTARTING);
}

/* the kept workers died while the join was in flight: its answer starts
 * new ones */
void fsm_joining_kept_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_restarted(f, "no worker was left to keep");
	fsm_enter(f, AGENT_JOINING);
}

void fsm_reforming_reformed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fsm_set_recovery(f, "in_place", "every worker of this node re-formed");
	log_info("round %llu: this node's workers re-formed in place",
		 (unsigned long long)f->r.round);
	fsm_entered(f);
	fsm_enter(f, AGENT_RUNNING);
}

void fsm_reforming_missed(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	fall_back(f, AGENT_RESPAWNING);
}

/* no worker is left: the round's workers start afresh */
void fsm_respawn_gone(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	if (strcmp(f->recovery, "restarted") != 0)
		fsm_restarted(f, "no worker was left to keep");
	fsm_entered(f);
	fsm_enter(f, AGENT_RUNNING);
	f->ops->start_workers(f->ctx, &f->r);
}

void fsm_respawning_restart(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_log_round_over(f, ev);
	fsm_enter(f, AGENT_RESTARTING);
	f->ops->round_end(f->ctx);
}

void fsm_respawning_stop(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_end_job(f, ev);
	fsm_enter(f, AGENT_ENDING);
	f->ops->round_end(f->ctx);
}
