/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_preempt.c - the leader's side of a preemption over etcd: a node
 * key's "preempt" fed to the state machine, fenced as its heartbeat
 * would be (a member of the running round, its incarnation). What the
 * state machine decides reaches the nodes with the leader's next writes:
 * the job record keeps the stop step, each inbox carries it.
 */
#include "etcd_preempt.h"

#include <stdio.h>

#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"

void etcd_preempt_apply(struct rdzv_state *st, const char *job, const char *id,
			const char *inc, json_t *ask, uint64_t now_ms)
{
	struct rdzv_reply reply;
	uint64_t round = 0, step = 0;
	json_t *rate;
	char err[512];
	if (!ask)
		return;
	rate = json_object_get(ask, "step_rate");
	if (!json_is_object(ask) ||
	    jsonh_get_u64(ask, "round", 1, 1, UINT64_MAX / 2, &round, err,
			  sizeof(err)) ||
	    jsonh_get_u64(ask, "step", 1, 0, UINT64_MAX / 4, &step, err,
			  sizeof(err)) ||
	    (rate && !json_is_number(rate))) {
		log_warn("etcd leader: ignoring the malformed preemption of "
			 "node %s",
			 id);
		return;
	}
	if (rdzv_preempt(st, job, id, inc, round, step,
			 rate ? json_number_value(rate) : 0, now_ms, &reply,
			 err, sizeof(err)) < 0)
		log_info("etcd leader: preemption of node %s not applied: %s",
			 id, err);
}
