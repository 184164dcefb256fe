/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_agent_fsm_seq.c - the agent's round loop (agent/fsm.c) played
 * through whole sequences from start to end, with the races the fault
 * suite found the hard way: success, failure and rejoin, stale answers,
 * exits while stopping, signals, join outcomes, rounds kept in place and
 * their fallbacks. Every cell alone is test_agent_fsm's.
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

/* ---- whole sequences */

static void test_success(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	expect(x, AGENT_JOINING, "join;");
	post_joined(x, 1, 0);
	expect(x, AGENT_RUNNING, "begin(1);start(1);");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(1,ok);");
	post(x, AGENT_EV_REPORT_DONE, 1); /* a plain "continue" */
	expect(x, AGENT_DONE, "");
	post_job(x, AGENT_EV_STOP, 1, "SUCCEEDED");
	expect(x, AGENT_EXITED, "end;finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* a failure: the report's answer and the end of the workers come in
 * either order; either way the agent rejoins once both are in */
static void test_failure_then_rejoin(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_failed(x, 1);
	expect(x, AGENT_FAILING, "end;report(1,failed);stop(15);");
	assert_int_equal(x->r.report_failures_n, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_REPORTING, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_JOINING, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_RUNNING, "begin(2);start(2);");
	assert_int_equal(json_array_size(x->f.failures), 0);
	/* the other order */
	post_failed(x, 1);
	clear_log(x);
	post(x, AGENT_EV_REPORT_DONE, 2);
	expect(x, AGENT_RESTARTING, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;");
}

/* an answer about the old round arriving after the new round's join
 * (the held heartbeat of tests/e2e/agent_stale.sh) changes nothing */
static void test_stale_answers(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	post(x, AGENT_EV_REPORT_DONE, 1);
	post_joined(x, 2, 1);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RUNNING");
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_RUNNING, "");
	/* the same answer about the current round does act */
	post_job(x, AGENT_EV_RESTART, 2, "RUNNING");
	expect(x, AGENT_RESTARTING, "end;stop(15);");
}

/* a restart answer while joining speaks of the round we already left */
static void test_answer_while_joining(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 3, 0);
	post_job(x, AGENT_EV_RESTART, 3, "RUNNING");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;begin(3);start(3);end;stop(15);join;");
	post_job(x, AGENT_EV_RESTART, 3, "RUNNING");
	post_job(x, AGENT_EV_STOP, 3, "FAILED");
	expect(x, AGENT_JOINING, "");
}

/* workers exiting while they are being stopped are not new failures */
static void test_exit_while_stopping(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_job(x, AGENT_EV_RESTART, 1, "RUNNING");
	clear_log(x);
	post_failed(x, 1);
	post_failed(x, 1);
	expect(x, AGENT_RESTARTING, "");
	assert_int_equal(json_array_size(x->f.failures), 0);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;");
	/* and while failing, only the first failure is the round's */
	post_joined(x, 2, 1);
	post_failed(x, 1);
	post_failed(x, 1);
	assert_int_equal(json_array_size(x->f.failures), 1);
}

/* a watch answer while the failure report is in flight: "restart" is
 * what we do anyway; "stop" ends the job once the report is answered */
static void test_watch_during_report(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 2); /* two hung workers */
	assert_int_equal(x->r.report_failures_n, 2);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_FAILING, "");
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	expect(x, AGENT_FAILING_END, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_REPORTING_END, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_FETCHING, "status;");
	post_status(x, 3);
	expect(x, AGENT_EXITED, "print;finish;");
	assert_int_equal(x->r.printed_job, 1);
	assert_int_equal(x->r.printed_n, 3);
	assert_int_equal(x->f.exit_status, 1);
}

/* no usable job record: the report is this node's own failures */
static void test_report_own_failures(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 1);
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	post(x, AGENT_EV_REPORT_DONE, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	post_status(x, -1);
	assert_int_equal(x->f.state, AGENT_EXITED);
	assert_int_equal(x->r.printed_job, 0);
	assert_int_equal(x->r.printed_n, 1);
}

static void test_signal(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_signal(x, SIGINT);
	expect(x, AGENT_SIGNALLED, "cancel;stop(2);");
	post_signal(x, SIGINT);
	expect(x, AGENT_SIGNALLED, "kill;");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_LEAVING, "leave;");
	post_signal(x, SIGTERM);
	expect(x, AGENT_LEAVING, "");
	post(x, AGENT_EV_LEFT, 0);
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 128 + SIGINT);
}

/* a signal before any round: nothing to leave */
static void test_signal_before_joining(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_signal(x, SIGTERM);
	expect(x, AGENT_EXITED, "join;cancel;finish;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

static void test_join_outcomes(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post(x, AGENT_EV_JOIN_FAILED, 0);
	expect(x, AGENT_EXITED, "join;finish;");
	assert_int_equal(x->f.exit_status, 1);
	/* a job that ended before this node ever joined it ran nothing
	 * here: never a success */
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "SUCCEEDED");
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 1);
	/* a member of an earlier round rejoining a job that has succeeded
	 * ends as the job did */
	x->f.joined = 1;
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "SUCCEEDED");
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 0);
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "FAILED");
	expect(x, AGENT_FETCHING, "status;");
	assert_int_equal(x->f.exit_status, 1);
}

/* events posted by an effect are handled after the current one, in
 * order: a stop with no worker left ends at once */
static void test_effects_post_in_order(void **state)
{
	struct fixture *x = *state;
	x->r.gone_on_stop = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_job(x, AGENT_EV_STOP, 1, "SUCCEEDED");
	expect(x, AGENT_EXITED, "end;stop(15);finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* the in-place path whole: a round ends elsewhere, the workers abort,
 * the node rejoins, they re-form; a stale aborted/reformed changes
 * nothing; recovery says how the round began */
static void test_in_place_round(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	assert_string_equal(x->f.recovery, "started");
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_ABORTING, "end;abort(1);");
	post(x, AGENT_EV_ABORTED, 0); /* another round's: dropped */
	expect(x, AGENT_ABORTING, "");
	post(x, AGENT_EV_ABORTED, 1);
	expect(x, AGENT_JOINING_KEPT, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_REFORMING, "begin(2);reform(2);");
	post(x, AGENT_EV_REFORMED, 1); /* stale */
	expect(x, AGENT_REFORMING, "");
	post(x, AGENT_EV_REFORMED, 2);
	expect(x, AGENT_RUNNING, "");
	assert_string_equal(x->f.recovery, "in_place");
	/* and to the end as usual */
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(2,ok);");
}

/* a worker of ours failed: the report and the others' abort run side by
 * side, in either order, then the rejoin keeps the others */
static void test_in_place_after_own_failure(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_failed(x, 1);
	expect(x, AGENT_FAILING_KEPT, "end;report(1,failed);abort(1);");
	assert_int_equal(x->r.report_failures_n, 1);
	post(x, AGENT_EV_ABORTED, 1);
	expect(x, AGENT_REPORTING_KEPT, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_JOINING_KEPT, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_REFORMING, "begin(2);reform(2);");
	post(x, AGENT_EV_REFORMED, 2);
	expect(x, AGENT_RUNNING, "");
	/* the other order */
	post_failed(x, 1);
	clear_log(x);
	post(x, AGENT_EV_REPORT_DONE, 2);
	expect(x, AGENT_ABORTING, "");
	post(x, AGENT_EV_ABORTED, 2);
	expect(x, AGENT_JOINING_KEPT, "join;");
}

/* every miss lands on the plain path and the job goes on */
static void test_in_place_fallbacks(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	x->r.gone_on_stop = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	/* abort ignored: stop, rejoin, start afresh */
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	post(x, AGENT_EV_REFORM_MISSED, 0);
	expect(x, AGENT_JOINING, "end;abort(1);stop(15);join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_RUNNING, "begin(2);start(2);");
	assert_string_equal(x->f.recovery, "restarted");
	/* no new round in time: the join is dropped, then made again */
	post_job(x, AGENT_EV_RESTART, 2, "RESTARTING");
	post(x, AGENT_EV_ABORTED, 2);
	clear_log(x);
	post(x, AGENT_EV_REFORM_MISSED, 0);
	expect(x, AGENT_JOINING, "end;stop(15);join;");
	post_joined(x, 3, 2);
	clear_log(x);
	/* a worker crashed during the re-form: new workers in the round */
	post_job(x, AGENT_EV_RESTART, 3, "RESTARTING");
	post(x, AGENT_EV_ABORTED, 3);
	post_joined(x, 4, 3);
	clear_log(x);
	post_failed(x, 0);
	expect(x, AGENT_RUNNING, "stop(15);start(4);");
	assert_string_equal(x->f.recovery, "restarted");
	assert_int_equal(x->f.r.round, 4);
}

/* without the declaration of every worker, the path is today's */
static void test_not_in_place(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_RESTARTING, "end;stop(15);");
	assert_string_equal(x->f.recovery_why,
			    "not every worker declared abort and membership");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_success),
	    T(test_failure_then_rejoin),
	    T(test_stale_answers),
	    T(test_answer_while_joining),
	    T(test_exit_while_stopping),
	    T(test_watch_during_report),
	    T(test_report_own_failures),
	    T(test_signal),
	    T(test_signal_before_joining),
	    T(test_join_outcomes),
	    T(test_effects_post_in_order),
	    T(test_in_place_round),
	    T(test_in_place_after_own_failure),
	    T(test_in_place_fallbacks),
	    T(test_not_in_place),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
