/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm_cells.h - what the round loop's cells in other files than fsm.c
 * share with it: the steps they take (fsm.c) and the cells themselves,
 * which fsm.c's table places. Private to agent/fsm*.c.
 */
#ifndef DLAUNCH_AGENT_FSM_CELLS_H
#define DLAUNCH_AGENT_FSM_CELLS_H
#include "fsm.h"

/* fsm.c: steps */
void fsm_enter(struct agent_fsm *f, enum agent_state s);
/* a signal to the agent: forwarded to the workers, then leave */
void fsm_signalled(struct agent_fsm *f, struct agent_event *ev);
/* no worker is left and we were told to go */
void fsm_after_signal(struct agent_fsm *f);
void fsm_keep_failures(struct agent_fsm *f, struct agent_event *ev);

/* fsm_preempt.c: the cells of a preemption */
void fsm_run_signal(struct agent_fsm *f, struct agent_event *ev);
void fsm_run_preempt(struct agent_fsm *f, struct agent_event *ev);
void fsm_asking_preempt(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempt_fall_back(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempting_signal(struct agent_fsm *f, struct agent_event *ev);
void fsm_preempting_failed(struct agent_fsm *f, struct agent_event *ev);
void fsm_done_expired(struct agent_fsm *f, struct agent_event *ev);

#endif
