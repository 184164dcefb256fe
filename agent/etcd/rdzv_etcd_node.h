/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_etcd_node.h - the etcd backend's state of one node, shared by
 * rdzv_etcd.c (the inbox, the lease, the interface of ../rdzv/rdzv.h),
 * rdzv_etcd_nodekey.c (the node key) and etcd_hang.c (hang diagnosis). The
 * campaign for the leader key is a table of its own (etcd_campaign.h), embedded
 * here. Private to agent/etcd/.
 */
#ifndef DLAUNCH_AGENT_RDZV_ETCD_NODE_H
#define DLAUNCH_AGENT_RDZV_ETCD_NODE_H
#include <jansson.h>
#include <stdint.h>

#include "dlaunch/agent.h"
#include "etcd_campaign.h"
#include "etcd_keys.h"
#include "etcd_proto.h"
#include "../rdzv/rdzv.h"

struct event;
struct event_base;
struct etcd_client;
struct etcd_call;
struct etcd_lease;
struct etcd_watch;
struct etcd_hang;

/* the job prefix's size (etcd_keys.h); the name etcd_hang.c uses */
#define PREFIX_MAX ETCD_PREFIX_MAX

struct rdzv_etcd {
	struct agent_rdzv base;
	struct event_base *evb;
	const struct agent_config *cfg;
	const char *node_id, *incarnation;
	char prefix[ETCD_PREFIX_MAX]; /* key_prefix/job */
	char addr[256];
	unsigned master_port;
	struct etcd_client *c;
	struct etcd_lease *lease;
	int64_t lease_id;
	/* the node key */
	uint64_t join_seq;
	int joining, leaving;
	json_t *report; /* {round, status, failures} */
	uint64_t report_round;
	int report_owed; /* REPORT_DONE follows the next put */
	/* {round, how, why}: how the workers entered the round, after an
	 * in-place re-form or a restart (etcd_recovery.h) */
	json_t *recovery;
	/* it is written after a pause (write_recovery in rdzv_etcd.c),
	 * unless another write of the key carried it first */
	struct event *recovery_wait;
	int recovery_owed;
	/* {round, step, step_rate}: this node asks for a preemption
	 * (etcd_preempt.c applies it on the leader) */
	json_t *preempt;
	struct etcd_call *put;
	int put_again, put_has_report;
	int put_reads; /* the put in flight also reads inbox and leader */
	/* the inbox */
	json_t *inbox;
	struct etcd_call *inbox_read;
	struct etcd_watch *inbox_watch;
	/* the node key, watched: another agent that writes it with another
	 * incarnation took this node's id, and this agent stops */
	struct etcd_watch *node_watch;
	struct etcd_call *node_read;
	int displaced;
	/* the run of the job this node took part in (0: none yet): a
	 * node of a run that ended never starts the next one */
	uint64_t run;
	/* the round the workers run */
	uint64_t round;
	int in_round;
	/* the leader key: campaigning, leading, watching (etcd_campaign.h) */
	struct etcd_campaign camp;
	struct etcd_call *status_call, *leave_call;
	struct etcd_hang *hang; /* etcd_hang.c */
};

/* rdzv_etcd_key: PREFIX/JOB/ + what + id (id NULL: none) into out */
void rdzv_etcd_key(struct rdzv_etcd *h, char *out, size_t size,
		   const char *what, const char *id);
/* rdzv_etcd_post_kind posts an event of kind k about round to the
 * agent's round loop */
void rdzv_etcd_post_kind(struct rdzv_etcd *h, enum agent_event_kind k,
			 uint64_t round);

/* rdzv_etcd.c: the inbox. take_inbox: its value (len bytes), when it is
 * this agent's, taken and acted on; read_inbox: read it, then watch it
 * from there; watch_inbox: watch it from revision from */
void rdzv_etcd_take_inbox(struct rdzv_etcd *h, const char *value, size_t len);
void rdzv_etcd_read_inbox(struct rdzv_etcd *h);
void rdzv_etcd_watch_inbox(struct rdzv_etcd *h, int64_t from);

/* rdzv_etcd_nodekey.c: the node key. node_value: what it says now (a new
 * reference; NULL when out of memory); put_node: write it (again, once
 * the write in flight is answered) */
json_t *rdzv_etcd_node_value(struct rdzv_etcd *h);
void rdzv_etcd_put_node(struct rdzv_etcd *h);

/* etcd_hang.c: hang diagnosis (rdzv.h's hang_* ops); etcd_hang_round
 * starts the watch of the trigger key (once); etcd_hang_free after the
 * client is freed */
int etcd_hang_new(struct rdzv_etcd *h);
void etcd_hang_free(struct rdzv_etcd *h);
void etcd_hang_round(struct rdzv_etcd *h);
void etcd_hang_open(struct agent_rdzv *r, const char *kind);
void etcd_hang_post(struct agent_rdzv *r, json_t *report);
void etcd_hang_fetch(struct agent_rdzv *r, const char *id);
void etcd_hang_cancel(struct agent_rdzv *r);
void etcd_hang_keep(struct agent_rdzv *r, json_t *summary);

#endif
