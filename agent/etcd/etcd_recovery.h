/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_recovery.h - how a node's workers entered a round, as its node key
 * says it to the leader of a job over etcd (docs/etcd.md).
 *
 * After an in-place re-form or a restart the node writes its key once
 * more with "recovery": {"round": R, "how": "in_place"|"restarted",
 * "why": TEXT}; the leader reads it back and hands it to the state
 * machine (rdzv_member_recovery), which keeps it on the member and in the
 * job record. dlaunch-rdzv hears the same with heartbeats.
 */
#ifndef DLAUNCH_AGENT_ETCD_RECOVERY_H
#define DLAUNCH_AGENT_ETCD_RECOVERY_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/rdzv_state.h"

/* etcd_recovery_json: the node key's "recovery" for round (a new
 * reference), or NULL where how is worth no write (nothing said yet, or
 * "started": a node's first round is told by its join) or out of
 * memory. why is cut at RDZV_RECOVERY_WHY_MAX bytes. */
json_t *etcd_recovery_json(uint64_t round, const char *how, const char *why);

/* etcd_recovery_parse reads node value v's optional "recovery" (v
 * borrowed; *why points into it). 0 with *how RDZV_RECOVERY_NONE where
 * there is none; DL_EINVAL with a message where it is malformed (not an
 * object, no round, an unknown how, a why too long or with a control
 * character). */
int etcd_recovery_parse(json_t *v, uint64_t *round, enum rdzv_recovery *how,
			const char **why, char *err, size_t err_size);

/* etcd_recovery_delay_ms: the pause before a node of a round of nnodes
 * writes its recovery: nnodes x ETCD_RECOVERY_MS_PER_NODE plus draw (a
 * random number) modulo as much, so that the nodes of a round that just
 * formed spread their writes over as many milliseconds, after the round's
 * assignments (which the leader writes 120 to a transaction) are out:
 * 4096 nodes, 4 to 8 s; 8 nodes, 8 to 16 ms. */
#define ETCD_RECOVERY_MS_PER_NODE 1
uint64_t etcd_recovery_delay_ms(int nnodes, uint64_t draw);

#endif
