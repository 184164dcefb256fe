/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hang.c - unit tests of the hang analysis (common/hang*.c), its
 * rules: every rule for a stuck rank at every position (a rank sleeping
 * before the all-reduce, a stopped, zombie or gone worker, an infinite
 * loop seen by flight records, Python or native stacks), rule 3's limit,
 * rule 4 and ties. What is not a hang, incomplete or bad input and the
 * text version are test_hang_report's.
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

/* ---- rule 2: a rank sleeping before the all-reduce ---- */

static void test_sleep_before_allreduce_every_position(void **state)
{
	(void)state;
	for (int nranks = 2; nranks <= 16; nranks *= 2) {
		int nnodes = nranks >= 4 ? 4 : 2;
		int per = nranks / nnodes;
		for (int k = 0; k < nranks; k++) {
			json_t *rep =
			    sleep_case(nranks, nnodes, k, "progress-timeout");
			json_t *a = dl_hang_analyse(rep, T0 + 2000);
			assert_non_null(a);
			assert_string_equal(verdict_of(a), "hang");
			assert_string_equal(rule_of(a),
					    "missing-from-collective");
			assert_stuck(a, &k, 1);
			assert_names_rank(a, k, k / per);
			assert_non_null(strstr(reason_of(a), "#41"));
			assert_int_equal(
			    json_integer_value(json_object_get(
				json_object_get(a, "collective"), "seq")),
			    41);
			assert_int_equal(json_integer_value(
					     json_object_get(a, "ranks_seen")),
					 nranks);
			json_decref(a);
			json_decref(rep);
		}
	}
}

/* A dump (not a detector's trigger) of the same hang: the 5 s wait in #41
 * is the evidence. */
static void test_dump_of_hung_job(void **state)
{
	int k = 2;
	json_t *rep = sleep_case(4, 2, k, "dump");
	json_t *a = dl_hang_analyse(rep, T0);
	(void)state;
	assert_string_equal(verdict_of(a), "hang");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
}

/* ---- rule 1: a stopped, zombie or gone worker ---- */

static void test_sigstop_every_position(void **state)
{
	(void)state;
	for (int k = 0; k < 8; k++) {
		json_t *ws = json_array(), *rep, *a;
		for (int r = 0; r < 8; r++) {
			json_t *w = worker(r, r == k ? "stopped" : "sleeping");
			/* stopped inside the collective like the others */
			json_object_set_new(w, "flight",
					    flight(9, 10, T0 - 4000));
			json_array_append_new(ws, w);
		}
		rep = reports(ws, 4, "progress-timeout");
		a = dl_hang_analyse(rep, T0);
		assert_string_equal(verdict_of(a), "hang");
		assert_string_equal(rule_of(a), "stopped-process");
		assert_stuck(a, &k, 1);
		assert_names_rank(a, k, k / 2);
		assert_non_null(strstr(reason_of(a), "SIGSTOP"));
		json_decref(a);
		json_decref(rep);
	}
}

static void test_zombie_and_gone(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	int want[] = {1, 3};
	(void)state;
	for (int r = 0; r < 4; r++)
		json_array_append_new(ws, worker(r, r == 1   ? "zombie"
						    : r == 3 ? "gone"
							     : "sleeping"));
	rep = reports(ws, 2, "dump");
	a = dl_hang_analyse(rep, T0);
	/* no evidence of a stall needed: these never come back */
	assert_string_equal(verdict_of(a), "hang");
	assert_string_equal(rule_of(a), "stopped-process");
	assert_stuck(a, want, 2);
	assert_non_null(strstr(reason_of(a), "ranks 1 (node n0), 3 (node n1)"));
	json_decref(a);
	json_decref(rep);
}

/* A zombie leader whose other threads run on (pthread_exit in main):
 * still a stuck rank, but not one that exited. */
static void test_zombie_leader_threads_run_on(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	int want = 1;
	(void)state;
	for (int r = 0; r < 2; r++) {
		json_t *w = worker(r, r == 1 ? "zombie" : "sleeping");
		if (r == 1)
			json_object_set_new(w, "threads", json_integer(2));
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 1, "progress-timeout");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "stopped-process");
	assert_stuck(a, &want, 1);
	assert_non_null(strstr(reason_of(a), "main thread exited"));
	assert_null(strstr(reason_of(a), "was not reaped"));
	json_decref(a);
	json_decref(rep);
}

/* ---- an infinite loop: by flight records, by Python, by native ---- */

static void test_infinite_loop_flight(void **state)
{
	(void)state;
	for (int k = 0; k < 4; k++) {
		json_t *ws = json_array(), *rep, *a;
		for (int r = 0; r < 4; r++) {
			json_t *w = worker(r, r == k ? "running" : "sleeping");
			if (r == k) {
				json_object_set_new(w, "cpu_ms",
						    json_integer(998));
				json_object_set_new(w, "flight",
						    flight(12, 0, 0));
			} else {
				json_object_set_new(w, "flight",
						    flight(12, 13, T0 - 3000));
			}
			json_array_append_new(ws, w);
		}
		rep = reports(ws, 2, "stall");
		a = dl_hang_analyse(rep, T0);
		assert_string_equal(rule_of(a), "missing-from-collective");
		assert_stuck(a, &k, 1);
		json_decref(a);
		json_decref(rep);
	}
}

static void test_infinite_loop_python(void **state)
{
	const char *spin = "  File \"/job/train.py\", line 12 in spin\n";
	(void)state;
	for (int k = 0; k < 4; k++) {
		json_t *ws = json_array(), *rep, *a;
		for (int r = 0; r < 4; r++)
			json_array_append_new(
			    ws, r == k ? py_worker(r, "running", spin)
				       : py_worker(r, "sleeping", PY_WAIT));
		json_object_set_new(json_array_get(ws, k), "cpu_ms",
				    json_integer(1000));
		rep = reports(ws, 2, "progress-timeout");
		a = dl_hang_analyse(rep, T0);
		assert_string_equal(verdict_of(a), "hang");
		assert_string_equal(rule_of(a), "outside-collective");
		assert_stuck(a, &k, 1);
		assert_names_rank(a, k, k / 2);
		assert_non_null(strstr(reason_of(a), "running, 1000 ms CPU"));
		json_decref(a);
		json_decref(rep);
	}
}

static void test_blocked_read_python(void **state)
{
	const char *readp = "  File \"/job/train.py\", line 7 in load\n";
	int k = 3;
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	for (int r = 0; r < 4; r++)
		json_array_append_new(
		    ws, r == k ? py_worker(r, "sleeping", readp)
			       : py_worker(r, "sleeping", PY_WAIT));
	json_object_set_new(json_array_get(ws, k), "wchan",
			    json_string("pipe_read"));
	rep = reports(ws, 2, "progress-timeout");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "outside-collective");
	assert_stuck(a, &k, 1);
	assert_non_null(strstr(reason_of(a), "sleeping in pipe_read"));
	json_decref(a);
	json_decref(rep);
}

static void test_native_only(void **state)
{
	int k = 1;
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	for (int r = 0; r < 3; r++) {
		json_t *w = worker(r, "sleeping");
		json_object_set_new(
		    w, "native",
		    json_string(r == k ? "TID 77:\n#0  0x00007f01 read - libc\n"
				       : "TID 78:\n#0  0x00007f02 recv - libc\n"
					 "#1  0x0000aa dist_all_reduce - "
					 "dlaunch-train\n"));
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 1, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "outside-collective");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
}

/* A rank without flight records (another program) is judged by the next
 * rules: here its Python stack is outside torch's collectives. */
static void test_rank_without_flight(void **state)
{
	int k = 3;
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	for (int r = 0; r < 4; r++) {
		json_t *w = worker(r, "sleeping");
		if (r == k)
			json_object_set_new(
			    w, "python",
			    json_string("  File \"x.py\", line 3 in f\n"));
		else
			json_object_set_new(w, "flight",
					    flight(5, 6, T0 - 4000));
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 2, "dump");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "hang");
	assert_string_equal(rule_of(a), "outside-collective");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);
}

/* ---- rule 3's limit, rule 4 and ties ---- */

static void test_outside_needs_a_minority(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	int want[] = {1, 4};
	(void)state;
	/* two of four outside: not named by rule 3 (no steps: no rule 4) */
	for (int r = 0; r < 4; r++)
		json_array_append_new(
		    ws, py_worker(r, "sleeping",
				  r % 2 ? "  File \"a.py\", line 1 in f\n"
					: PY_WAIT));
	rep = reports(ws, 2, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "hang");
	assert_string_equal(rule_of(a), "none");
	assert_stuck(a, NULL, 0);
	json_decref(a);
	json_decref(rep);
	/* two of five outside: named */
	ws = json_array();
	for (int r = 0; r < 5; r++)
		json_array_append_new(
		    ws, py_worker(r, "sleeping",
				  r == 1 || r == 4
				      ? "  File \"a.py\", line 1 in f\n"
				      : PY_WAIT));
	rep = reports(ws, 1, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "outside-collective");
	assert_stuck(a, want, 2);
	assert_non_null(strstr(reason_of(a), "ranks 1,4 (node n0)"));
	json_decref(a);
	json_decref(rep);
}

static void test_first_stopped_lowest_step(void **state)
{
	int steps[] = {30, 30, 29, 30};
	int64_t ages[] = {20000, 20000, 20100, 20000};
	int k = 2;
	json_t *rep = steps_case(steps, ages, 4, "stall");
	json_t *a = dl_hang_analyse(rep, T0);
	(void)state;
	assert_string_equal(rule_of(a), "first-stopped");
	assert_stuck(a, &k, 1);
	assert_names_rank(a, 2, 1);
	json_decref(a);
	json_decref(rep);
}

static void test_first_stopped_by_age_and_ties(void **state)
{
	int steps[] = {30, 30, 30, 30};
	int64_t gap[] = {9000, 9100, 9050, 14000};
	int64_t tie[] = {9000, 9100, 9050, 9400};
	int64_t two[] = {14000, 9100, 9050, 14500};
	int k = 3, both[] = {0, 3};
	json_t *rep, *a;
	(void)state;

	rep = steps_case(steps, gap, 4, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "first-stopped");
	assert_stuck(a, &k, 1);
	json_decref(a);
	json_decref(rep);

	/* no gap of a second: a tie, nobody is named */
	rep = steps_case(steps, tie, 4, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "hang");
	assert_string_equal(rule_of(a), "none");
	assert_stuck(a, NULL, 0);
	json_decref(a);
	json_decref(rep);

	/* two ranks stopped together, clearly before the rest */
	rep = steps_case(steps, two, 4, "stall");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(rule_of(a), "first-stopped");
	assert_stuck(a, both, 2);
	json_decref(a);
	json_decref(rep);
}

/* Every rank inside the same collective, none missing: a hang no rank is
 * to blame for; the reason says so. */
static void test_all_inside(void **state)
{
	json_t *ws = json_array(), *rep, *a;
	(void)state;
	for (int r = 0; r < 4; r++) {
		json_t *w = worker(r, "sleeping");
		json_object_set_new(w, "flight", flight(7, 8, T0 - 9000));
		json_array_append_new(ws, w);
	}
	rep = reports(ws, 2, "dump");
	a = dl_hang_analyse(rep, T0);
	assert_string_equal(verdict_of(a), "hang");
	assert_string_equal(rule_of(a), "none");
	assert_non_null(
	    strstr(reason_of(a), "every rank inside collective #8"));
	json_decref(a);
	json_decref(rep);
}

/* A rank that took another branch: every rank entered #41, rank k as a
 * broadcast, the others as an all-reduce. Two against two: no majority,
 * nobody named. */
static void test_other_branch(void **state)
{
	(void)state;
	for (int k = 0; k < 4; k++) {
		json_t *ws = json_array(), *rep, *a;
		for (int r = 0; r < 4; r++) {
			json_t *w = worker(r, "sleeping"), *f;
			f = flight(40, 41, T0 - 5000);
			if (r == k)
				json_object_set_new(
				    json_array_get(f, json_array_size(f) - 1),
				    "op", json_string("broadcast"));
			json_object_set_new(w, "flight", f);
			json_array_append_new(ws, w);
		}
		rep = reports(ws, 2, "stall");
		a = dl_hang_analyse(rep, T0);
		assert_string_equal(rule_of(a), "missing-from-collective");
		assert_stuck(a, &k, 1);
		assert_names_rank(a, k, k / 2);
		assert_non_null(strstr(reason_of(a), "another branch"));
		json_decref(a);
		json_decref(rep);
	}
	{
		json_t *ws = json_array(), *rep, *a;
		for (int r = 0; r < 4; r++) {
			json_t *w = worker(r, "sleeping"), *f;
			f = flight(40, 41, T0 - 5000);
			if (r % 2)
				json_object_set_new(
				    json_array_get(f, json_array_size(f) - 1),
				    "op", json_string("broadcast"));
			json_object_set_new(w, "flight", f);
			json_array_append_new(ws, w);
		}
		rep = reports(ws, 2, "stall");
		a = dl_hang_analyse(rep, T0);
		assert_string_equal(rule_of(a), "none");
		assert_stuck(a, NULL, 0);
		json_decref(a);
		json_decref(rep);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sleep_before_allreduce_every_position),
	    cmocka_unit_test(test_dump_of_hung_job),
	    cmocka_unit_test(test_sigstop_every_position),
	    cmocka_unit_test(test_zombie_and_gone),
	    cmocka_unit_test(test_zombie_leader_threads_run_on),
	    cmocka_unit_test(test_infinite_loop_flight),
	    cmocka_unit_test(test_infinite_loop_python),
	    cmocka_unit_test(test_blocked_read_python),
	    cmocka_unit_test(test_native_only),
	    cmocka_unit_test(test_rank_without_flight),
	    cmocka_unit_test(test_outside_needs_a_minority),
	    cmocka_unit_test(test_first_stopped_lowest_step),
	    cmocka_unit_test(test_first_stopped_by_age_and_ties),
	    cmocka_unit_test(test_all_inside),
	    cmocka_unit_test(test_other_branch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
