/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm_cells.h - what the round loop's cells in other files than fsm.c
 * (fsm_inplace.c, fsm_preempt.c) share with it: the steps they take
 * (fsm.c) and the cells themselves, which fsm.c's table places. Private
 * to agent/fsm*.c.
 */
#ifndef DLAUNCH_AGENT_FSM_CELLS_H
#define DLAUNCH_AGENT_FSM_CELLS_H
#include "fsm.h"

/* fsm.c: the steps cells take (contracts above each in fsm.c) */
void fsm_enter(struct agent_fsm *f, enum agent_state s);
/* the job's final state: exit 0 when it succeeded, else 1 with the
 * root-cause report */
void fsm_end_job(struct agent_fsm *f, const struct agent_event *ev);
/* a signal to the agent: forwarded to the workers, then leave */
void fsm_signalled(struct agent_fsm *f, struct agent_event *ev);
/* no worker is left and we were told to go */
void fsm_after_signal(struct agent_fsm *f);
/* join again (JOINING) */
void fsm_rejoin(struct agent_fsm *f);
/* how this node's workers reach the next round, and why */
void fsm_set_recovery(struct agent_fsm *f, const char *how, const char *why);
/* the workers of this node are stopped; why goes with the next round */
void fsm_restarted(struct agent_fsm *f, const char *why);
/* this node's workers are running in the round: say how they came */
void fsm_entered(struct agent_fsm *f);
void fsm_log_round_over(struct agent_fsm *f, const struct agent_event *ev);
void fsm_keep_failures(struct agent_fsm *f, struct agent_event *ev);

/* fsm_inplace.c: the cells of the in-place path */
void fsm_aborting_aborted(struct agent_fsm *f, struct agent_event *ev);
void fsm_aborting_missed(struct agent_fsm *f, struct agent_event *ev);
void fsm_aborting_gone(struct agent_fsm *f, struct agent_event *ev);
void fsm_aborting_stop(struct agent_fsm *f, struct agent_event *ev);
void fsm_failing_kept_aborted(struct agent_fsm *f, struct agent_event *ev);
void fsm_failing_kept_reported(struct agent_fsm *f, struct agent_event *ev);
void fsm_failing_kept_missed(struct agent_fsm *f, struct agent_event *ev);
void fsm_kept_reporting_gone(struct agent_fsm *f, struct agent_event *ev);
void fsm_failing_kept_stop(struct agent_fsm *f, struct agent_event *ev);
void fsm_reporting_kept_reported(struct agent_fsm *f, struct agent_event *ev);
void fsm_joining_kept_joined(struct agent_fsm *f, struct agent_event *ev);
void fsm_joining_kept_ended(struct agent_fsm *f, struct agent_event *ev);
void fsm_joining_kept_failed(struct agent_fsm *f, struct agent_event *ev);
void fsm_joining_kept_missed(struct agent_fsm *f, struct agent_event *ev);
void fsm_joining_kept_gone(struct agent_fsm *f, struct agent_event *ev);
void fsm_reforming_reformed(struct agent_fsm *f, struct agent_event *ev);
void fsm_reforming_missed(struct agent_fsm *f, struct agent_event *ev);
void fsm_respawn_gone(struct agent_fsm *f, struct agent_event *ev);
void fsm_respawning_restart(struct agent_fsm *f, struct agent_event *ev);
void fsm_respawning_stop(struct agent_fsm *f, struct agent_event *ev);

/* fsm_preempt.c: the cells of a preemption */
void fsm_run_signal(struct agent_fsm *f, struct agent_event *ev);
void fsm_run_preempt(struct agent_fsm *f, struct agent_event *ev);
void fsm_asking_preempt(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempt_fall_back(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempting_signal(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempting_failed(struct agent_fsm *f, struct agent_event *ev);
void fsm_done_expired(struct agent_fsm *f, struct agent_event *ev);

#endif
