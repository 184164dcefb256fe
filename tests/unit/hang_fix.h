/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_fix.h - what the tests of the hang analysis share (test_hang,
 * test_hang_report): the reports of a job's nodes built from workers,
 * their flight records, steps and stacks, and the readers of the
 * analysis' verdict.
 */
#ifndef DLAUNCH_TEST_HANG_FIX_H
#define DLAUNCH_TEST_HANG_FIX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define T0 1800000000000LL /* the trigger's time (unix ms) */

/* the body of a Python stack waiting in torch's all_reduce */
#define PY_WAIT                                                                \
	"  File \"/usr/lib/python3/dist-packages/torch/distributed/"           \
	"distributed_c10d.py\", line 2050 in all_reduce\n"                     \
	"  File \"/job/train.py\", line 40 in step\n"

/* worker: rank's worker in state (its /proc fields plausible). */
json_t *worker(int rank, const char *state);
/* flight: collectives 1..finished done, then open_seq entered at open_t
 * (open_seq 0: none). */
json_t *flight(int finished, int open_seq, int64_t open_t);
/* set_step: the worker's training step, reported age_ms old. */
void set_step(json_t *w, int step, int64_t age_ms);
/* trigger: the trigger of kind every report carries (at T0, by n0). */
json_t *trigger(const char *kind);
/* reports spreads workers (an array, rank order) over nnodes nodes
 * "n0".."nN" and takes the reference to workers. */
json_t *reports(json_t *workers, int nnodes, const char *kind);
/* verdict_of, rule_of, reason_of: those fields of an analysis. */
const char *verdict_of(json_t *a);
const char *rule_of(json_t *a);
const char *reason_of(json_t *a);
/* assert_stuck: the analysis names exactly the given ranks. */
void assert_stuck(json_t *a, const int *ranks, size_t n);
/* assert_names_rank: the reason names rank on node n<node>. */
void assert_names_rank(json_t *a, int rank, int node);
/* Every rank finished #1..#S-1 and entered #S five seconds before the
 * trigger, but rank k, which finished #S-1 and sleeps. */
json_t *sleep_case(int nranks, int nnodes, int k, const char *kind);
/* py_worker: a worker whose Python stack is one thread (its id differs
 * per rank) running body. */
json_t *py_worker(int rank, const char *state, const char *body);
/* steps_case: n sleeping ranks on 2 nodes, rank r at step steps[r]
 * reported ages[r] old. */
json_t *steps_case(const int *steps, const int64_t *ages, int n,
		   const char *kind);

#endif
