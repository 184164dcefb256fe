/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_state.c - the rendezvous state machine, event by event:
 * rounds closing (at max, after the last call, on the join timeout),
 * eviction, the restart budget, completion, growth and spares, fencing,
 * incarnations, config mismatches, limits and names, stragglers and
 * deadlines. The durable form and the timeline are test_rdzv_save's,
 * preemption test_rdzv_preempt's.
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

/* Three nodes, min 2 max 3: the round closes at once at max with ranks
 * 0..2 in join order, offsets by nproc, one master. */
static void test_close_at_max(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 3, 1);
	(void)state;
	assert_int_equal(join(st, &c, "n1", 4, 0), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 10), RDZV_WAIT);
	assert_string_equal(state_of(st), "WAITING");
	assert_int_equal(join(st, &c, "n3", 8, 20), RDZV_DONE);
	assert_int_equal(check(st, "n1"), RDZV_DONE);
	assert_int_equal(check(st, "n2"), RDZV_DONE);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(field(st, "n1", "node_rank"), 0);
	assert_int_equal(field(st, "n2", "node_rank"), 1);
	assert_int_equal(field(st, "n3", "node_rank"), 2);
	assert_int_equal(field(st, "n1", "rank_offset"), 0);
	assert_int_equal(field(st, "n2", "rank_offset"), 4);
	assert_int_equal(field(st, "n3", "rank_offset"), 6);
	assert_int_equal(field(st, "n3", "world_size"), 14);
	assert_int_equal(field(st, "n2", "nnodes"), 3);
	assert_int_equal(field(st, "n3", "master_port"), 29500 + '1');
	assert_int_equal(field(st, "n1", "round"), 1);
	rdzv_state_free(st);
}

/* min reached: the round closes when the last call passes, not before. */
static void test_close_after_last_call(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 4, 1);
	(void)state;
	assert_int_equal(join(st, &c, "n1", 1, 0), RDZV_WAIT);
	assert_int_equal(rdzv_state_next_deadline(st), 10000); /* join tmo */
	assert_int_equal(join(st, &c, "n2", 1, 100), RDZV_WAIT);
	assert_int_equal(rdzv_state_next_deadline(st), 1100); /* last call */
	rdzv_state_tick(st, 1099);
	assert_int_equal(check(st, "n1"), RDZV_WAIT);
	rdzv_state_tick(st, 1100);
	assert_int_equal(check(st, "n1"), RDZV_DONE);
	assert_int_equal(check(st, "n2"), RDZV_DONE);
	assert_int_equal(field(st, "n2", "nnodes"), 2);
	rdzv_state_free(st);
}

/* Below min for join_timeout: the job fails; waiters get 410. */
static void test_join_timeout(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 2, 1);
	(void)state;
	assert_int_equal(join(st, &c, "n1", 1, 0), RDZV_WAIT);
	rdzv_state_tick(st, 9999);
	assert_string_equal(state_of(st), "WAITING");
	rdzv_state_tick(st, 10000);
	assert_string_equal(state_of(st), "FAILED");
	assert_int_equal(check(st, "n1"), DL_EGONE);
	assert_int_equal(join(st, &c, "n2", 1, 10001), DL_EGONE);
	assert_int_equal(rdzv_state_next_deadline(st), UINT64_MAX);
	rdzv_state_free(st);
}

/* A waiting node that holds no join and does not repeat it is dropped. */
static void test_waiter_dropped(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 2, 1);
	(void)state;
	assert_int_equal(join(st, &c, "n1", 1, 0), RDZV_WAIT);
	rdzv_state_tick(st, 5000); /* held open: still there */
	rdzv_join_poll_end(st, "job1", "n1", "inc-n1", 5000);
	rdzv_state_tick(st, 6999);
	assert_int_equal(check(st, "n1"), RDZV_WAIT);
	rdzv_state_tick(st, 7000);
	assert_int_equal(check(st, "n1"), DL_ESTALE);
	/* n2 joining alone does not close the round */
	assert_int_equal(join(st, &c, "n2", 1, 7001), RDZV_WAIT);
	rdzv_state_free(st);
}

/* A silent member is evicted after heartbeat_timeout: the round ends
 * without charging a restart, survivors get restart and keep their order
 * when they rejoin; the round closes once they are all back. */
static void test_eviction(void **state)
{
	struct rdzv_state *st = running(2, 3, 5, 3);
	struct rdzv_job_config c = config(2, 3, 5);
	struct rdzv_reply r;
	char name[RDZV_NAME_MAX + 1];
	(void)state;
	assert_int_equal(rdzv_state_next_deadline(st), 3000);
	assert_int_equal(hb(st, "n1", 1, 2500, &r), 0);
	assert_int_equal(r.action, RDZV_ACTION_CONTINUE);
	assert_int_equal(hb(st, "n3", 1, 2600, &r), 0);
	rdzv_state_tick(st, 3000); /* n2 silent since 1000 */
	assert_string_equal(state_of(st), "RESTARTING");
	assert_true(rdzv_state_pop_changed(st, name) & RDZV_CHANGED_WAKE);
	assert_string_equal(name, "job1");
	assert_int_equal(hb(st, "n1", 1, 3001, &r), DL_ESTALE);
	assert_int_equal(r.action, RDZV_ACTION_RESTART);
	assert_int_equal(r.round, 2);
	assert_int_equal(r.restart_count, 0);
	assert_int_equal(rdzv_watch(st, "job1", "n3", "inc-n3", 1, 3001, &r,
				    err, sizeof(err)),
			 RDZV_DONE);
	assert_int_equal(r.action, RDZV_ACTION_RESTART);
	/* n3 comes back first but keeps its place after n1 */
	assert_int_equal(join(st, &c, "n3", 2, 3002), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n1", 2, 3003), RDZV_DONE);
	assert_int_equal(field(st, "n1", "node_rank"), 0);
	assert_int_equal(field(st, "n3", "node_rank"), 1);
	assert_int_equal(field(st, "n3", "round"), 2);
	assert_int_equal(field(st, "n3", "restart_count"), 0);
	assert_int_equal(field(st, "n3", "world_size"), 4);
	rdzv_state_free(st);
}

/* A host that knows a node is dead (a store's lease expired) evicts it:
 * a member ends the round, uncharged, and is counted; a waiter is
 * dropped; a stale incarnation is refused and changes nothing. */
static void test_evict(void **state)
{
	struct rdzv_state *st = running(2, 3, 5, 3);
	struct rdzv_job_config c = config(2, 3, 5);
	struct rdzv_counters k;
	uint64_t by_state[RDZV_JOB_NSTATES], members;
	(void)state;
	drain(st);
	assert_int_equal(rdzv_evict(st, "job1", "n2", "other", "lease_expired",
				    1500, err, sizeof(err)),
			 DL_ESTALE);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(rdzv_evict(st, "job1", "n2", "inc-n2", "lease_expired",
				    1500, err, sizeof(err)),
			 0);
	assert_string_equal(state_of(st), "RESTARTING");
	rdzv_state_stats(st, by_state, &members, &k);
	assert_int_equal(k.evictions_total, 1);
	assert_int_equal(k.restarts_total, 0);
	assert_int_equal(join(st, &c, "n1", 2, 1600), RDZV_WAIT);
	assert_int_equal(rdzv_evict(st, "job1", "n1", "inc-n1", "lease_expired",
				    1700, err, sizeof(err)),
			 0);
	assert_int_equal(check(st, "n1"), DL_ESTALE); /* no longer waiting */
	/* n3 rejoins alone; with n1 gone and n2 dead it waits */
	assert_int_equal(join(st, &c, "n3", 2, 1800), RDZV_WAIT);
	assert_int_equal(rdzv_evict(st, "job1", "nx", "inc-nx", "lease_expired",
				    1900, err, sizeof(err)),
			 0);
	assert_int_equal(rdzv_evict(st, "nojob", "n1", "inc-n1", "x", 1900, err,
				    sizeof(err)),
			 DL_ENOTFOUND);
	rdzv_state_free(st);
}

/* A member that reported success is not evicted for going quiet. */
static void test_succeeded_not_evicted(void **state)
{
	struct rdzv_state *st = running(2, 2, 0, 2);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(report(st, "n1", 1, 1, 1500, &r), 0);
	assert_int_equal(r.action, RDZV_ACTION_CONTINUE);
	assert_int_equal(hb(st, "n2", 1, 2900, &r), 0);
	rdzv_state_tick(st, 4000);
	assert_string_equal(state_of(st), "RUNNING");
	rdzv_state_free(st);
}

/* A failure report ends the round and charges one restart; past the
 * budget the job fails and everyone is told stop. */
static void test_restart_budget(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	struct rdzv_job_config c = config(2, 2, 1);
	struct rdzv_reply r;
	json_t *d;
	(void)state;
	assert_int_equal(report(st, "n2", 1, 0, 1100, &r), 0);
	assert_int_equal(r.round, 2);
	assert_int_equal(r.state, RDZV_JOB_RESTARTING);
	assert_int_equal(r.action, RDZV_ACTION_RESTART);
	assert_int_equal(r.restart_count, 1);
	/* a second report for the old round is fenced and counts nothing */
	assert_int_equal(report(st, "n1", 1, 0, 1101, &r), DL_ESTALE);
	assert_int_equal(r.restart_count, 1);
	assert_int_equal(join(st, &c, "n1", 2, 1200), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 1201), RDZV_DONE);
	assert_int_equal(field(st, "n1", "restart_count"), 1);
	assert_int_equal(report(st, "n1", 2, 0, 1300, &r), 0);
	assert_int_equal(r.state, RDZV_JOB_FAILED);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	assert_int_equal(hb(st, "n2", 2, 1301, &r), 0);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	assert_int_equal(join(st, &c, "n3", 2, 1302), DL_EGONE);
	d = rdzv_job_detail_json(st, "job1", 1400);
	assert_int_equal(json_array_size(json_object_get(d, "failures")), 2);
	assert_string_equal(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(d, "failures"), 0), "node_id")),
	    "n2");
	json_decref(d);
	rdzv_state_free(st);
}

/* Every member reporting success ends the job SUCCEEDED. */
static void test_completion(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(report(st, "n1", 1, 1, 1100, &r), 0);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(rdzv_watch(st, "job1", "n1", "inc-n1", 1, 1100, &r,
				    err, sizeof(err)),
			 RDZV_WAIT);
	/* an anonymous watcher of the running round: continue; of an
	 * earlier round: restart, at once */
	assert_int_equal(
	    rdzv_watch(st, "job1", NULL, NULL, 1, 1100, &r, err, sizeof(err)),
	    RDZV_WAIT);
	assert_int_equal(r.action, RDZV_ACTION_CONTINUE);
	assert_int_equal(
	    rdzv_watch(st, "job1", NULL, NULL, 0, 1100, &r, err, sizeof(err)),
	    RDZV_DONE);
	assert_int_equal(r.action, RDZV_ACTION_RESTART);
	assert_int_equal(report(st, "n2", 1, 1, 1200, &r), 0);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	assert_string_equal(state_of(st), "SUCCEEDED");
	assert_int_equal(rdzv_watch(st, "job1", "n1", "inc-n1", 1, 1300, &r,
				    err, sizeof(err)),
			 RDZV_DONE);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	assert_int_equal(r.state, RDZV_JOB_SUCCEEDED);
	assert_int_equal(
	    rdzv_watch(st, "job1", NULL, NULL, 1, 1300, &r, err, sizeof(err)),
	    RDZV_DONE);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	/* a stranger's heartbeat to the ended job: 410 */
	assert_int_equal(hb(st, "n9", 1, 1300, &r), DL_EGONE);
	rdzv_state_free(st);
}

/* A late joiner below max ends the round without charging a restart and
 * takes the next rank; beyond max it waits as a spare and is promoted when
 * a member is lost. */
static void test_scale_up_and_spares(void **state)
{
	struct rdzv_state *st = running(1, 3, 2, 2);
	struct rdzv_job_config c = config(1, 3, 2);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(join(st, &c, "n3", 2, 1100), RDZV_WAIT);
	assert_string_equal(state_of(st), "RESTARTING");
	assert_int_equal(hb(st, "n1", 1, 1101, &r), DL_ESTALE);
	assert_int_equal(r.restart_count, 0);
	assert_int_equal(join(st, &c, "n2", 2, 1102), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n1", 2, 1103), RDZV_DONE);
	assert_int_equal(field(st, "n1", "node_rank"), 0);
	assert_int_equal(field(st, "n2", "node_rank"), 1);
	assert_int_equal(field(st, "n3", "node_rank"), 2);
	assert_int_equal(field(st, "n3", "restart_count"), 0);
	assert_int_equal(field(st, "n3", "round"), 2);
	/* full: n4 is a spare; the round goes on */
	assert_int_equal(join(st, &c, "n4", 2, 1200), RDZV_WAIT);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(hb(st, "n1", 2, 1201, &r), 0);
	assert_int_equal(r.action, RDZV_ACTION_CONTINUE);
	/* n2 leaves: n4 is promoted into round 3 */
	assert_int_equal(
	    rdzv_leave(st, "job1", "n2", "inc-n2", 1300, &r, err, sizeof(err)),
	    0);
	assert_int_equal(join(st, &c, "n1", 2, 1301), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n3", 2, 1302), RDZV_DONE);
	assert_int_equal(check(st, "n4"), RDZV_DONE);
	assert_int_equal(field(st, "n4", "node_rank"), 2);
	assert_int_equal(field(st, "n3", "node_rank"), 1);
	assert_int_equal(field(st, "n4", "round"), 3);
	rdzv_state_free(st);
}

/* Requests naming an old round, a wrong incarnation or a non-member are
 * fenced (DL_ESTALE) and change nothing. */
static void test_fencing(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	struct rdzv_reply r;
	char name[RDZV_NAME_MAX + 1];
	(void)state;
	assert_int_equal(hb(st, "n1", 7, 1100, &r), DL_ESTALE);
	assert_non_null(strstr(err, "stale round 7"));
	assert_int_equal(r.round, 1);
	assert_int_equal(rdzv_heartbeat(st, "job1", "n1", "other", 1, 1100, &r,
					err, sizeof(err)),
			 DL_ESTALE);
	assert_non_null(strstr(err, "incarnation"));
	assert_int_equal(hb(st, "n5", 1, 1100, &r), DL_ESTALE);
	assert_int_equal(rdzv_report(st, "job1", "n1", "other", 1, 0, NULL,
				     1100, &r, err, sizeof(err)),
			 DL_ESTALE);
	assert_int_equal(
	    rdzv_leave(st, "job1", "n1", "other", 1100, &r, err, sizeof(err)),
	    DL_ESTALE);
	assert_int_equal(rdzv_state_pop_changed(st, name), 0);
	assert_string_equal(state_of(st), "RUNNING");
	assert_int_equal(hb(st, "n1", 1, 1100, &r), DL_OK);
	assert_int_equal(hb(st, "n1", 1, 1100, &r), 0);
	assert_int_equal(
	    rdzv_heartbeat(st, "nojob", "n1", "x", 1, 1, &r, err, sizeof(err)),
	    DL_ENOTFOUND);
	rdzv_state_free(st);
}

/* A new incarnation of a member: the old agent is gone, the round ends. */
static void test_new_incarnation(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	struct rdzv_job_config c = config(2, 2, 1);
	struct rdzv_node_info n = node("n2", 2);
	struct rdzv_reply r;
	(void)state;
	snprintf(n.incarnation, sizeof(n.incarnation), "fresh");
	assert_int_equal(
	    rdzv_join(st, "job1", &n, &c, 1, 1100, &r, err, sizeof(err)),
	    RDZV_WAIT);
	assert_string_equal(state_of(st), "RESTARTING");
	assert_int_equal(hb(st, "n2", 1, 1101, &r), DL_ESTALE);
	assert_int_equal(join(st, &c, "n1", 2, 1102), RDZV_DONE);
	assert_int_equal(field(st, "n1", "node_rank"), 0);
	assert_int_equal(field(st, "n2", "node_rank"), 1);
	rdzv_state_free(st);
}

/* Two agents given one node id: the later join takes it (as a restart
 * would), and the incarnation it replaced is refused from then on with
 * "replaced" and action stop, whatever it sends (heartbeat, join, join
 * check, report), so the two do not take the id from each other in turn
 * (each taking would end the round of every node). */
static void test_replaced_incarnation(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	struct rdzv_job_config c = config(2, 2, 1);
	struct rdzv_node_info fresh = node("n2", 2), old = node("n2", 2);
	struct rdzv_reply r;
	(void)state;
	snprintf(fresh.incarnation, sizeof(fresh.incarnation), "fresh");
	assert_int_equal(
	    rdzv_join(st, "job1", &fresh, &c, 1, 1100, &r, err, sizeof(err)),
	    RDZV_WAIT);
	assert_int_equal(r.replaced, 0);
	/* the old incarnation's heartbeat: refused, told it was replaced */
	assert_int_equal(hb(st, "n2", 1, 1101, &r), DL_ESTALE);
	assert_int_equal(r.replaced, 1);
	assert_int_equal(r.action, RDZV_ACTION_STOP);
	assert_non_null(strstr(err, "node id n2 was taken"));
	/* its join again: refused, the fresh one keeps its place */
	assert_int_equal(
	    rdzv_join(st, "job1", &old, &c, 1, 1102, &r, err, sizeof(err)),
	    DL_ESTALE);
	assert_int_equal(r.replaced, 1);
	assert_int_equal(rdzv_join_check(st, "job1", "n2", old.incarnation, &r,
					 err, sizeof(err)),
			 DL_ESTALE);
	assert_int_equal(r.replaced, 1);
	assert_int_equal(rdzv_report(st, "job1", "n2", old.incarnation, 1, 0,
				     NULL, 1103, &r, err, sizeof(err)),
			 DL_ESTALE);
	assert_int_equal(
	    rdzv_join_check(st, "job1", "n2", "fresh", &r, err, sizeof(err)),
	    RDZV_WAIT);
	assert_int_equal(r.replaced, 0);
	/* the round forms with the fresh incarnation and n1 */
	assert_int_equal(join(st, &c, "n1", 2, 1104), RDZV_DONE);
	assert_int_equal(
	    rdzv_join_check(st, "job1", "n2", "fresh", &r, err, sizeof(err)),
	    RDZV_DONE);
	assert_int_equal(r.round, 2);
	assert_int_equal(rdzv_heartbeat(st, "job1", "n2", "fresh", 2, 1105, &r,
					err, sizeof(err)),
			 DL_OK);
	assert_int_equal(hb(st, "n2", 2, 1105, &r), DL_ESTALE);
	assert_int_equal(r.replaced, 1);
	assert_string_equal(state_of(st), "RUNNING");
	rdzv_state_free(st);
}

/* Later joins must agree with the job's configuration. */
static void test_config_mismatch(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 3, 1);
	struct rdzv_job_config d = c;
	struct rdzv_node_info n = node("n2", 1);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(join(st, &c, "n1", 1, 0), RDZV_WAIT);
	d.max_nodes = 4;
	assert_int_equal(
	    rdzv_join(st, "job1", &n, &d, 1, 1, &r, err, sizeof(err)),
	    DL_ECONFLICT);
	assert_non_null(strstr(err, "max_nodes"));
	d = c;
	d.heartbeat_timeout_ms = 9000;
	assert_int_equal(
	    rdzv_join(st, "job1", &n, &d, 1, 1, &r, err, sizeof(err)),
	    DL_ECONFLICT);
	assert_non_null(strstr(err, "heartbeat_timeout"));
	d = c;
	d.min_nodes = 5;
	assert_int_equal(
	    rdzv_join(st, "job2", &n, &d, 1, 1, &r, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(rdzv_job_count(st), 1);
	rdzv_state_free(st);
}

/* Bad names, counts and limits are refused. */
static void test_limits_and_names(void **state)
{
	struct rdzv_limits lim;
	struct rdzv_state *st;
	struct rdzv_job_config c = config(1, 1, 0);
	struct rdzv_node_info n = node("n1", 1);
	struct rdzv_reply r;
	(void)state;
	assert_true(parse_name_valid("a.b_c:d-9", 128));
	assert_false(parse_name_valid(".hidden", 128));
	assert_false(parse_name_valid("a/b", 128));
	assert_false(parse_name_valid("", 128));
	assert_false(parse_name_valid("abc", 2));
	rdzv_limits_init(&lim);
	lim.max_jobs = 2;
	lim.max_nodes_per_job = 2;
	lim.max_keys_per_job = 1;
	lim.max_value_bytes = 4;
	st = rdzv_state_new(&lim);
	assert_int_equal(
	    rdzv_join(st, "bad/job", &n, &c, 0, 0, &r, err, sizeof(err)),
	    DL_EINVAL);
	n.nproc = 0;
	assert_int_equal(
	    rdzv_join(st, "j1", &n, &c, 0, 0, &r, err, sizeof(err)), DL_EINVAL);
	n.nproc = 1;
	assert_int_equal(
	    rdzv_join(st, "j1", &n, &c, 0, 0, &r, err, sizeof(err)), RDZV_DONE);
	assert_int_equal(
	    rdzv_join(st, "j2", &n, &c, 0, 0, &r, err, sizeof(err)), RDZV_DONE);
	assert_int_equal(
	    rdzv_join(st, "j3", &n, &c, 0, 0, &r, err, sizeof(err)), DL_ELIMIT);
	/* an ended job makes room for a new one */
	assert_int_equal(rdzv_report(st, "j1", "n1", n.incarnation, 1, 1, NULL,
				     1, &r, err, sizeof(err)),
			 0);
	assert_int_equal(
	    rdzv_join(st, "j3", &n, &c, 0, 2, &r, err, sizeof(err)), RDZV_DONE);
	assert_int_equal(rdzv_job_count(st), 2);
	c.max_nodes = 3;
	assert_int_equal(
	    rdzv_join(st, "j4", &n, &c, 0, 0, &r, err, sizeof(err)), DL_ELIMIT);
	assert_int_equal(
	    rdzv_kv_put(st, "j3", "k1", "abcd", 4, err, sizeof(err)), 0);
	assert_int_equal(rdzv_kv_put(st, "j3", "k2", "a", 1, err, sizeof(err)),
			 DL_ELIMIT);
	assert_int_equal(
	    rdzv_kv_put(st, "j3", "k1", "abcde", 5, err, sizeof(err)),
	    DL_ELIMIT);
	assert_int_equal(
	    rdzv_kv_put(st, "nope", "k1", "a", 1, err, sizeof(err)),
	    DL_ENOTFOUND);
	rdzv_state_free(st);
}

/* A survivor that does not come back is left behind: the round closes
 * with those who did once the last call passes. */
static void test_straggler_left_behind(void **state)
{
	struct rdzv_state *st;
	struct rdzv_job_config c;
	struct rdzv_reply r;
	(void)state;
	st = running(2, 3, 3, 3);
	c = config(2, 3, 3);
	assert_int_equal(report(st, "n1", 1, 0, 1100, &r), 0);
	assert_int_equal(join(st, &c, "n1", 2, 1150), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 1160), RDZV_WAIT);
	rdzv_state_tick(st, 2159); /* last call from 1160 */
	assert_int_equal(check(st, "n1"), RDZV_WAIT);
	rdzv_state_tick(st, 2160);
	assert_int_equal(check(st, "n1"), RDZV_DONE);
	assert_int_equal(field(st, "n2", "nnodes"), 2);
	rdzv_state_free(st);
}

/* A survivor that still watches is alive: the watch keeps it a survivor
 * past the heartbeat timeout of its last beat, so the round waits for it
 * (the etcd leader refreshes every node with a live key this way; a
 * member refreshed last just under a timeout before its round ended
 * was dropped at once and the round closed without it). */
static void test_survivor_watch_keeps_it(void **state)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 3, 3);
	struct rdzv_reply r;
	(void)state;
	c.last_call_timeout_ms = 5000;
	join(st, &c, "n1", 2, 0);
	join(st, &c, "n2", 2, 0);
	assert_int_equal(join(st, &c, "n3", 2, 0), RDZV_DONE); /* at max */
	assert_int_equal(hb(st, "n1", 1, 1000, &r), 0);
	assert_int_equal(hb(st, "n2", 1, 1000, &r), 0);
	assert_int_equal(hb(st, "n3", 1, 1000, &r), 0);
	assert_int_equal(report(st, "n1", 1, 0, 1100, &r), 0);
	assert_int_equal(join(st, &c, "n1", 2, 1150), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 1160), RDZV_WAIT);
	/* n3, silent since 1000, watches at 2900 */
	rdzv_watch(st, "job1", "n3", "inc-n3", 1, 2900, &r, err, sizeof(err));
	rdzv_state_tick(st, 3000);
	assert_int_equal(check(st, "n1"), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n3", 2, 3100), RDZV_DONE);
	assert_int_equal(check(st, "n1"), RDZV_DONE);
	assert_int_equal(field(st, "n1", "nnodes"), 3);
	/* one that neither watches nor rejoins is still dropped */
	assert_int_equal(report(st, "n1", 2, 0, 3200, &r), 0);
	assert_int_equal(join(st, &c, "n1", 2, 3250), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 3260), RDZV_WAIT);
	rdzv_state_tick(st, 3100 + 1999);
	assert_int_equal(check(st, "n1"), RDZV_WAIT);
	rdzv_state_tick(st, 3100 + 2000);
	assert_int_equal(check(st, "n1"), RDZV_DONE);
	assert_int_equal(field(st, "n1", "nnodes"), 2);
	rdzv_state_free(st);
}

/* After any tick, the next deadline lies in the future: a survivor that
 * rejoined and holds its join open must not keep a past deadline (which
 * would spin the server's timer). */
static void test_deadline_never_past(void **state)
{
	struct rdzv_state *st = running(3, 3, 3, 3);
	struct rdzv_job_config c = config(3, 3, 3);
	struct rdzv_reply r;
	(void)state;
	assert_int_equal(report(st, "n1", 1, 0, 1100, &r), 0);
	assert_int_equal(join(st, &c, "n1", 2, 1150), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 1160), RDZV_WAIT);
	/* n3 never comes back; n1 and n2 hold their joins open */
	rdzv_state_tick(st, 2500);
	assert_true(rdzv_state_next_deadline(st) > 2500);
	rdzv_state_tick(st, 3000); /* n3 dropped: min 3 not reached */
	assert_true(rdzv_state_next_deadline(st) > 3000);
	rdzv_state_tick(st, 3100);
	assert_true(rdzv_state_next_deadline(st) > 3100);
	/* the join timeout runs from the end of round 1 */
	assert_int_equal(rdzv_state_next_deadline(st), 1100 + 10000);
	rdzv_state_free(st);
}

/* the nodes of test_many_rejoin that are not in its second round */
static int not_back(int i)
{
	return i == 150 || i == 7 || i == 9 || i == 10;
}

/* A round of 300 nodes loses n150; n7 leaves after rejoining, among
 * other waiters, n9 and n10 before: waiters and survivors are found by
 * name (a hashed index) through every removal and every growth of their
 * arrays, and the next round forms when the last of the other 296 is
 * back, each in its old order. */
static void test_many_rejoin(void **state)
{
	struct rdzv_state *st = running(2, 300, 5, 300);
	struct rdzv_job_config c = config(2, 300, 5);
	struct rdzv_reply r;
	char id[16];
	int rank = 0;
	(void)state;
	assert_int_equal(rdzv_evict(st, "job1", "n150", "inc-n150",
				    "lease_expired", 1500, err, sizeof(err)),
			 0);
	assert_string_equal(state_of(st), "RESTARTING");
	assert_int_equal(
	    rdzv_leave(st, "job1", "n9", "inc-n9", 1501, &r, err, sizeof(err)),
	    0);
	assert_int_equal(rdzv_leave(st, "job1", "n10", "inc-n10", 1502, &r, err,
				    sizeof(err)),
			 0);
	/* back in reverse order; n7 among the first, gone again halfway */
	for (int i = 300; i >= 2; i--) {
		if (not_back(i))
			continue;
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(join(st, &c, id, 2, 1700), RDZV_WAIT);
		if (i == 290)
			assert_int_equal(join(st, &c, "n7", 2, 1700),
					 RDZV_WAIT);
		if (i == 100)
			assert_int_equal(rdzv_leave(st, "job1", "n7", "inc-n7",
						    1700, &r, err, sizeof(err)),
					 0);
	}
	/* each joins again: found among the waiters, not added twice */
	for (int i = 300; i >= 2; i--) {
		if (not_back(i))
			continue;
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(join(st, &c, id, 2, 1750), RDZV_WAIT);
	}
	assert_string_equal(state_of(st), "RESTARTING");
	assert_int_equal(join(st, &c, "n1", 2, 1800), RDZV_DONE);
	for (int i = 1; i <= 300; i++) {
		if (not_back(i))
			continue;
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(check(st, id), RDZV_DONE);
		assert_int_equal(field(st, id, "node_rank"), rank++);
		assert_int_equal(field(st, id, "round"), 2);
	}
	assert_int_equal(field(st, "n1", "nnodes"), 296);
	assert_int_equal(check(st, "n150"), DL_ESTALE);
	rdzv_state_free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_close_at_max),
	    cmocka_unit_test(test_close_after_last_call),
	    cmocka_unit_test(test_join_timeout),
	    cmocka_unit_test(test_waiter_dropped),
	    cmocka_unit_test(test_eviction),
	    cmocka_unit_test(test_evict),
	    cmocka_unit_test(test_succeeded_not_evicted),
	    cmocka_unit_test(test_restart_budget),
	    cmocka_unit_test(test_completion),
	    cmocka_unit_test(test_scale_up_and_spares),
	    cmocka_unit_test(test_fencing),
	    cmocka_unit_test(test_new_incarnation),
	    cmocka_unit_test(test_replaced_incarnation),
	    cmocka_unit_test(test_config_mismatch),
	    cmocka_unit_test(test_limits_and_names),
	    cmocka_unit_test(test_straggler_left_behind),
	    cmocka_unit_test(test_survivor_watch_keeps_it),
	    cmocka_unit_test(test_deadline_never_past),
	    cmocka_unit_test(test_many_rejoin),
	};
	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
