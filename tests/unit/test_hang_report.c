/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hang_report.c - unit tests of the hang analysis (common/hang*.c)
 * beyond its rules: the evidence a dump of a healthy job needs,
 * stragglers, missing nodes, older triggers and duplicates, bad input of
 * every kind (skipped, never a crash), and the text version with its
 * folded stacks and its bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/buf.h"
#include "dlaunch/error.h"
#include "dlaunch/hang.h"
#include "hang_fix.h"

/* ---- a healthy job: no false hang ---- */

static void test_healthy_dump(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	/* ranks a few ms apart: some in #101, some computing */
	for (int r = 0; r < 8; r++) {
		json_t *w = worker(r, r % 2 ? "running" : "sleeping");
		json_object_set_new(w, "flight",
				    r % 3 ? flight(100, 101, T0 - 4)
					  : flight(100, 0, 0));
		set_step(w, 50, 12);
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 2, "dump");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "none");
	assert_string_equal(rule_of(a), "none");
	assert_stuck(a, NULL, 0);
	assert_int_equal(json_array_size(json_object_get(a, "stragglers")), 0);
	json_decref(a);
	json_decref(rep);
}

static void test_straggler(void **state)
{
	int steps[] = {200, 201, 190, 200};
	int64_t ages[] = {10, 20, 30, 15};
	int k = 2;
	json_t *rep = steps_case(steps, ages, 4, "dump");
	json_t *a = dl_hang_analyse(rep, T0);
	(void)state;
	assert_string_equal(verdict_of(a), "straggler");
	assert_stuck(a, NULL, 0);
	assert_int_equal(json_array_size(json_object_get(a, "stragglers")), 1);
	assert_int_equal(json_integer_value(json_array_get(
			     json_object_get(a, "stragglers"), 0)),
			 k);
	assert_names_rank(a, 2, 1);
	json_decref(a);
	json_decref(rep);
}

/* Steps unchanged for the stall time on every rank are evidence even for a
 * dump. */
static void test_dump_stale_steps(void **state)
{
	int steps[] = {30, 29, 30, 30};
	int64_t ages[] = {60000, 61000, 60000, 60000};
	int k = 1;
	json_t *rep = steps_case(steps, ages, 4, "dump");
	json_t *a = dl_hang_analyse(rep, T0);
	(void)state;
	assert_string_equal(verdict_of(a), "hang");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
}

/* ---- nodes that did not report, triggers, duplicates ---- */

static void test_missing_nodes(void **state)
{
	json_t *members = json_pack("[s,s,s]", "n0", "n1", "n9");
	json_t *ws = json_array(), *rep, *a;
	int k = 1;
	(void)state;
	for (int r = 0; r < 4; r++) {
		json_t *w = worker(r, "sleeping");
		json_object_set_new(w, "flight", flight(3, 4, T0 - 5000));
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 2, "stall");
	/* everyone seen is inside #4: the stuck ranks are on n9 */
	a = dl_hang_analyse_members(rep, members, NULL, T0);
	assert_string_equal(verdict_of(a), "incomplete");
	assert_int_equal(json_array_size(json_object_get(a, "missing_nodes")),
			 1);
	assert_string_equal(json_string_value(json_array_get(
				json_object_get(a, "missing_nodes"), 0)),
			    "n9");
	assert_int_equal(json_array_size(json_object_get(a, "nodes")), 2);
	json_decref(a);
	/* a rank that shows the hang still wins over the missing node */
	json_object_set_new(
	    json_array_get(json_object_get(json_array_get(rep, 0), "workers"),
			   1),
	    "flight", flight(3, 0, 0));
	a = dl_hang_analyse_members(rep, members, NULL, T0);
	assert_string_equal(verdict_of(a), "hang");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
	json_decref(members);
}

static void test_rank_gap_is_incomplete(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	for (int r = 0; r < 4; r++)
		if (r != 2)
			json_array_append_new(ws, worker(r, "sleeping"));
	rep = reports(ws, 1, "dump");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "incomplete");
	assert_int_equal(json_integer_value(json_object_get(a, "ranks_seen")),
			 3);
	json_decref(a);
	json_decref(rep);
}

static void test_older_trigger_and_duplicates(void **state)
{
	json_t *rep = sleep_case(4, 2, 1, "progress-timeout"), *old, *a;
	int k = 1;
	(void)state;
	/* a report of an older trigger claiming rank 2 is stopped */
	old = json_deep_copy(json_array_get(rep, 1));
	json_object_set_new(old, "trigger",
			    json_pack("{s:s, s:s, s:I}", "id", "t-0", "kind",
				      "dump", "time_ms",
				      (json_int_t)(T0 - 99999)));
	json_object_set_new(json_array_get(json_object_get(old, "workers"), 0),
			    "state", json_string("stopped"));
	json_array_insert_new(rep, 0, old);
	/* and rank 0 twice: the first report wins, counted once */
	json_array_append(
	    json_object_get(json_array_get(rep, 2), "workers"),
	    json_array_get(json_object_get(json_array_get(rep, 1), "workers"),
			   0));
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "missing-from-collective");
	assert_stuck(a, &k, 1);
	assert_int_equal(json_integer_value(json_object_get(a, "ranks_seen")),
			 4);
	json_decref(a);
	json_decref(rep);
}

/* ---- bad input: skipped, never a crash ---- */

static void test_bad_input(void **state)
{
	static const char *const cases[] = {
	    "{}",
	    "[]",
	    "[1, \"x\", null, [], {}]",
	    "[{\"workers\": 5}]",
	    "[{\"workers\": [1, null, \"r\", {}]}]",
	    "[{\"node\": 7, \"trigger\": 3, \"workers\": [{\"rank\": \"0\"}, "
	    "{\"rank\": -1}, {\"rank\": 1.5}, {\"rank\": 99999999999}]}]",
	    "[{\"node\": \"a\", \"trigger\": {\"id\": 4, \"time_ms\": \"x\"}, "
	    "\"workers\": [{\"rank\": 0, \"state\": 5, \"flight\": {}, "
	    "\"python\": 3, \"native\": [], \"notes\": \"x\", \"step\": \"1\", "
	    "\"step_age_ms\": -5, \"cpu_ms\": null}]}]",
	    "[{\"node\": \"a\", \"workers\": [{\"rank\": 0, \"flight\": [1, "
	    "null, {\"seq\": \"1\"}, {\"seq\": 0, \"state\": \"entered\"}, "
	    "{\"seq\": -3, \"state\": \"entered\"}, {\"seq\": 2, \"state\": "
	    "\"weird\"}, {\"seq\": 9223372036854775807, \"state\": "
	    "\"entered\"}, {\"seq\": 3, \"state\": \"entered\", \"t_ms\": "
	    "-9223372036854775807}]}, {\"rank\": 1, \"step\": "
	    "9223372036854775807, \"step_age_ms\": 9223372036854775807, "
	    "\"flight\": []}]}]",
	    "[{\"trigger\": {\"id\": \"a\", \"kind\": \"stall\", \"time_ms\": "
	    "-1}, \"workers\": [{\"rank\": 0, \"step\": 1, \"step_age_ms\": "
	    "1e300}, {\"rank\": 1, \"step\": -4}]}]",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *in = json_loads(cases[i], 0, NULL), *a;
		struct buf b;
		assert_non_null(in);
		a = dl_hang_analyse(in, -5);
		assert_non_null(a);
		assert_non_null(verdict_of(a));
		assert_non_null(reason_of(a));
		assert_true(json_is_array(json_object_get(a, "stuck")));
		buf_init(&b, 1 << 20);
		assert_int_equal(dl_hang_format_text(in, a, &b), 0);
		assert_true(b.len > 0);
		buf_release(&b);
		json_decref(a);
		json_decref(in);
	}
	/* no reports at all */
	{
		json_t *a = dl_hang_analyse(NULL, T0);
		struct buf b;
		assert_string_equal(verdict_of(a), "incomplete");
		assert_int_equal(
		    json_integer_value(json_object_get(a, "ranks_seen")), 0);
		buf_init(&b, 4096);
		assert_int_equal(dl_hang_format_text(NULL, NULL, &b), 0);
		buf_release(&b);
		json_decref(a);
	}
}

/* More workers than the analysis reads, and a worker with a huge flight
 * array: bounded, and still right. */
static void test_huge_arrays(void **state)
{
	json_t *ws = json_array(), *rep, *a, *big;
	int k = 5;
	(void)state;
	for (int r = 0; r < DL_HANG_MAX_RANKS + 100; r++) {
		json_t *w = json_pack("{s:i, s:s}", "rank", r, "state",
				      r == k ? "stopped" : "sleeping");
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 8, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_int_equal(json_integer_value(json_object_get(a, "ranks_seen")),
			 DL_HANG_MAX_RANKS);
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);

	big = json_array();
	for (int s = 1; s <= 20000; s++)
		json_array_append_new(big, json_pack("{s:i, s:s, s:I}", "seq",
						     s, "state", "finished",
						     "t_ms", (json_int_t)T0));
	ws = json_array();
	json_array_append_new(ws, worker(0, "sleeping"));
	json_array_append_new(ws, worker(1, "sleeping"));
	json_object_set_new(json_array_get(ws, 0), "flight", big);
	json_object_set_new(json_array_get(ws, 1), "flight",
			    flight(20000, 20001, T0 - 5000));
	rep = reports(ws, 1, "dump");
	a = dl_hang_analyse(rep, T0);
	k = 0;
	assert_string_equal(rule_of(a), "missing-from-collective");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
}

/* ---- the text version ---- */

static void test_text_folds_identical_stacks(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	struct buf b;
	const char *t;
	(void)state;
	/* ranks 0-3,5 wait in all_reduce (thread ids differ), 4 does not */
	for (int r = 0; r < 6; r++) {
		json_t *w = py_worker(r, "sleeping",
				      r == 4 ? "  File \"t.py\", line 9 in f\n"
					     : PY_WAIT);
		char native[128];
		snprintf(native, sizeof(native),
			 "PID %d - process\nTID %d:\n#0  0x00007f%04x recv\n",
			 100 + r, 100 + r, r);
		json_object_set_new(w, "native", json_string(native));
		json_object_set_new(
		    w, "notes",
		    json_pack("[s]", "python: no answer in 2000 ms"));
		json_array_append_new(ws, w);
	}
	json_object_set_new(json_array_get(ws, 0), "flight",
			    flight(3, 4, T0 - 2500));
	rep = reports(ws, 2, "progress-timeout");
	a = dl_hang_analyse(rep, T0);
	buf_init(&b, 1 << 20);
	assert_int_equal(dl_hang_format_text(rep, a, &b), 0);
	t = buf_cstr(&b);
	assert_non_null(strstr(t, "trigger t-1 (progress-timeout by n0)"));
	assert_non_null(strstr(t, "verdict: hang (rule outside-collective)"));
	assert_non_null(strstr(t, "stuck ranks: 4\n"));
	assert_non_null(strstr(t, "ranks 1-3,5: same as rank 0\n"));
	assert_non_null(strstr(t, "  rank 4:\n    python:\n"));
	assert_null(strstr(t, "  rank 1:\n"));
	assert_non_null(strstr(t, "note: python: no answer in 2000 ms"));
	assert_non_null(
	    strstr(t, "#4 all_reduce 4096 B entered, open for 2.5 s"));
	assert_non_null(strstr(t, "#3 all_reduce 4096 B finished in 1 ms"));
	/* one copy of the shared stack (rank 0's), one of rank 4's */
	{
		const char *p = t;
		int copies = 0;
		while ((p = strstr(p, "distributed_c10d.py")) != NULL) {
			copies++;
			p++;
		}
		assert_int_equal(copies, 1);
	}
	buf_release(&b);
	json_decref(a);
	json_decref(rep);
}

static void test_text_bounded(void **state)
{
	json_t *rep = sleep_case(16, 4, 3, "stall"), *a;
	struct buf b;
	(void)state;
	a = dl_hang_analyse(rep, T0);
	buf_init(&b, 300);
	assert_int_equal(dl_hang_format_text(rep, a, &b), 0);
	assert_true(b.len <= 300);
	assert_non_null(strstr(buf_cstr(&b), "...[cut]\n"));
	buf_release(&b);
	json_decref(a);
	json_decref(rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthy_dump),
	    cmocka_unit_test(test_straggler),
	    cmocka_unit_test(test_dump_stale_steps),
	    cmocka_unit_test(test_missing_nodes),
	    cmocka_unit_test(test_rank_gap_is_incomplete),
	    cmocka_unit_test(test_older_trigger_and_duplicates),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_huge_arrays),
	    cmocka_unit_test(test_text_folds_identical_stacks),
	    cmocka_unit_test(test_text_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
