/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_leader_int.h - the insides of the etcd leader (etcd_leader.h),
 * shared by its two files: etcd_leader.c (reading, writing, the loop)
 * and etcd_leader_nodes.c (the nodes it knows, and applying what a node
 * key says to the rendezvous rules). Private to those two.
 */
#ifndef DLAUNCH_AGENT_ETCD_LEADER_INT_H
#define DLAUNCH_AGENT_ETCD_LEADER_INT_H
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/backoff.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_keys.h"
#include "etcd_proto.h"

struct event;
struct event_base;
struct etcd_call;
struct etcd_client;
struct etcd_watch;

/* transactions in flight at once: a change of round at 4096 nodes is 35
 * of them, which one at a time took 18 s (docs/benchmarks.md); etcd
 * commits the ones that arrive together in one raft entry and one fsync,
 * so a wider window costs etcd little more than one transaction does */
#define WRITES_MAX   8
#define NODE_VAL_MAX (256 * 1024)

/* Where a leader is; the phase, not which handle is set, decides what it
 * does (etcd_leader.c):
 *
 *   READING_RECORD -record read-> READING_NODES -nodes read, watched->
 *   LIVE -node watch compacted-> READING_NODES (the writes in flight go
 *   on; none is sent until LIVE again)
 *
 * and from any of them DEPOSED (another agent leads, or a read or the
 * watch failed): deposed() was called once, nothing is written or read
 * any more, and the owner frees the leader. */
enum etcd_leader_phase {
	LEADER_READING_RECORD,
	LEADER_READING_NODES,
	LEADER_LIVE,
	LEADER_DEPOSED,
};

struct lnode {
	char id[RDZV_NAME_MAX + 1];
	char inc[RDZV_INCARNATION_MAX + 1];
	uint64_t join;	 /* the last join applied */
	uint64_t report; /* round of the last report applied, +1 */
	/* the last "recovery" applied: its round and how */
	uint64_t rec_round;
	enum rdzv_recovery rec_how;
	int live, held, queued, left;
	/* joined to the open round by the leader, from its key, when the
	 * round it ran ended (etcd_leader_prejoin): it must hear so though
	 * it waits */
	int prejoined;
	int writing; /* its inbox is in a write in flight */
	/* what its last join said (the key's fields), for a pre-join */
	int have_info;
	struct rdzv_node_info info;
	struct rdzv_job_config cfg;
	char *error;	    /* why its join was refused */
	char *gone;	    /* why its join found the job ended */
	char *inbox;	    /* what its inbox says now */
	struct lnode *next; /* hash chain */
};

/* a transaction in flight: the record (at most one such in flight), and
 * the inboxes of nodes (a node is in at most one) */
struct lwrite {
	struct etcd_leader *l;
	struct etcd_call *call;
	struct lnode **nodes;
	char **contents;
	size_t n;
	int record;
};

struct etcd_leader {
	struct event_base *base;
	struct etcd_client *c;
	enum etcd_leader_phase phase;
	char prefix[ETCD_PREFIX_MAX];
	char job[RDZV_NAME_MAX + 1];
	char self[RDZV_NAME_MAX + 1];
	int64_t leader_rev;
	void (*deposed)(void *arg);
	void *arg;
	struct rdzv_state *st;
	struct lnode **tab;
	size_t tab_size, n;
	struct lnode **queue; /* nodes whose inbox may have to change */
	size_t nqueue, queue_cap;
	int need_record;
	/* the record's change is one the inboxes reflect (a round, the
	 * job's state, its restart count or stop step): it goes before
	 * them. Any other (a join to an open round, how a node entered its
	 * round, a report while others run) waits for record_wait and
	 * holds no inbox back */
	int record_urgent;
	int have_last;
	struct rdzv_reply last;
	/* the read (the record, the node keys: READING_*) and the writes in
	 * flight: a watch compacted during a write reads the nodes again
	 * while the writes go on, and each answer clears its own handle */
	struct etcd_call *read;
	struct lwrite writes[WRITES_MAX];
	size_t nflight;	   /* writes in flight */
	int record_flight; /* one of them carries the record */
	struct etcd_watch *watch;
	struct event *timer, *retry, *record_wait;
	/* the pause before writes that failed go out again: short at
	 * first, longer while they keep failing (etcd overloaded) */
	struct backoff retry_backoff;
	int record_due;		/* record_wait fired: the record goes out */
	uint64_t ended_wall_ms; /* when the job ended (etcd_record.h) */
	/* the node of rank 0 in round master_round, the last round seen
	 * running (0: none): its workers hold that round's store, and
	 * it alone must rejoin by itself (etcd_leader_prejoin) */
	char master[RDZV_NAME_MAX + 1];
	uint64_t master_round;
	uint64_t prejoin_round; /* the open round survivors were joined to */
	/* the inbox that goes before every other (the master's, which must
	 * rejoin by itself), or NULL */
	struct lnode *first;
};

/* etcd_leader_find: the node id, or NULL */
struct lnode *etcd_leader_find(struct etcd_leader *l, const char *id);
/* etcd_leader_enqueue: n's inbox may have to change */
void etcd_leader_enqueue(struct etcd_leader *l, struct lnode *n);
/* etcd_leader_unhold: n no longer waits for the open round */
void etcd_leader_unhold(struct etcd_leader *l, struct lnode *n);
/* etcd_leader_apply_put: node id's key now says value (len bytes) */
void etcd_leader_apply_put(struct etcd_leader *l, const char *id,
			   const char *value, size_t len, uint64_t now);
/* etcd_leader_apply_delete: node id's key is gone (its lease expired) */
void etcd_leader_apply_delete(struct etcd_leader *l, const char *id,
			      uint64_t now);
/* etcd_leader_take_inbox: node id's inbox, as read at the start, says
 * value (len bytes) */
void etcd_leader_take_inbox(struct etcd_leader *l, const char *id,
			    const char *value, size_t len);
/* etcd_leader_prejoin: the round ran by master_round just ended; its
 * survivors with keys join the open one as their keys say, but for the
 * master of the round that ended while it is alive (see etcd_leader.c) */
void etcd_leader_prejoin(struct etcd_leader *l, uint64_t now);
/* etcd_leader_node_of: the node id of a key under PREFIX/nodes/ (into
 * out), or NULL */
const char *etcd_leader_node_of(struct etcd_leader *l, const struct etcd_kv *kv,
				char *out, size_t size);

#endif
