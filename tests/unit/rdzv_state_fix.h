/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_state_fix.h - what the tests of the rendezvous state machine
 * share (test_rdzv_state, test_rdzv_save, test_rdzv_preempt): a job
 * config, nodes n1, n2 ... of job "job1" (incarnation "inc-ID"), and the
 * events they send, with the time given by the test.
 */
#ifndef DLAUNCH_TEST_RDZV_STATE_FIX_H
#define DLAUNCH_TEST_RDZV_STATE_FIX_H

#include <stdint.h>

#include "dlaunch/rdzv_state.h"

/* the message of the last event that failed */
extern char err[256];

/* config: a job config of min..max nodes and restarts restarts; last
 * call 1 s, heartbeat timeout 2 s, join timeout 10 s. */
struct rdzv_job_config config(uint32_t min, uint32_t max, uint32_t restarts);
/* node: node id's description (its address and port follow from id's
 * last character). */
struct rdzv_node_info node(const char *id, uint32_t nproc);
/* join, check, hb, report: node id's join, join check, heartbeat and
 * report (a failure of rank 0 when !ok) at now; the state's answer. */
int join(struct rdzv_state *st, const struct rdzv_job_config *c, const char *id,
	 uint32_t nproc, uint64_t now);
int check(struct rdzv_state *st, const char *id);
int hb(struct rdzv_state *st, const char *id, uint64_t round, uint64_t now,
       struct rdzv_reply *r);
int report(struct rdzv_state *st, const char *id, uint64_t round, int ok,
	   uint64_t now, struct rdzv_reply *r);
/* field: the integer key of node id's assignment. */
json_int_t field(const struct rdzv_state *st, const char *id, const char *key);
/* state_of: the job's state name (a static buffer). */
const char *state_of(const struct rdzv_state *st);
/* drain: forgets which jobs changed. */
void drain(struct rdzv_state *st);
/* running: a new state whose job (min, max, restarts) runs round 1 with
 * n nodes of 2 processes, formed at 1000, every member heard at 1000. */
struct rdzv_state *running(uint32_t min, uint32_t max, uint32_t restarts,
			   int n);

#endif
