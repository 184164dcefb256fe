/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_rdzv_save.c - what the rendezvous state keeps and gives back: the
 * per-job store, the durable form (saved, restored, every part of it
 * checked on restore), the timeline of rounds and the recovery of a
 * running job from its saved form.
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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kv),
	    cmocka_unit_test(test_save_restore),
	    cmocka_unit_test(test_restore_checks_every_part),
	    cmocka_unit_test(test_timeline),
	    cmocka_unit_test(test_timeline_ring),
	    cmocka_unit_test(test_recovery),
	};
	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
