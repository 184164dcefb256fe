/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_record.c - when the job ended, in an etcd job record
 * (agent/etcd/etcd_record.c): written once the job ends, and read back by a
 * leader that restores the record long after, so that a join past
 * rerun_after starts a new run and a sooner one is late for the old.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "../../agent/etcd/etcd_record.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"

#define NOW 1000000 /* the state machines' clock, ms */

static char err[512];

static void node(struct rdzv_node_info *n, const char *id, uint32_t run)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->node_id, sizeof(n->node_id), "%s", id);
	snprintf(n->incarnation, sizeof(n->incarnation), "%s-1", id);
	snprintf(n->addr, sizeof(n->addr), "10.0.0.1");
	n->nproc = 1;
	n->run = run;
}

static struct rdzv_state *machine(void)
{
	struct rdzv_limits limits;
	rdzv_limits_init(&limits);
	limits.rerun_after_ms = 3000;
	return rdzv_state_new(&limits);
}

/* ended_record: the saved record of job j, run 1 of one node, succeeded */
static json_t *ended_record(void)
{
	struct rdzv_state *st = machine();
	struct rdzv_job_config cfg;
	struct rdzv_node_info n;
	struct rdzv_reply reply;
	json_t *saved;
	rdzv_job_config_init(&cfg);
	cfg.min_nodes = cfg.max_nodes = 1;
	node(&n, "a", 0);
	assert_int_equal(
	    rdzv_join(st, "j", &n, &cfg, 0, NOW, &reply, err, sizeof(err)), 0);
	assert_int_equal(rdzv_report(st, "j", "a", "a-1", reply.round, 1, NULL,
				     NOW, &reply, err, sizeof(err)),
			 0);
	saved = rdzv_job_save(st, "j");
	assert_non_null(saved);
	rdzv_state_free(st);
	return saved;
}

/* join_after: restore saved (ended end_ago_ms ago by the wall clock) at
 * NOW, then a new node joins: its code, and the run the job is at */
static int join_after(json_t *saved, uint64_t end_ago_ms, json_int_t *run)
{
	struct rdzv_state *st = machine();
	struct rdzv_job_config cfg;
	struct rdzv_node_info n;
	struct rdzv_reply reply;
	uint64_t wall = 0;
	json_t *detail;
	int rc;
	json_object_set_new(
	    saved, "ended_unix_ms",
	    json_integer((json_int_t)(clock_wall_ms() - end_ago_ms)));
	assert_int_equal(rdzv_job_restore(st, saved, NOW, err, sizeof(err)), 0);
	etcd_record_restored(st, "j", saved, NOW, &wall);
	assert_true(wall > 0);
	rdzv_job_config_init(&cfg);
	cfg.min_nodes = cfg.max_nodes = 1;
	node(&n, "b", 0);
	rc = rdzv_join(st, "j", &n, &cfg, 0, NOW, &reply, err, sizeof(err));
	detail = rdzv_job_detail_json(st, "j", NOW);
	*run = json_integer_value(json_object_get(detail, "run"));
	json_decref(detail);
	rdzv_state_free(st);
	return rc;
}

/* The end time goes into the record once the job ended, and stays the
 * same in later writes; a running job's record has none. */
static void test_stamp(void **state)
{
	json_t *saved = ended_record();
	uint64_t wall = 0, before = clock_wall_ms(), first;
	(void)state;
	etcd_record_stamp(saved, &wall);
	first = wall;
	assert_true(first >= before && first <= clock_wall_ms());
	assert_int_equal(
	    json_integer_value(json_object_get(saved, "ended_unix_ms")),
	    (json_int_t)first);
	etcd_record_stamp(saved, &wall);
	assert_int_equal(wall, first);
	json_object_set_new(saved, "state", json_integer(RDZV_JOB_RUNNING));
	json_object_del(saved, "ended_unix_ms");
	etcd_record_stamp(saved, &wall);
	assert_int_equal(wall, 0);
	assert_null(json_object_get(saved, "ended_unix_ms"));
	json_decref(saved);
}

/* Restored by a leader that came later: the wait counts from the end,
 * not from the restore. */
static void test_restored(void **state)
{
	json_t *saved = ended_record();
	json_int_t run = 0;
	(void)state;
	/* 1 s after the end: late for run 1 */
	assert_int_equal(join_after(saved, 1000, &run), DL_EGONE);
	assert_non_null(strstr(err, "this node is late for run 1"));
	assert_int_equal(run, 1);
	/* 5 s after (rerun_after is 3 s): run 2 */
	assert_int_not_equal(join_after(saved, 5000, &run), DL_EGONE);
	assert_int_equal(run, 2);
	/* a record without the time counts as ended long ago */
	json_object_del(saved, "ended_unix_ms");
	{
		struct rdzv_state *st = machine();
		uint64_t wall = 0;
		assert_int_equal(
		    rdzv_job_restore(st, saved, NOW, err, sizeof(err)), 0);
		etcd_record_restored(st, "j", saved, NOW, &wall);
		assert_int_equal(wall, 1);
		rdzv_state_free(st);
	}
	json_decref(saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stamp),
	    cmocka_unit_test(test_restored),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
