/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_runs.c - the rendezvous state machine across the runs of one
 * job id (a join after the end starts a new run; one sooner is late for
 * the run that ended) and the master address of a round (never loopback
 * when a node is on another host).
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
#include "dlaunch/rdzv_state.h"

static char err[256];

static struct rdzv_job_config config(uint32_t min, uint32_t max)
{
	struct rdzv_job_config c;
	rdzv_job_config_init(&c);
	c.min_nodes = min;
	c.max_nodes = max;
	c.max_restarts = 1;
	c.last_call_timeout_ms = 1000;
	c.heartbeat_timeout_ms = 2000;
	c.join_timeout_ms = 10000;
	return c;
}

/* join_run: a join of a node that took part in run (0: none) */
static int join_run(struct rdzv_state *st, const struct rdzv_job_config *c,
		    const char *id, const char *addr, uint32_t run,
		    uint64_t now)
{
	struct rdzv_node_info n;
	struct rdzv_reply r;
	memset(&n, 0, sizeof(n));
	snprintf(n.node_id, sizeof(n.node_id), "%s", id);
	snprintf(n.incarnation, sizeof(n.incarnation), "inc-%s-%llu", id,
		 (unsigned long long)now);
	snprintf(n.addr, sizeof(n.addr), "%s", addr);
	n.nproc = 1;
	n.master_port = 29500;
	n.run = run;
	return rdzv_join(st, "job1", &n, c, 1, now, &r, err, sizeof(err));
}

static int join_at(struct rdzv_state *st, const struct rdzv_job_config *c,
		   const char *id, const char *addr, uint64_t now)
{
	return join_run(st, c, id, addr, 0, now);
}

static json_t *detail(const struct rdzv_state *st)
{
	json_t *d = rdzv_job_detail_json(st, "job1", 0);
	assert_non_null(d);
	return d;
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_int_t num(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* the one member n1 of round `round` (inc joined at `at`) succeeds */
static void succeed(struct rdzv_state *st, uint64_t round, uint64_t at,
		    uint64_t now)
{
	struct rdzv_reply r;
	char inc[64];
	snprintf(inc, sizeof(inc), "inc-n1-%llu", (unsigned long long)at);
	assert_int_equal(rdzv_report(st, "job1", "n1", inc, round, 1, NULL, now,
				     &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.state, RDZV_JOB_SUCCEEDED);
}

/* A join soon after the end is late for the run that ended (410 naming
 * why); one rerun_after_ms after it starts run 2, which keeps run 1 for
 * status, starts from a fresh round, and runs to its own end. */
static void test_rerun_after_end(void **state)
{
	struct rdzv_limits lim;
	struct rdzv_job_config c = config(1, 1);
	struct rdzv_state *st;
	json_t *d;
	(void)state;
	rdzv_limits_init(&lim);
	lim.rerun_after_ms = 5000;
	st = rdzv_state_new(&lim);
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 0), RDZV_DONE);
	assert_int_equal(rdzv_kv_put(st, "job1", "k", "v", 1, err, sizeof(err)),
			 0);
	succeed(st, 1, 0, 100);
	/* late: its peers are gone, it must not start a run alone */
	assert_int_equal(join_at(st, &c, "n2", "10.0.0.2", 4000), DL_EGONE);
	assert_non_null(strstr(err, "late for run 1"));
	d = detail(st);
	assert_string_equal(str(d, "state"), "SUCCEEDED");
	assert_int_equal(num(d, "run"), 1);
	json_decref(d);
	/* a node of run 1 (back from a partition) never starts run 2,
	 * however late */
	assert_int_equal(join_run(st, &c, "n2", "10.0.0.2", 1, 9000), DL_EGONE);
	assert_non_null(strstr(err, "took part in run 1"));
	/* the rerun: a new run of the id, even with another config */
	c.max_restarts = 3;
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 9100), RDZV_DONE);
	d = detail(st);
	assert_string_equal(str(d, "state"), "RUNNING");
	assert_int_equal(num(d, "run"), 2);
	assert_int_equal(num(d, "round"), 2);
	assert_int_equal(num(d, "restart_count"), 0);
	assert_int_equal(num(d, "max_restarts"), 3);
	assert_int_equal(json_array_size(json_object_get(d, "runs")), 1);
	assert_string_equal(
	    str(json_array_get(json_object_get(d, "runs"), 0), "state"),
	    "SUCCEEDED");
	json_decref(d);
	/* the new run's KV starts empty */
	{
		const void *data;
		size_t len;
		assert_int_not_equal(rdzv_kv_get(st, "job1", "k", &data, &len),
				     0);
	}
	{
		json_t *a = rdzv_assignment_json(st, "job1", "n1");
		assert_int_equal(num(a, "run"), 2);
		json_decref(a);
	}
	/* a node of run 1 is refused by run 2 too */
	assert_int_equal(join_run(st, &c, "n2", "10.0.0.2", 1, 9150), DL_EGONE);
	succeed(st, 2, 9100, 9200);
	d = detail(st);
	assert_int_equal(num(d, "run"), 2);
	assert_string_equal(str(d, "state"), "SUCCEEDED");
	json_decref(d);
	rdzv_state_free(st);
}

/* Reruns off (the default, and the etcd backend): every join of an ended
 * job is refused, however late. A saved job keeps its runs. */
static void test_rerun_off_and_saved(void **state)
{
	struct rdzv_limits lim;
	struct rdzv_job_config c = config(1, 1);
	struct rdzv_state *st = rdzv_state_new(NULL), *st2;
	json_t *saved, *d;
	(void)state;
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 0), RDZV_DONE);
	succeed(st, 1, 0, 100);
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 1000000), DL_EGONE);
	assert_non_null(strstr(err, "does not rerun"));
	rdzv_state_free(st);

	rdzv_limits_init(&lim);
	lim.rerun_after_ms = 10;
	st = rdzv_state_new(&lim);
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 0), RDZV_DONE);
	succeed(st, 1, 0, 100);
	assert_int_equal(join_at(st, &c, "n1", "10.0.0.1", 200), RDZV_DONE);
	saved = rdzv_job_save(st, "job1");
	assert_non_null(saved);
	st2 = rdzv_state_new(&lim);
	assert_int_equal(rdzv_job_restore(st2, saved, 300, err, sizeof(err)),
			 0);
	d = detail(st2);
	assert_int_equal(num(d, "run"), 2);
	assert_int_equal(json_array_size(json_object_get(d, "runs")), 1);
	json_decref(d);
	json_decref(saved);
	rdzv_state_free(st2);
	rdzv_state_free(st);
}

/* A loopback address is never the master of a round with a node that
 * announced another address: that node becomes node rank 0; a round all
 * on loopback (one host) keeps its order. */
static void test_master_not_loopback(void **state)
{
	struct rdzv_job_config c = config(3, 3);
	struct rdzv_state *st = rdzv_state_new(NULL);
	json_t *a;
	(void)state;
	join_at(st, &c, "head", "127.0.0.1", 0);
	join_at(st, &c, "n2", "10.0.0.2", 1);
	assert_int_equal(join_at(st, &c, "n3", "10.0.0.3", 2), RDZV_DONE);
	a = rdzv_assignment_json(st, "job1", "n2");
	assert_int_equal(num(a, "node_rank"), 0);
	assert_string_equal(str(a, "master_addr"), "10.0.0.2");
	assert_int_equal(num(a, "rank_offset"), 0);
	json_decref(a);
	a = rdzv_assignment_json(st, "job1", "head");
	assert_int_equal(num(a, "node_rank"), 1);
	assert_int_equal(num(a, "rank_offset"), 1);
	json_decref(a);
	a = rdzv_assignment_json(st, "job1", "n3");
	assert_int_equal(num(a, "node_rank"), 2);
	json_decref(a);
	rdzv_state_free(st);

	st = rdzv_state_new(NULL);
	join_at(st, &c, "a", "127.0.0.10", 0);
	join_at(st, &c, "b", "127.0.0.11", 1);
	assert_int_equal(join_at(st, &c, "c", "::1", 2), RDZV_DONE);
	a = rdzv_assignment_json(st, "job1", "a");
	assert_int_equal(num(a, "node_rank"), 0);
	assert_string_equal(str(a, "master_addr"), "127.0.0.10");
	json_decref(a);
	rdzv_state_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rerun_after_end),
	    cmocka_unit_test(test_rerun_off_and_saved),
	    cmocka_unit_test(test_master_not_loopback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
