/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_agent_fsm.c - the agent's round loop (agent/fsm.c), cell by cell:
 * one test walks every state x event cell against the table written out
 * again below (what each cell must do: its next state and its effects),
 * in place and with preemption too; then the preemption's sequences and
 * the workers' states. Whole sequences are test_agent_fsm_seq's.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/fsm.h"
#include "agent_fsm_fix.h"

/* ---- every cell */

struct cell {
	enum agent_state from;
	enum agent_event_kind ev;
	enum agent_state to;
	const char *effects;
};

/* What each non-empty cell does when posted as post_any does; every
 * cell not listed must change nothing and do nothing. */
static const struct cell cells[] = {
    {AGENT_IDLE, AGENT_EV_START, AGENT_JOINING, "join;"},
    {AGENT_JOINING, AGENT_EV_JOINED, AGENT_RUNNING, "begin(6);start(6);"},
    {AGENT_JOINING, AGENT_EV_JOIN_ENDED, AGENT_FETCHING, "status;"},
    {AGENT_JOINING, AGENT_EV_JOIN_FAILED, AGENT_EXITED, "finish;"},
    {AGENT_JOINING, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_RUNNING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "end;report(5,failed);stop(15);"},
    {AGENT_RUNNING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_RUNNING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;stop(15);"},
    {AGENT_RUNNING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_RUNNING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_DONE, AGENT_EV_RESTART, AGENT_JOINING, "end;join;"},
    {AGENT_DONE, AGENT_EV_STOP, AGENT_FETCHING, "end;status;"},
    {AGENT_DONE, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_FAILING, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_FAILING, AGENT_EV_STOP, AGENT_FAILING_END, ""},
    {AGENT_FAILING, AGENT_EV_REPORT_DONE, AGENT_RESTARTING, ""},
    {AGENT_FAILING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_FAILING_END, AGENT_EV_WORKERS_GONE, AGENT_REPORTING_END, ""},
    {AGENT_FAILING_END, AGENT_EV_REPORT_DONE, AGENT_ENDING, ""},
    {AGENT_FAILING_END, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REPORTING, AGENT_EV_STOP, AGENT_REPORTING_END, ""},
    {AGENT_REPORTING, AGENT_EV_REPORT_DONE, AGENT_JOINING, "join;"},
    {AGENT_REPORTING, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_REPORTING_END, AGENT_EV_REPORT_DONE, AGENT_FETCHING, "status;"},
    {AGENT_REPORTING_END, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_RESTARTING, AGENT_EV_WORKERS_GONE, AGENT_JOINING, "join;"},
    {AGENT_RESTARTING, AGENT_EV_STOP, AGENT_ENDING, ""},
    {AGENT_RESTARTING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_ENDING, AGENT_EV_WORKERS_GONE, AGENT_FETCHING, "status;"},
    {AGENT_ENDING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_SIGNALLED, AGENT_EV_WORKERS_GONE, AGENT_LEAVING, "leave;"},
    {AGENT_SIGNALLED, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "kill;"},
    {AGENT_FETCHING, AGENT_EV_STATUS, AGENT_EXITED, "print;finish;"},
    {AGENT_FETCHING, AGENT_EV_SIGNAL, AGENT_EXITED, "cancel;print;finish;"},
    {AGENT_LEAVING, AGENT_EV_LEFT, AGENT_EXITED, "finish;"},
    /* the in-place states (their workers are kept) */
    {AGENT_ABORTING, AGENT_EV_ABORTED, AGENT_JOINING_KEPT, "join;"},
    {AGENT_ABORTING, AGENT_EV_REFORM_MISSED, AGENT_RESTARTING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_WORKER_FAILED, AGENT_RESTARTING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_WORKERS_GONE, AGENT_JOINING, "join;"},
    {AGENT_ABORTING, AGENT_EV_STOP, AGENT_ENDING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_ABORTED, AGENT_REPORTING_KEPT, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_REPORT_DONE, AGENT_ABORTING, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_FAILING, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_FAILING, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_STOP, AGENT_FAILING_END, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_REPORT_DONE, AGENT_JOINING_KEPT, "join;"},
    {AGENT_REPORTING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_FAILING, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_FAILING, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_REPORTING_KEPT, AGENT_EV_STOP, AGENT_FAILING_END, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOINED, AGENT_REFORMING,
     "begin(6);reform(6);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOIN_ENDED, AGENT_ENDING, "stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOIN_FAILED, AGENT_ENDING, "stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_RESTARTING,
     "end;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_RESTARTING,
     "end;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_JOINING, ""},
    {AGENT_JOINING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_REFORMED, AGENT_RUNNING, ""},
    {AGENT_REFORMING, AGENT_EV_REFORM_MISSED, AGENT_RESPAWNING, "stop(15);"},
    {AGENT_REFORMING, AGENT_EV_WORKER_FAILED, AGENT_RESPAWNING, "stop(15);"},
    {AGENT_REFORMING, AGENT_EV_WORKERS_GONE, AGENT_RUNNING, "start(5);"},
    {AGENT_REFORMING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_RESPAWNING, AGENT_EV_WORKERS_GONE, AGENT_RUNNING, "start(5);"},
    {AGENT_RESPAWNING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;"},
    {AGENT_RESPAWNING, AGENT_EV_STOP, AGENT_ENDING, "end;"},
    {AGENT_RESPAWNING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    /* a preemption: the stop step from the rendezvous to a node whose
     * workers cannot stop at a step is the SIGTERM it would have had */
    {AGENT_RUNNING, AGENT_EV_PREEMPT, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT, AGENT_PREEMPTING,
     "grace;preempt(7);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT_FAILED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT_EXPIRED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_RESTART, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "report(5,failed);stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_SIGNAL, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_PREEMPT_EXPIRED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_RESTART, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "report(5,failed);stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_PREEMPTING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    /* the first SIGTERM is the preemption's (told before signalled) */
    {AGENT_PREEMPTING, AGENT_EV_SIGNAL, AGENT_PREEMPTING, ""},
};

/* The cells that differ when every worker of the node declared preempt
 * (and the agent can preempt). */
static const struct cell cells_preempt[] = {
    {AGENT_RUNNING, AGENT_EV_SIGNAL, AGENT_PREEMPT_ASKING, "grace;ask;"},
    {AGENT_RUNNING, AGENT_EV_PREEMPT, AGENT_PREEMPTING, "grace;preempt(7);"},
};

/* The cells that differ when every worker of the node declared abort and
 * membership (the others are as above). */
static const struct cell cells_in_place[] = {
    {AGENT_RUNNING, AGENT_EV_WORKER_FAILED, AGENT_FAILING_KEPT,
     "end;report(5,failed);abort(5);"},
    {AGENT_RUNNING, AGENT_EV_RESTART, AGENT_ABORTING, "end;abort(5);"},
    {AGENT_REFORMING, AGENT_EV_RESTART, AGENT_ABORTING, "end;abort(5);"},
};

static const struct cell *find_cell(enum agent_state s, enum agent_event_kind k,
				    int in_place)
{
	for (size_t i = 0; in_place == 2 &&
			   i < sizeof(cells_preempt) / sizeof(cells_preempt[0]);
	     i++)
		if (cells_preempt[i].from == s && cells_preempt[i].ev == k)
			return &cells_preempt[i];
	for (size_t i = 0; in_place == 1 && i < sizeof(cells_in_place) /
						    sizeof(cells_in_place[0]);
	     i++)
		if (cells_in_place[i].from == s && cells_in_place[i].ev == k)
			return &cells_in_place[i];
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
		if (cells[i].from == s && cells[i].ev == k)
			return &cells[i];
	return NULL;
}

/* sweep posts every event in every state and compares with the tables;
 * in_place 1: every worker declared abort and membership, 2: preempt */
static void sweep(struct fixture *x, int in_place)
{
	x->r.in_place = in_place == 1;
	x->r.preempt = in_place == 2;
	for (int s = 0; s < AGENT_N_STATES; s++) {
		for (int k = 0; k < AGENT_N_EVENTS; k++) {
			const struct cell *c = find_cell(s, k, in_place);
			char what[96];
			x->f.state = (enum agent_state)s;
			x->f.r.round = 5;
			x->f.joined = 1;
			x->f.report_on_exit = 1; /* as after a FAILED end */
			x->f.preempt_sigterms = 0;
			clear_log(x);
			post_any(x, (enum agent_event_kind)k);
			snprintf(what, sizeof(what), "%s x %s%s",
				 agent_state_name(s), agent_event_name(k),
				 in_place == 1	 ? " (in place)"
				 : in_place == 2 ? " (preempt)"
						 : "");
			if (!c) {
				if (x->f.state != (enum agent_state)s ||
				    x->r.log[0])
					fail_msg("%s: expected nothing, got "
						 "%s and '%s'",
						 what,
						 agent_state_name(x->f.state),
						 x->r.log);
				continue;
			}
			if (x->f.state != c->to ||
			    strcmp(x->r.log, c->effects) != 0)
				fail_msg(
				    "%s: expected %s and '%s', got %s and "
				    "'%s'",
				    what, agent_state_name(c->to), c->effects,
				    agent_state_name(x->f.state), x->r.log);
		}
	}
}

static void test_every_cell(void **state)
{
	sweep(*state, 0);
}

static void test_every_cell_in_place(void **state)
{
	sweep(*state, 1);
}

static void test_every_cell_preempt(void **state)
{
	sweep(*state, 2);
}

/* SIGTERM with workers that declared preempt: the stop step is asked
 * for, sent, the workers stop and the node reports success; the job ends
 * PREEMPTED and the agent exits 0 without leaving */
static void test_preempt(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_signal(x, SIGTERM);
	expect(x, AGENT_PREEMPT_ASKING, "grace;ask;");
	post_preempt(x, 40);
	expect(x, AGENT_PREEMPTING, "grace;preempt(40);");
	post_preempt(x, 41); /* the same news again (every answer says it) */
	expect(x, AGENT_PREEMPTING, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(1,ok);");
	post_job(x, AGENT_EV_STOP, 1, "PREEMPTED");
	expect(x, AGENT_EXITED, "end;finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* the grace runs out after this node's workers stopped: a signalled
 * agent leaves (exit 143); one only told by the rendezvous waits on */
static void test_preempt_grace_done(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_preempt(x, 40); /* told, not signalled */
	post(x, AGENT_EV_WORKERS_GONE, 0);
	clear_log(x);
	post(x, AGENT_EV_PREEMPT_EXPIRED, 0);
	expect(x, AGENT_DONE, "");
	post_signal(x, SIGTERM); /* DONE: a plain signal, as ever */
	expect(x, AGENT_LEAVING, "cancel;leave;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

static void test_preempt_grace_expired_done(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_signal(x, SIGTERM);
	post_preempt(x, 40);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	clear_log(x);
	post(x, AGENT_EV_PREEMPT_EXPIRED, 0);
	expect(x, AGENT_LEAVING, "cancel;leave;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

/* a second SIGTERM while stopping at the step is a plain signal */
static void test_preempt_second_sigterm(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_preempt(x, 40);
	clear_log(x);
	post_signal(x, SIGTERM);
	expect(x, AGENT_PREEMPTING, "");
	post_signal(x, SIGTERM);
	expect(x, AGENT_SIGNALLED, "cancel;stop(15);");
}

/* the states said to have workers are those WORKERS_GONE ends */
static void test_worker_states(void **state)
{
	(void)state;
	for (int s = 0; s < AGENT_N_STATES; s++) {
		const struct cell *c =
		    find_cell((enum agent_state)s, AGENT_EV_WORKERS_GONE, 0);
		assert_int_equal(agent_fsm_has_workers((enum agent_state)s),
				 c != NULL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_cell, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_cell_preempt, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_preempt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_grace_done, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_grace_expired_done,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_second_sigterm, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_every_cell_in_place, setup,
					    teardown),
	    cmocka_unit_test(test_worker_states),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
