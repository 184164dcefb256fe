/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent_fsm_fix.h - what the tests of the agent's round loop share
 * (test_agent_fsm, test_agent_fsm_seq): a loop (agent/fsm.c) whose
 * effects are recorded as text, with no process and no network, and the
 * makers of its events.
 */
#ifndef DLAUNCH_TEST_AGENT_FSM_FIX_H
#define DLAUNCH_TEST_AGENT_FSM_FIX_H

#include <stdint.h>

#include "../../agent/fsm.h"

/* what the effects did: each appends its name (and arguments) to log */
struct rec {
	struct agent_fsm *f;
	char log[4096];
	int gone_on_stop;      /* stop_workers posts WORKERS_GONE at once */
	int printed_n;	       /* failures in the printed report */
	int printed_job;       /* the report was the job's, not our own */
	int report_failures_n; /* failures in the last failure report */
	int in_place;	       /* every worker declared abort+membership */
	int preempt;	       /* every worker declared preempt */
};

/* the state of one test: the loop and what its effects recorded */
struct fixture {
	struct agent_fsm f;
	struct rec r;
};

/* setup, teardown: a cmocka fixture; *state is a struct fixture whose
 * loop is initialised for job "job" with 2 local workers. */
int setup(void **state);
int teardown(void **state);
/* post_*: post one event to the loop, with the fields their names say
 * (post: a kind and a round alone) */
void post(struct fixture *x, enum agent_event_kind k, uint64_t round);
void post_joined(struct fixture *x, uint64_t round, int restart_count);
void post_job(struct fixture *x, enum agent_event_kind k, uint64_t round,
	      const char *job_state);
void post_failed(struct fixture *x, int n_records);
void post_signal(struct fixture *x, int sig);
void post_status(struct fixture *x, int n_failures);
void post_preempt(struct fixture *x, uint64_t step);
/* post_any posts event k as the sweep does: about round 5, job FAILED,
 * signal SIGTERM, a join of round 6, one failure record, stop step 7 */
void post_any(struct fixture *x, enum agent_event_kind k);
/* clear_log: forgets the effects recorded so far. */
void clear_log(struct fixture *x);
/* expect: asserts the loop's state and the effects recorded since the
 * last clear_log (then clears them). */
void expect(struct fixture *x, enum agent_state s, const char *log);

#endif
