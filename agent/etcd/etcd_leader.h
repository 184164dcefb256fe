/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_leader.h - the agent that leads a job over etcd (docs/etcd.md).
 *
 * One agent of the job holds the leader key; it alone runs the
 * rendezvous rules (rendezvous/'s state machine, librdzv_state.a) on
 * what the nodes write to their own keys, and writes what follows (the
 * job record and each node's inbox) in transactions that hold only while
 * its leader key is the one it created. When a write finds the key
 * changed, the leader was deposed: it says so through deposed() and
 * writes nothing more.
 */
#ifndef DLAUNCH_AGENT_ETCD_LEADER_H
#define DLAUNCH_AGENT_ETCD_LEADER_H
#include <stdint.h>

struct event_base;
struct etcd_client;
struct etcd_leader;

/* The keys of a job, all under one prefix: etcd_keys.h */
#include "etcd_keys.h"

/* etcd_leader_new starts leading job under prefix with the leader key
 * created at revision leader_rev; self is this agent's node id (its own
 * inbox is written last, so that it never ends before the others are
 * told); a join rerun_after_ms after the job ended starts a new run of
 * it (0: never). NULL when out of memory. */
struct etcd_leader *etcd_leader_new(struct event_base *base,
				    struct etcd_client *c, const char *prefix,
				    const char *job, const char *self,
				    int64_t leader_rev, uint64_t rerun_after_ms,
				    void (*deposed)(void *arg), void *arg);
void etcd_leader_free(struct etcd_leader *l); /* NULL is allowed */

#endif
