/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_fix.c - the report builders and verdict readers of hang_fix.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_fix.h"

json_t *worker(int rank, const char *state)
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
json_t *flight(int finished, int open_seq, int64_t open_t)
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

void set_step(json_t *w, int step, int64_t age_ms)
{
	json_object_set_new(w, "step", json_integer(step));
	json_object_set_new(w, "step_age_ms", json_integer(age_ms));
}

json_t *trigger(const char *kind)
{
	return json_pack("{s:s, s:s, s:s, s:I}", "id", "t-1", "kind", kind,
			 "by", "n0", "time_ms", (json_int_t)T0);
}

/* reports spreads workers (an array, rank order) over nnodes nodes
 * "n0".."nN" and takes the reference to workers. */
json_t *reports(json_t *workers, int nnodes, const char *kind)
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

const char *verdict_of(json_t *a)
{
	return json_string_value(json_object_get(a, "verdict"));
}

const char *rule_of(json_t *a)
{
	return json_string_value(json_object_get(a, "rule"));
}

const char *reason_of(json_t *a)
{
	return json_string_value(json_object_get(a, "reason"));
}

/* assert_stuck: the analysis names exactly the given ranks. */
void assert_stuck(json_t *a, const int *ranks, size_t n)
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

void assert_names_rank(json_t *a, int rank, int node)
{
	char want[64];
	snprintf(want, sizeof(want), "rank %d (node n%d)", rank, node);
	if (!strstr(reason_of(a), want))
		fail_msg("reason '%s' does not name '%s'", reason_of(a), want);
}

/* Every rank finished #1..#S-1 and entered #S five seconds before the
 * trigger, but rank k, which finished #S-1 and sleeps. */
json_t *sleep_case(int nranks, int nnodes, int k, const char *kind)
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

/* py_worker: a worker whose Python stack is one thread (its id differs
 * per rank) running body. */
json_t *py_worker(int rank, const char *state, const char *body)
{
	json_t *w = worker(rank, state);
	char text[512];
	snprintf(text, sizeof(text),
		 "Thread 0x00007f%02x12345678 (most recent call first):\n%s",
		 rank, body);
	json_object_set_new(w, "python", json_string(text));
	return w;
}

json_t *steps_case(const int *steps, const int64_t *ages, int n,
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
