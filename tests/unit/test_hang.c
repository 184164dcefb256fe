/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hang.c - unit tests of the hang analysis (common/hang*.c): every
 * rule for a stuck rank at every position, ties, the evidence a dump of a
 * healthy job needs, stragglers, missing nodes, the text version with its
 * folded stacks and its bound, and bad input of every kind.
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

#define T0 1800000000000LL /* the trigger's time (unix ms) */

/* ---- building reports ---- */

static json_t *worker(int rank, const char *state)
{
	return json_pack("{s:i, s:i, s:i, s:s, s:s, s:s, s:i, s:i, s:i, "
			 "s:n, s:n}",
			 "rank", rank, "local_rank", rank % 4, "pid",
			 1000 + rank, "state", state, "proc_state",
			 !strcmp(state, "running") ? "R" : "S", "wchan", "",
			 "cpu_ms", 2, "interval_ms", 1000, "threads", 3, "step",
			 "step_age_ms");
}

/* flight: collectives 1..finished done, then open_seq entered at open_t
 * (open_seq 0: none). */
static json_t *flight(int finished, int open_seq, int64_t open_t)
{
	json_t *a = json_array();
	for (int s = finished > 6 ? finished - 5 : 1; s <= finished; s++)
		json_array_append_new(
		    a, json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:i}", "seq",
				 s, "op", "all_reduce", "bytes", 4096, "state",
				 "finished", "t_ms",
				 (json_int_t)(T0 - 60000 + s), "done_ms",
				 (json_int_t)(T0 - 60000 + s + 1), "step", s));
	if (open_seq)
		json_array_append_new(
		    a, json_pack("{s:i, s:s, s:i, s:s, s:I, s:i}", "seq",
				 open_seq, "op", "all_reduce", "bytes", 4096,
				 "state", "entered", "t_ms", (json_int_t)open_t,
				 "step", open_seq));
	return a;
}

static void set_step(json_t *w, int step, int64_t age_ms)
{
	json_object_set_new(w, "step", json_integer(step));
	json_object_set_new(w, "step_age_ms", json_integer(age_ms));
}

static json_t *trigger(const char *kind)
{
	return json_pack("{s:s, s:s, s:s, s:I}", "id", "t-1", "kind", kind,
			 "by", "n0", "time_ms", (json_int_t)T0);
}

/* reports spreads workers (an array, rank order) over nnodes nodes
 * "n0".."nN" and takes the reference to workers. */
static json_t *reports(json_t *workers, int nnodes, const char *kind)
{
	json_t *out = json_array();
	size_t n = json_array_size(workers), per = (n + nnodes - 1) / nnodes;

	for (int node = 0; node < nnodes; node++) {
		char id[16], host[16];
		json_t *ws = json_array();
		for (size_t i = node * per; i < (node + 1) * per && i < n; i++)
			json_array_append(ws, json_array_get(workers, i));
		snprintf(id, sizeof(id), "n%d", node);
		snprintf(host, sizeof(host), "h%d", node);
		json_array_append_new(
		    out, json_pack("{s:i, s:s, s:s, s:s, s:i, s:o, s:I, s:i, "
				   "s:o}",
				   "version", 1, "job", "j", "node", id, "host",
				   host, "round", 1, "trigger", trigger(kind),
				   "time_ms", (json_int_t)(T0 + 1500), "nproc",
				   (int)json_array_size(ws), "workers", ws));
	}
	json_decref(workers);
	return out;
}

static const char *verdict_of(json_t *a)
{
	return json_string_value(json_object_get(a, "verdict"));
}

static const char *rule_of(json_t *a)
{
	return json_string_value(json_object_get(a, "rule"));
}

static const char *reason_of(json_t *a)
{
	return json_string_value(json_object_get(a, "reason"));
}

/* assert_stuck: the analysis names exactly the given ranks. */
static void assert_stuck(json_t *a, const int *ranks, size_t n)
{
	json_t *stuck = json_object_get(a, "stuck");
	assert_true(json_is_array(stuck));
	if (json_array_size(stuck) != n)
		fail_msg("stuck has %zu ranks, expected %zu (%s)",
			 json_array_size(stuck), n, reason_of(a));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(json_integer_value(json_array_get(stuck, i)),
				 ranks[i]);
}

static void assert_names_rank(json_t *a, int rank, int node)
{
	char want[64];
	snprintf(want, sizeof(want), "rank %d (node n%d)", rank, node);
	if (!strstr(reason_of(a), want))
		fail_msg("reason '%s' does not name '%s'", reason_of(a), want);
}

/* ---- rule 2: a rank sleeping before the all-reduce ---- */

/* Every rank finished #1..#S-1 and entered #S five seconds before the
 * trigger, but rank k, which finished #S-1 and sleeps. */
static json_t *sleep_case(int nranks, int nnodes, int k, const char *kind)
{
	json_t *ws = json_array();
	for (int r = 0; r < nranks; r++) {
		json_t *w = worker(r, "sleeping");
		if (r == k) {
			json_object_set_new(w, "wchan",
					    json_string("hrtimer_nanosleep"));
			json_object_set_new(w, "flight", flight(40, 0, 0));
		} else {
			json_object_set_new(w, "flight",
					    flight(40, 41, T0 - 5000));
		}
		set_step(w, 40, 5000);
		json_array_append_new(ws, w);
	}
	return reports(ws, nnodes, kind);
}

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

/* the body of a Python stack waiting in torch's all_reduce */
#define PY_WAIT                                                                \
	"  File \"/usr/lib/python3/dist-packages/torch/distributed/"           \
	"distributed_c10d.py\", line 2050 in all_reduce\n"                     \
	"  File \"/job/train.py\", line 40 in step\n"

/* py_worker: a worker whose Python stack is one thread (its id differs
 * per rank) running body. */
static json_t *py_worker(int rank, const char *state, const char *body)
{
	json_t *w = worker(rank, state);
	char text[512];
	snprintf(text, sizeof(text),
		 "Thread 0x00007f%02x12345678 (most recent call first):\n%s",
		 rank, body);
	json_object_set_new(w, "python", json_string(text));
	return w;
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

static json_t *steps_case(const int *steps, const int64_t *ages, int n,
			  const char *kind)
{
	json_t *ws = json_array();
	for (int r = 0; r < n; r++) {
		json_t *w = worker(r, "sleeping");
		set_step(w, steps[r], ages[r]);
		json_array_append_new(ws, w);
	}
	return reports(ws, 2, kind);
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
