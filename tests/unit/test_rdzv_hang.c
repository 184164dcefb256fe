/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_hang.c - the state machine's hang triggers and node reports
 * (rendezvous/state/hangs.c): who may open a trigger, one open at a time, how
 * it closes (every node reported, 30 s, a new round), which reports are taken,
 * replaced and analysed, and the bounds per report, per job and on the number
 * of triggers kept.
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

#define WALL 1800000000000ULL

static char err[256];

/* job1 with n nodes "n0".."n{n-1}" of 2 workers each, its round formed */
static struct rdzv_state *running(int n)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c;
	struct rdzv_reply r;

	assert_non_null(st);
	rdzv_job_config_init(&c);
	c.min_nodes = (uint32_t)n;
	c.max_nodes = (uint32_t)n;
	c.heartbeat_timeout_ms = 600000;
	c.max_restarts = 0;
	for (int i = 0; i < n; i++) {
		struct rdzv_node_info node;
		memset(&node, 0, sizeof(node));
		snprintf(node.node_id, sizeof(node.node_id), "n%d", i);
		snprintf(node.incarnation, sizeof(node.incarnation), "inc-n%d",
			 i);
		snprintf(node.addr, sizeof(node.addr), "10.0.0.1");
		node.nproc = 2;
		assert_true(rdzv_join(st, "job1", &node, &c, 1, 0, &r, err,
				      sizeof(err)) >= 0);
	}
	return st;
}

static int trigger(struct rdzv_state *st, const char *node, const char *inc,
		   uint64_t now, json_t **out)
{
	return rdzv_hang_trigger(st, "job1", node, inc, RDZV_HANG_STALL,
				 node ? node : "cli", now, WALL + now, out, err,
				 sizeof(err));
}

/* a report of node i for trigger id: rank 2i+1 is stopped */
static json_t *report(int i, const char *id)
{
	char node[16];
	snprintf(node, sizeof(node), "n%d", i);
	return json_pack("{s:i, s:s, s:{s:s}, s:[{s:i, s:s}, {s:i, s:s}]}",
			 "version", 1, "node", node, "trigger", "id", id,
			 "workers", "rank", 2 * i, "state", "sleeping", "rank",
			 2 * i + 1, "state", i == 1 ? "stopped" : "sleeping");
}

static int post(struct rdzv_state *st, int i, const char *id, size_t bytes,
		int *complete)
{
	char inc[16];
	json_t *r = report(i, id);
	int rc;
	snprintf(inc, sizeof(inc), "inc-n%d", i);
	rc = rdzv_hang_report(st, "job1", inc, r, bytes, 0, WALL, complete, err,
			      sizeof(err));
	json_decref(r);
	return rc;
}

static char *id_of(json_t *t)
{
	static char id[RDZV_HANG_ID_MAX + 1];
	snprintf(id, sizeof(id), "%s",
		 json_string_value(json_object_get(t, "id")));
	return id;
}

static void test_who_may_trigger(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	json_t *t = NULL;
	(void)state;
	assert_int_equal(trigger(st, NULL, NULL, 0, &t), DL_ENOTFOUND);
	rdzv_state_free(st);

	st = running(2);
	assert_int_equal(trigger(st, "nX", NULL, 0, &t), DL_ESTALE);
	assert_int_equal(trigger(st, "n0", "old", 0, &t), DL_ESTALE);
	assert_null(t);
	assert_int_equal(rdzv_hang_seq(st, "job1"), 0);
	assert_int_equal(trigger(st, "n0", "inc-n0", 0, &t), 0);
	assert_string_equal(json_string_value(json_object_get(t, "by")), "n0");
	json_decref(t);
	rdzv_state_free(st);
}

static void test_one_open_at_a_time(void **state)
{
	struct rdzv_state *st = running(2);
	json_t *t, *t2, *open;
	char first[RDZV_HANG_ID_MAX + 1], name[RDZV_NAME_MAX + 1];
	struct rdzv_counters c;
	uint64_t by_state[RDZV_JOB_NSTATES], members;
	unsigned what = 0, w;
	(void)state;

	while (rdzv_state_pop_changed(st, name))
		;
	assert_int_equal(trigger(st, NULL, NULL, 100, &t), 0);
	assert_true(json_is_true(json_object_get(t, "opened")));
	snprintf(first, sizeof(first), "%s", id_of(t));
	while ((w = rdzv_state_pop_changed(st, name)))
		what |= w;
	assert_true(what & RDZV_CHANGED_WAKE); /* parked watches answer */
	assert_int_equal(rdzv_hang_seq(st, "job1"), 1);
	open = rdzv_hang_open_json(st, "job1", 200);
	assert_string_equal(id_of(open), first);
	json_decref(open);
	/* while open: the same trigger */
	assert_int_equal(trigger(st, "n1", NULL, 5000, &t2), 0);
	assert_string_equal(id_of(t2), first);
	assert_true(json_is_false(json_object_get(t2, "opened")));
	json_decref(t2);
	/* 30 s later it closed: a new one */
	assert_null(rdzv_hang_open_json(st, "job1", 100 + RDZV_HANG_OPEN_MS));
	assert_int_equal(trigger(st, NULL, NULL, 100 + RDZV_HANG_OPEN_MS, &t2),
			 0);
	assert_string_not_equal(id_of(t2), first);
	assert_int_equal(rdzv_hang_seq(st, "job1"), 2);
	rdzv_state_stats(st, by_state, &members, &c);
	assert_int_equal(c.hang_triggers_total[RDZV_HANG_STALL], 2);
	json_decref(t);
	json_decref(t2);
	rdzv_state_free(st);
}

static void test_reports(void **state)
{
	struct rdzv_state *st = running(2);
	json_t *t, *h, *bad;
	int complete = -1;
	char id[RDZV_HANG_ID_MAX + 1];
	(void)state;

	assert_int_equal(trigger(st, NULL, NULL, 0, &t), 0);
	snprintf(id, sizeof(id), "%s", id_of(t));
	json_decref(t);
	/* not a node report, another trigger, another node */
	bad = json_pack("{s:i, s:s}", "version", 2, "node", "n0");
	assert_int_equal(rdzv_hang_report(st, "job1", "inc-n0", bad, 10, 0,
					  WALL, &complete, err, sizeof(err)),
			 DL_EINVAL);
	json_decref(bad);
	assert_int_equal(post(st, 0, "nope-1", 10, &complete), DL_ENOTFOUND);
	assert_int_equal(rdzv_hang_report(st, "job2", "inc-n0", NULL, 10, 0,
					  WALL, &complete, err, sizeof(err)),
			 DL_ENOTFOUND);
	bad = report(0, id);
	assert_int_equal(rdzv_hang_report(st, "job1", "inc-n1", bad, 10, 0,
					  WALL, &complete, err, sizeof(err)),
			 DL_ESTALE);
	json_object_set_new(bad, "node", json_string("n7"));
	assert_int_equal(rdzv_hang_report(st, "job1", "inc-n7", bad, 10, 0,
					  WALL, &complete, err, sizeof(err)),
			 DL_ESTALE);
	json_decref(bad);
	assert_int_equal(
	    post(st, 0, id, RDZV_HANG_REPORT_MAX_BYTES + 1, &complete),
	    DL_ELIMIT);
	/* nothing stored so far */
	h = rdzv_hang_json(st, "job1", NULL, 0, WALL);
	assert_int_equal(json_array_size(json_object_get(h, "reports")), 0);
	assert_true(json_is_null(json_object_get(h, "analysis")));
	json_decref(h);

	assert_int_equal(post(st, 0, id, 100, &complete), 0);
	assert_int_equal(complete, 0);
	assert_int_equal(post(st, 0, id, 120, &complete), 0); /* replaces */
	assert_int_equal(complete, 0);
	h = rdzv_hang_json(st, "job1", id, 0, WALL);
	assert_int_equal(json_array_size(json_object_get(h, "reports")), 1);
	assert_string_equal(json_string_value(json_object_get(
				json_object_get(h, "analysis"), "verdict")),
			    "incomplete");
	json_decref(h);
	assert_int_equal(post(st, 1, id, 100, &complete), 0);
	assert_int_equal(complete, 1);
	/* complete: closed, analysed (rank 3 of n1 is stopped) */
	assert_null(rdzv_hang_open_json(st, "job1", 0));
	h = rdzv_hang_summary_json(st, "job1", 0, WALL);
	assert_int_equal(
	    json_integer_value(json_array_get(
		json_object_get(json_object_get(h, "analysis"), "stuck"), 0)),
	    3);
	assert_null(json_object_get(h, "reports"));
	assert_true(json_is_false(
	    json_object_get(json_object_get(h, "trigger"), "open")));
	json_decref(h);
	h = rdzv_hang_json(st, "job1", NULL, 0, WALL);
	assert_non_null(strstr(json_string_value(json_object_get(h, "text")),
			       "stuck ranks: 3"));
	json_decref(h);
	{
		struct rdzv_counters c;
		uint64_t by_state[RDZV_JOB_NSTATES], members;
		rdzv_state_stats(st, by_state, &members, &c);
		assert_int_equal(c.hang_reports_total, 3);
		assert_int_equal(c.hang_stuck_ranks, 1);
	}
	rdzv_state_free(st);
}

/* A new round closes the trigger (its workers are gone), but reports of
 * the nodes it asked are still taken; an ended job takes no trigger. */
static void test_round_change_and_end(void **state)
{
	struct rdzv_state *st = running(2);
	struct rdzv_reply r;
	json_t *t, *f;
	int complete;
	char id[RDZV_HANG_ID_MAX + 1];
	(void)state;

	assert_int_equal(trigger(st, NULL, NULL, 0, &t), 0);
	snprintf(id, sizeof(id), "%s", id_of(t));
	json_decref(t);
	f = json_pack("[{s:i}]", "rank", 1);
	assert_int_equal(rdzv_report(st, "job1", "n0", "inc-n0", 1, 0, f, 10,
				     &r, err, sizeof(err)),
			 0);
	json_decref(f);
	assert_null(rdzv_hang_open_json(st, "job1", 20));
	assert_int_equal(trigger(st, NULL, NULL, 20, &t), DL_EGONE);
	assert_int_equal(post(st, 1, id, 100, &complete), 0);
	assert_int_equal(complete, 0);
	rdzv_state_free(st);
}

static void test_bounds(void **state)
{
	struct rdzv_state *st = running(17);
	json_t *t, *h;
	int complete;
	char first[RDZV_HANG_ID_MAX + 1], id[RDZV_HANG_ID_MAX + 1];
	uint64_t now = 0;
	(void)state;

	/* 16 reports of 512 KiB fill the job's 8 MiB; the 17th is refused */
	assert_int_equal(trigger(st, NULL, NULL, now, &t), 0);
	snprintf(first, sizeof(first), "%s", id_of(t));
	json_decref(t);
	for (int i = 0; i < 16; i++)
		assert_int_equal(
		    post(st, i, first, RDZV_HANG_REPORT_MAX_BYTES, &complete),
		    0);
	assert_int_equal(
	    post(st, 16, first, RDZV_HANG_REPORT_MAX_BYTES, &complete),
	    DL_ELIMIT);
	assert_non_null(strstr(err, "holds"));
	/* a smaller report replacing a larger one fits */
	assert_int_equal(post(st, 0, first, 1000, &complete), 0);
	/* the next trigger's reports push the full one out */
	now += RDZV_HANG_OPEN_MS;
	assert_int_equal(trigger(st, NULL, NULL, now, &t), 0);
	snprintf(id, sizeof(id), "%s", id_of(t));
	json_decref(t);
	assert_int_equal(post(st, 0, id, RDZV_HANG_REPORT_MAX_BYTES, &complete),
			 0);
	assert_null(rdzv_hang_json(st, "job1", first, now, WALL));
	/* the last RDZV_HANG_KEPT triggers are kept */
	for (int k = 0; k < RDZV_HANG_KEPT; k++) {
		now += RDZV_HANG_OPEN_MS;
		assert_int_equal(trigger(st, NULL, NULL, now, &t), 0);
		json_decref(t);
	}
	assert_null(rdzv_hang_json(st, "job1", id, now, WALL));
	h = rdzv_hang_json(st, "job1", NULL, now, WALL);
	assert_non_null(h);
	json_decref(h);
	rdzv_state_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_who_may_trigger),
	    cmocka_unit_test(test_one_open_at_a_time),
	    cmocka_unit_test(test_reports),
	    cmocka_unit_test(test_round_change_and_end),
	    cmocka_unit_test(test_bounds),
	};
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
