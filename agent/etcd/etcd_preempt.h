/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_preempt.h - a preemption over etcd (docs/etcd.md): a node key's
 * "preempt" ({round, step, step_rate}) asks for the job's stop step; the
 * leader applies it to the state machine (rdzv_preempt) and the stop step
 * goes out in every inbox ("preempt_step").
 */
#ifndef DLAUNCH_AGENT_ETCD_PREEMPT_H
#define DLAUNCH_AGENT_ETCD_PREEMPT_H
#include <jansson.h>
#include <stdint.h>

#include "dlaunch/rdzv_state.h"

/* etcd_preempt_apply: node id (incarnation inc) of job asks for a
 * preemption with ask (its key's "preempt"; NULL: none). Idempotent: the
 * first ask of a run picks the stop step, a repeated one changes
 * nothing. A malformed ask is logged and ignored. */
void etcd_preempt_apply(struct rdzv_state *st, const char *job, const char *id,
			const char *inc, json_t *ask, uint64_t now_ms);

#endif
