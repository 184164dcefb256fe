/* SPDX-License-Identifier: Apache-2.0 */
/* test_rdzv_state.c - the rendezvous state machine, event by event. */
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

static char err[256];

static struct rdzv_job_config config(uint32_t min, uint32_t max,
				     uint32_t restarts)
{
	struct rdzv_job_config c;
	rdzv_job_config_init(&c);
	c.min_nodes = min;
	c.max_nodes = max;
	c.max_restarts = restarts;
	c.last_call_timeout_ms = 1000;
	c.heartbeat_timeout_ms = 2000;
	c.join_timeout_ms = 10000;
	return c;
}

static struct rdzv_node_info node(const char *id, uint32_t nproc)
{
	struct rdzv_node_info n;
	memset(&n, 0, sizeof(n));
	snprintf(n.node_id, sizeof(n.node_id), "%s", id);
	snprintf(n.incarnation, sizeof(n.incarnation), "inc-%s", id);
	snprintf(n.addr, sizeof(n.addr), "10.0.0.%d", id[strlen(id) - 1]);
	n.nproc = nproc;
	n.master_port = 29500 + (uint16_t)id[strlen(id) - 1];
	return n;
}

static int join(struct rdzv_state *st, const struct rdzv_job_config *c,
		const char *id, uint32_t nproc, uint64_t now)
{
	struct rdzv_node_info n = node(id, nproc);
	struct rdzv_reply r;
	return rdzv_join(st, "job1", &n, c, 1, now, &r, err, sizeof(err));
}

static int check(struct rdzv_state *st, const char *id)
{
	struct rdzv_reply r;
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_join_check(st, "job1", id, inc, &r, err, sizeof(err));
}

static json_int_t field(const struct rdzv_state *st, const char *id,
			const char *key)
{
	json_t *a = rdzv_assignment_json(st, "job1", id);
	json_int_t v;
	assert_non_null(a);
	v = json_integer_value(json_object_get(a, key));
	json_decref(a);
	return v;
}

static const char *state_of(const struct rdzv_state *st)
{
	static char buf[32];
	json_t *d = rdzv_job_detail_json(st, "job1", 0);
	assert_non_null(d);
	snprintf(buf, sizeof(buf), "%s",
		 json_string_value(json_object_get(d, "state")));
	json_decref(d);
	return buf;
}

static int hb(struct rdzv_state *st, const char *id, uint64_t round,
	      uint64_t now, struct rdzv_reply *r)
{
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_heartbeat(st, "job1", id, inc, round, now, r, err,
			      sizeof(err));
}

static int report(struct rdzv_state *st, const char *id, uint64_t round, int ok,
		  uint64_t now, struct rdzv_reply *r)
{
	char inc[80];
	json_t *f = json_pack("[{s:i, s:i, s:s}]", "rank", 0, "exitcode", 1,
			      "message", "boom");
	int rc;
	snprintf(inc, sizeof(inc), "inc-%s", id);
	rc = rdzv_report(st, "job1", id, inc, round, ok, ok ? NULL : f, now, r,
			 err, sizeof(err));
	json_decref(f);
	return rc;
}

static void drain(struct rdzv_state *st)
{
	char name[RDZV_NAME_MAX + 1];
	while (rdzv_state_pop_changed(st, name))
		;
}

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

static struct rdzv_state *running(uint32_t min, uint32_t max, uint32_t restarts,
				  int n)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(min, max, restarts);
	char id[8];
	for (int i = 1; i <= n; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		join(st, &c, id, 2, 0);
	}
	rdzv_state_tick(st, 1000);
	assert_string_equal(state_of(st), "RUNNING");
	/* every member beats at 1000: their deadlines are 3000 */
	for (int i = 1; i <= n; i++) {
		struct rdzv_reply r;
		snprintf(id, sizeof(id), "n%d", i);
		hb(st, id, 1, 1000, &r); /* spares get 409: fine */
	}
	drain(st);
	return st;
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

static void test_kv(void **state)
{
	struct rdzv_state *st = running(1, 1, 0, 1);
	const void *data;
	size_t len;
	(void)state;
	assert_int_equal(rdzv_kv_get(st, "job1", "id", &data, &len),
			 DL_ENOTFOUND);
	assert_int_equal(
	    rdzv_kv_put(st, "job1", "id", "xyz", 3, err, sizeof(err)), 0);
	assert_int_equal(rdzv_kv_get(st, "job1", "id", &data, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "xyz", 3);
	assert_int_equal(rdzv_kv_put(st, "job1", "id", "", 0, err, sizeof(err)),
			 0);
	assert_int_equal(rdzv_kv_get(st, "job1", "id", &data, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(
	    rdzv_kv_put(st, "job1", "../x", "", 0, err, sizeof(err)),
	    DL_EINVAL);
	rdzv_state_free(st);
}

/* Saved and restored, a job keeps its round, members, ranks, restart
 * count and failures; members get a fresh heartbeat deadline. */
static void test_save_restore(void **state)
{
	struct rdzv_state *st = running(2, 3, 3, 3);
	struct rdzv_state *st2 = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(2, 3, 3);
	struct rdzv_reply r;
	json_t *saved, *d1, *d2;
	char *s1, *s2;
	(void)state;
	assert_int_equal(report(st, "n2", 1, 0, 1100, &r), 0);
	join(st, &c, "n1", 2, 1200);
	join(st, &c, "n2", 2, 1200);
	join(st, &c, "n3", 2, 1200);
	assert_string_equal(state_of(st), "RUNNING");
	saved = rdzv_job_save(st, "job1");
	assert_non_null(saved);
	assert_int_equal(rdzv_job_restore(st2, saved, 50000, err, sizeof(err)),
			 0);
	json_decref(saved);
	d1 = rdzv_job_detail_json(st, "job1", 1200);
	d2 = rdzv_job_detail_json(st2, "job1", 50000);
	/* the timeline is not journaled: the restored job's starts again at
	 * the round it recovered, formed "now" */
	assert_int_equal(json_array_size(json_object_get(d1, "rounds")), 2);
	assert_int_equal(json_array_size(json_object_get(d2, "rounds")), 1);
	assert_true(json_is_true(json_object_get(
	    json_array_get(json_object_get(d2, "rounds"), 0), "recovered")));
	json_object_del(d1, "rounds");
	json_object_del(d2, "rounds");
	json_object_del(d1, "last_change_ms_ago");
	json_object_del(d2, "last_change_ms_ago");
	s1 = json_dumps(d1, JSON_SORT_KEYS);
	s2 = json_dumps(d2, JSON_SORT_KEYS);
	assert_string_equal(s1, s2);
	assert_int_equal(field(st2, "n3", "rank_offset"), 4);
	assert_int_equal(hb(st2, "n1", 2, 50001, &r), 0);
	assert_int_equal(rdzv_state_next_deadline(st2), 52000);
	free(s1);
	free(s2);
	json_decref(d1);
	json_decref(d2);
	/* a malformed saved job is refused and leaves nothing behind */
	saved = json_pack("{s:s, s:{}}", "job", "bad", "config");
	assert_int_not_equal(rdzv_job_restore(st2, saved, 0, err, sizeof(err)),
			     0);
	assert_int_equal(rdzv_job_count(st2), 1);
	json_decref(saved);
	rdzv_state_free(st);
	rdzv_state_free(st2);
}

/* Each part of a saved job is checked on restore: any bad one refuses the
 * whole job with a message and leaves no trace of it; a job saved again
 * over a restored one keeps its KV store. */
static void test_restore_checks_every_part(void **state)
{
	static const struct {
		const char *what;
		const char *path; /* "" top level, else an object or array */
		const char *key; /* field to replace (or, in arrays, index 0) */
		const char *value;
	} bad[] = {
	    {"no config", "", "config", "null"},
	    {"a config field missing", "config", "max_restarts", NULL},
	    {"min above max", "config", "min_nodes", "9"},
	    {"a state out of range", "", "state", "6"},
	    {"a round of 0", "", "round", "0"},
	    {"members not an array", "", "members", "{}"},
	    {"a member not an object", "members", "0", "7"},
	    {"a member's status out of range", "members", "status", "3"},
	    {"a member's addr too long", "members", "addr",
	     "\"0123456789012345678901234567890123456789012345678901234567"
	     "890123456789\""},
	    {"waiters not an array", "", "waiters", "null"},
	    {"a survivor with a bad name", "survivors", "0", "\".x\""},
	    {"failures not an array", "", "failures", "{}"},
	    {"running without members", "", "members", "[]"},
	};
	struct rdzv_state *st = running(2, 3, 3, 2);
	json_t *good = rdzv_job_save(st, "job1");
	const void *data;
	size_t len;
	(void)state;
	assert_non_null(good);
	/* a survivor to corrupt: the saved form has none while RUNNING */
	json_array_append_new(json_object_get(good, "survivors"),
			      json_string("n1"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rdzv_state *st2 = rdzv_state_new(NULL);
		json_t *saved = json_deep_copy(good), *at = saved, *v = NULL;
		if (bad[i].path[0])
			at = json_object_get(saved, bad[i].path);
		if (json_is_array(at) && strcmp(bad[i].key, "0") != 0)
			at = json_array_get(at, 0);
		if (bad[i].value)
			v = json_loads(bad[i].value, JSON_DECODE_ANY, NULL);
		if (json_is_array(at))
			json_array_set_new(at, 0, v);
		else if (v)
			json_object_set_new(at, bad[i].key, v);
		else
			json_object_del(at, bad[i].key);
		err[0] = '\0';
		if (rdzv_job_restore(st2, saved, 0, err, sizeof(err)) >= 0)
			fail_msg("%s: restored", bad[i].what);
		if (!err[0])
			fail_msg("%s: no message", bad[i].what);
		if (rdzv_job_exists(st2, "job1"))
			fail_msg("%s: a job was left behind", bad[i].what);
		json_decref(saved);
		rdzv_state_free(st2);
	}
	/* the unchanged form restores, over a job with keys that stay */
	assert_int_equal(rdzv_kv_put(st, "job1", "k", "v", 1, err, sizeof(err)),
			 0);
	assert_int_equal(rdzv_job_restore(st, good, 0, err, sizeof(err)), 0);
	assert_int_equal(rdzv_kv_get(st, "job1", "k", &data, &len), 0);
	assert_int_equal(len, 1);
	assert_string_equal(state_of(st), "RUNNING");
	json_decref(good);
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

/* round_field: field key of the i-th round of the job's timeline */
static json_t *round_field(json_t *d, size_t i, const char *key)
{
	return json_object_get(json_array_get(json_object_get(d, "rounds"), i),
			       key);
}

/* The timeline: each round's opening, forming and end with its reason,
 * in milliseconds before the time asked; and the per-job figures. */
static void test_timeline(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2); /* formed at 0 */
	struct rdzv_job_config c = config(2, 2, 1);
	struct rdzv_job_stats js;
	struct rdzv_reply r;
	json_t *d;
	(void)state;
	assert_int_equal(report(st, "n2", 1, 0, 1100, &r), 0);
	assert_int_equal(join(st, &c, "n1", 2, 1200), RDZV_WAIT);
	assert_int_equal(join(st, &c, "n2", 2, 1201), RDZV_DONE);
	rdzv_state_tick(st, 4000);  /* both silent since 1201: evicted */
	rdzv_state_tick(st, 14000); /* nobody back: join timeout */
	assert_string_equal(state_of(st), "FAILED");
	d = rdzv_job_detail_json(st, "job1", 15000);
	assert_int_equal(json_array_size(json_object_get(d, "rounds")), 3);
	assert_int_equal(json_integer_value(round_field(d, 0, "round")), 1);
	assert_int_equal(json_integer_value(round_field(d, 0, "opened_ms_ago")),
			 15000);
	assert_int_equal(json_integer_value(round_field(d, 0, "formed_ms_ago")),
			 15000);
	assert_int_equal(json_integer_value(round_field(d, 0, "ended_ms_ago")),
			 13900);
	assert_string_equal(json_string_value(round_field(d, 0, "end_reason")),
			    "failure");
	assert_string_equal(json_string_value(round_field(d, 0, "end_node")),
			    "n2");
	assert_int_equal(json_integer_value(round_field(d, 0, "nnodes")), 2);
	assert_int_equal(json_integer_value(round_field(d, 1, "formed_ms_ago")),
			 13799);
	assert_string_equal(json_string_value(round_field(d, 1, "end_reason")),
			    "heartbeat_timeout");
	assert_int_equal(json_integer_value(round_field(d, 1, "ended_ms_ago")),
			 11000);
	/* the last round never formed and ended the job */
	assert_true(json_is_null(round_field(d, 2, "formed_ms_ago")));
	assert_string_equal(json_string_value(round_field(d, 2, "end_reason")),
			    "join_timeout");
	assert_true(json_is_null(round_field(d, 2, "end_node")));
	assert_int_equal(
	    json_integer_value(json_object_get(d, "last_change_ms_ago")), 1000);
	json_decref(d);
	assert_int_equal(rdzv_job_stats_at(st, 0, 15000, &js), 0);
	assert_string_equal(js.job, "job1");
	assert_int_equal(js.state, RDZV_JOB_FAILED);
	assert_int_equal(js.round, 3);
	assert_int_equal(js.restart_count, 1);
	assert_int_equal(js.max_restarts, 1);
	assert_int_equal(js.since_change_ms, 1000);
	assert_int_equal(rdzv_job_stats_at(st, 1, 15000, &js), DL_ENOTFOUND);
	rdzv_state_free(st);
}

/* The timeline keeps the newest 32 rounds, oldest first. */
static void test_timeline_ring(void **state)
{
	struct rdzv_state *st = running(1, 1, 100, 1);
	struct rdzv_job_config c = config(1, 1, 100);
	struct rdzv_reply r;
	json_t *d;
	(void)state;
	for (uint64_t round = 1; round <= 40; round++) {
		assert_int_equal(
		    report(st, "n1", round, 0, 2000 + round * 10, &r), 0);
		assert_int_equal(join(st, &c, "n1", 2, 2001 + round * 10),
				 RDZV_DONE);
	}
	d = rdzv_job_detail_json(st, "job1", 3000);
	assert_int_equal(json_array_size(json_object_get(d, "rounds")), 32);
	assert_int_equal(json_integer_value(round_field(d, 0, "round")), 10);
	assert_int_equal(json_integer_value(round_field(d, 31, "round")), 41);
	assert_true(json_is_null(round_field(d, 31, "end_reason")));
	json_decref(d);
	rdzv_state_free(st);
}

/* recovery_saved: st's job1 (n1 in place, n2 restarted, round 1) saved
 * and restored keeps how each member entered (an etcd job's record is
 * what `dlaunch status` reads); a record that names an unknown way is
 * refused, one that names none restores none. */
static void recovery_saved(struct rdzv_state *st)
{
	struct rdzv_state *st2 = rdzv_state_new(NULL);
	json_t *saved = rdzv_job_save(st, "job1"), *d, *rec, *m;
	assert_non_null(saved);
	m = json_array_get(json_object_get(saved, "members"), 0);
	assert_string_equal(json_string_value(json_object_get(m, "recovery")),
			    "in_place");
	assert_int_equal(rdzv_job_restore(st2, saved, 5000, err, sizeof(err)),
			 0);
	d = rdzv_job_detail_json(st2, "job1", 5000);
	rec = json_object_get(json_array_get(json_object_get(d, "members"), 1),
			      "recovery");
	assert_string_equal(json_string_value(json_object_get(rec, "how")),
			    "restarted");
	assert_string_equal(json_string_value(json_object_get(rec, "why")),
			    "not declared");
	json_decref(d);
	json_object_set_new(m, "recovery", json_string("kept"));
	assert_int_equal(rdzv_job_restore(st2, saved, 5000, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "'kept'"));
	json_object_del(m, "recovery");
	json_object_del(m, "recovery_why");
	assert_int_equal(rdzv_job_restore(st2, saved, 5000, err, sizeof(err)),
			 0);
	d = rdzv_job_detail_json(st2, "job1", 5000);
	rec = json_object_get(json_array_get(json_object_get(d, "members"), 0),
			      "recovery");
	assert_true(json_is_null(rec));
	json_decref(d);
	json_decref(saved);
	rdzv_state_free(st2);
}

/* How members' workers entered the round: kept on the member, counted
 * once per member and round in the timeline and the counters; stale or
 * unknown values refused or ignored. */
static void test_recovery(void **state)
{
	struct rdzv_state *st = running(2, 2, 1, 2);
	enum rdzv_recovery how;
	struct rdzv_counters c;
	uint64_t by_state[RDZV_JOB_NSTATES], members;
	json_t *d, *m, *rec;
	(void)state;
	assert_int_equal(rdzv_recovery_parse("in_place", &how), 0);
	assert_int_equal(how, RDZV_RECOVERY_IN_PLACE);
	assert_int_equal(rdzv_recovery_parse("kept", &how), DL_EINVAL);
	assert_string_equal(rdzv_recovery_name(RDZV_RECOVERY_RESTARTED),
			    "restarted");
	assert_int_equal(rdzv_member_recovery(st, "job1", "n1", "inc-n1", 1,
					      RDZV_RECOVERY_IN_PLACE, "kept",
					      err, sizeof(err)),
			 0);
	/* said again: counted once */
	assert_int_equal(rdzv_member_recovery(st, "job1", "n1", "inc-n1", 1,
					      RDZV_RECOVERY_IN_PLACE, "kept",
					      err, sizeof(err)),
			 0);
	assert_int_equal(rdzv_member_recovery(st, "job1", "n2", "inc-n2", 1,
					      RDZV_RECOVERY_RESTARTED,
					      "not declared", err, sizeof(err)),
			 0);
	/* fenced: another round, another incarnation */
	assert_int_equal(rdzv_member_recovery(st, "job1", "n2", "inc-n2", 7,
					      RDZV_RECOVERY_IN_PLACE, "x", err,
					      sizeof(err)),
			 DL_ESTALE);
	assert_int_equal(rdzv_member_recovery(st, "job1", "n2", "inc-old", 1,
					      RDZV_RECOVERY_IN_PLACE, "x", err,
					      sizeof(err)),
			 DL_ESTALE);
	rdzv_state_stats(st, by_state, &members, &c);
	assert_int_equal(c.recoveries_total[RDZV_RECOVERY_IN_PLACE], 1);
	assert_int_equal(c.recoveries_total[RDZV_RECOVERY_RESTARTED], 1);
	d = rdzv_job_detail_json(st, "job1", 2000);
	m = json_array_get(json_object_get(d, "members"), 1);
	rec = json_object_get(m, "recovery");
	assert_string_equal(json_string_value(json_object_get(m, "node_id")),
			    "n2");
	assert_string_equal(json_string_value(json_object_get(rec, "how")),
			    "restarted");
	assert_string_equal(json_string_value(json_object_get(rec, "why")),
			    "not declared");
	rec = json_object_get(round_field(d, 0, "entered"), "in_place");
	assert_int_equal(json_integer_value(rec), 1);
	json_decref(d);
	recovery_saved(st);
	rdzv_state_free(st);
}

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
	    cmocka_unit_test(test_config_mismatch),
	    cmocka_unit_test(test_limits_and_names),
	    cmocka_unit_test(test_kv),
	    cmocka_unit_test(test_save_restore),
	    cmocka_unit_test(test_restore_checks_every_part),
	    cmocka_unit_test(test_straggler_left_behind),
	    cmocka_unit_test(test_survivor_watch_keeps_it),
	    cmocka_unit_test(test_deadline_never_past),
	    cmocka_unit_test(test_timeline),
	    cmocka_unit_test(test_timeline_ring),
	    cmocka_unit_test(test_recovery),
	    cmocka_unit_test(test_preempt_step),
	    cmocka_unit_test(test_preempt),
	    cmocka_unit_test(test_preempt_interrupted),
	    cmocka_unit_test(test_preempt_refused),
	};
	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
