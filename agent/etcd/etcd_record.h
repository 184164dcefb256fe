/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_record.h - when the job in an etcd job record ended (docs/etcd.md,
 * "Ended jobs").
 *
 * The state machine counts the wait before a rerun (rerun_after_ms) on
 * the monotonic clock of the host it runs in, and a restore starts it
 * again. Over etcd the leader that sees a job end is gone long before a
 * rerun comes: the node that joins then leads, restores the record, and
 * must know how long ago the run ended. The record therefore carries
 * "ended_unix_ms", the wall time the job ended at (as the leader that
 * wrote it first saw it), and the leader that restores it counts from
 * there; hosts' clocks are taken to agree to well under the wait.
 */
#ifndef DLAUNCH_AGENT_ETCD_RECORD_H
#define DLAUNCH_AGENT_ETCD_RECORD_H
#include <jansson.h>
#include <stdint.h>

#include "dlaunch/rdzv_state.h"

/* etcd_record_stamp: saved (rdzv_job_save's, modified) gets
 * "ended_unix_ms" when its job has ended: *ended_wall_ms, set to now when
 * 0; a job that has not ended clears *ended_wall_ms (a new run). */
void etcd_record_stamp(json_t *saved, uint64_t *ended_wall_ms);

/* etcd_record_restored: saved was just restored into st (rdzv_job_restore
 * with now_ms): an ended job's end is set back to when it ended, and
 * *ended_wall_ms to it. A record without the time (written before it was
 * kept) counts as ended long ago. */
void etcd_record_restored(struct rdzv_state *st, const char *job, json_t *saved,
			  uint64_t now_ms, uint64_t *ended_wall_ms);

#endif
