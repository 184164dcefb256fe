/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_preempt.c - preemption in the rendezvous state: the step
 * every node reports, the stop step the job agrees on, a preemption
 * interrupted by a failure and the ones refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/rdzv_state.h"
#include "rdzv_state_fix.h"

static int preempt(struct rdzv_state *st, const char *id, uint64_t round,
		   uint64_t step, double rate, uint64_t now,
		   struct rdzv_reply *r)
{
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_preempt(st, "job1", id, inc, round, step, rate, now, r, err,
			    sizeof(err));
}

static int report_ok(struct rdzv_state *st, const char *id, uint64_t now,
		     struct rdzv_reply *r)
{
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_report(st, "job1", id, inc, 1, 1, NULL, now, r, err,
			   sizeof(err));
}

/* The stop step: above any step a rank can reach before it hears it */
static void test_preempt_step(void **state)
{
	(void)state;
	/* unknown rate: two steps of margin past the peer one ahead */
	assert_int_equal(rdzv_preempt_pick_step(100, 0, 1000), 104);
	/* 10 steps/s for 2 s + 2 heartbeats of 1 s: 40 steps */
	assert_int_equal(rdzv_preempt_pick_step(100, 10, 1000), 142);
	/* a slow job: at least 2 */
	assert_int_equal(rdzv_preempt_pick_step(100, 0.01, 1000), 104);
	assert_int_equal(rdzv_preempt_pick_step(100, 1e6, 200),
			 100 + 2 + 2400000);
}

/* The first ask picks the step for the job; every answer to a member
 * carries it, a member's watch wakes; all report success: PREEMPTED */
static void test_preempt(void **state)
{
	struct rdzv_state *st = running(2, 4, 3, 3);
	struct rdzv_job_config c = config(2, 4, 3);
	struct rdzv_reply r;
	json_t *saved, *d;
	uint64_t n;
	char inc[80];
	(void)state;
	snprintf(inc, sizeof(inc), "inc-n1");
	assert_int_equal(
	    rdzv_watch(st, "job1", "n1", inc, 1, 1100, &r, err, sizeof(err)),
	    RDZV_WAIT);
	assert_int_equal(preempt(st, "n2", 1, 50, 5, 1100, &r), 0);
	n = r.preempt_step;
	assert_int_equal(n, rdzv_preempt_pick_step(50, 5, 1000));
	/* a later ask, a faster rate: the same step */
	assert_int_equal(preempt(st, "n3", 1, 80, 100, 1200, &r), 0);
	assert_int_equal(r.preempt_step, n);
	assert_int_equal(hb(st, "n1", 1, 1200, &r), 0);
	assert_int_equal(r.preempt_step, n);
	assert_int_equal(r.action, RDZV_ACTION_CONTINUE);
	assert_int_equal(
	    rdzv_watch(st, "job1", "n1", inc, 1, 1200, &r, err, sizeof(err)),
	    RDZV_DONE);
	assert_int_equal(r.preempt_step, n);
	/* kept across a restore (a restarted server, a new etcd leader) */
	saved = rdzv_job_save(st, "job1");
	assert_int_equal(
	    json_integer_value(json_object_get(saved, "preempt_step")), n);
	{
		struct rdzv_state *st2 = rdzv_state_new(NULL);
		assert_int_equal(
		    rdzv_job_restore(st2, saved, 0, err, sizeof(err)), 0);
		assert_int_equal(hb(st2, "n1", 1, 10, &r), 0);
		assert_int_equal(r.preempt_step, n);
		rdzv_state_free(st2);
	}
	json_decref(saved);
	/* a node that joins now waits: no scale-up ends the round */
	assert_int_equal(join(st, &c, "n4", 2, 1300), RDZV_WAIT);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(report_ok(st, "n1", 1300, &r), 0);
	assert_int_equal(report_ok(st, "n2", 1300, &r), 0);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(report_ok(st, "n3", 1300, &r), 0);
	assert_string_equal(state_of(st), "PREEMPTED");
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	d = rdzv_job_detail_json(st, "job1", 1300);
	assert_int_equal(json_integer_value(json_object_get(d, "preempt_step")),
			 n);
	json_decref(d);
	rdzv_state_free(st);
}

/* A member lost (or failing) while preempted: no new round, FAILED */
static void test_preempt_interrupted(void **state)
{
	struct rdzv_state *st = running(2, 3, 3, 3);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(preempt(st, "n1", 1, 50, 0, 1100, &r), 0);
	assert_int_equal(report_ok(st, "n1", 1100, &r), 0);
	/* n2 and n3 fall silent; n1 is done (never evicted) */
	rdzv_state_tick(st, 3500);
	assert_string_equal(state_of(st), "FAILED");
	rdzv_state_free(st);
}

/* Bad asks change nothing: a rate out of range, a stale round, a node
 * that is no member */
static void test_preempt_refused(void **state)
{
	struct rdzv_state *st = running(2, 3, 3, 3);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(preempt(st, "n1", 1, 50, -1, 1100, &r), DL_EINVAL);
	assert_int_equal(preempt(st, "n1", 1, 50, 2e6, 1100, &r), DL_EINVAL);
	assert_int_equal(preempt(st, "n1", 2, 50, 1, 1100, &r), DL_ESTALE);
	assert_int_equal(preempt(st, "n9", 1, 50, 1, 1100, &r), DL_ESTALE);
	assert_int_equal(hb(st, "n1", 1, 1100, &r), 0);
	assert_int_equal(r.preempt_step, 0);
	rdzv_state_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_preempt_step),
	    cmocka_unit_test(test_preempt),
	    cmocka_unit_test(test_preempt_interrupted),
	    cmocka_unit_test(test_preempt_refused),
	};
	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
