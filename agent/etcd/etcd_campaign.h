/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_campaign.h - which agent of a job leads it over etcd: the campaign
 * for the job's leader key as one table of states x events, in the style
 * of the agent's round loop (agent/fsm.c).
 *
 *   IDLE -start-> READING -key free-> CAMPAIGNING -won-> LEADING
 *                    |                     | key taken      | deposed,
 *                    | key taken           v                | lease lost
 *                    +-------------->  WATCHING             v
 *                                  key deleted: after   DEPOSED
 *                                  a delay, READING     (dropped at the
 *                                                        next turn of the
 *                                                        loop: READING)
 *
 * A read that finds the key bound to this agent's lease is won too (the
 * key outlived a leader this agent stopped running); a failed call, a
 * lost campaign with no key left to watch, or a leader that cannot start
 * waits RETRY_MS in IDLE. A node's first write campaigns as well
 * (rdzv_etcd.c's put_node, with etcd_campaign_ops): its answer is posted
 * as key free, key taken or won like a read's. leave, from any state,
 * drops everything for good (LEFT).
 *
 * Each cell is a small named function (etcd_campaign.c, read its table
 * at the bottom); an event with no cell changes nothing and is logged.
 * The campaign owns its read and its transaction apart, its watch of the
 * key and the leader it runs (etcd_leader.h); the leader and the watch
 * are never freed inside their own callbacks: deposed and a compacted
 * watch go through DEPOSED, and the deferred event frees them.
 */
#ifndef DLAUNCH_AGENT_ETCD_CAMPAIGN_H
#define DLAUNCH_AGENT_ETCD_CAMPAIGN_H
#include <stdint.h>

#include "etcd_keys.h"
#include "etcd_proto.h"

struct event;
struct event_base;
struct etcd_call;
struct etcd_client;
struct etcd_leader;
struct etcd_watch;

enum etcd_campaign_state {
	ETCD_CAMPAIGN_IDLE,	   /* nothing in flight (a retry may be due) */
	ETCD_CAMPAIGN_READING,	   /* the leader key's read in flight */
	ETCD_CAMPAIGN_CAMPAIGNING, /* the campaign transaction in flight */
	ETCD_CAMPAIGN_LEADING,	   /* this agent runs the leader */
	ETCD_CAMPAIGN_WATCHING,	   /* another agent leads: its key watched */
	ETCD_CAMPAIGN_DEPOSED,	   /* leader or watch over, dropped soon */
	ETCD_CAMPAIGN_LEFT,	   /* the agent left the job: nothing more */
	ETCD_CAMPAIGN_N_STATES
};

enum etcd_campaign_event {
	ETCD_CAMPAIGN_EV_START,		  /* campaign now (a lease is held) */
	ETCD_CAMPAIGN_EV_KEY_FREE,	  /* a read found no leader key */
	ETCD_CAMPAIGN_EV_KEY_TAKEN,	  /* another agent's key, at revision */
	ETCD_CAMPAIGN_EV_WON,		  /* the key is this agent's, created
					     at revision */
	ETCD_CAMPAIGN_EV_LOST,		  /* the campaign lost, no key left */
	ETCD_CAMPAIGN_EV_FAILED,	  /* a read or campaign call failed */
	ETCD_CAMPAIGN_EV_KEY_DELETED,	  /* the watched key was deleted */
	ETCD_CAMPAIGN_EV_KEY_WRITTEN,	  /* the watched key was written */
	ETCD_CAMPAIGN_EV_WATCH_COMPACTED, /* the watch broke (or failed) */
	ETCD_CAMPAIGN_EV_RETRY,		  /* the retry timer fired */
	ETCD_CAMPAIGN_EV_DEPOSED,	  /* the leader says another leads */
	ETCD_CAMPAIGN_EV_RESUME,	  /* the deferred event: back on the
					     loop, outside every callback */
	ETCD_CAMPAIGN_EV_LEASE_LOST,	  /* this agent's lease expired */
	ETCD_CAMPAIGN_EV_LEAVE,		  /* the agent leaves the job */
	ETCD_CAMPAIGN_N_EVENTS
};

/* What a campaign is made from; borrowed, outliving it. */
struct etcd_campaign_params {
	struct event_base *base;
	struct etcd_client *c;
	const char *prefix; /* key_prefix/job (etcd_job_prefix) */
	const char *job, *node_id, *incarnation;
	uint64_t rerun_after_ms; /* the leader's (etcd_leader_new) */
	/* this agent's lease (0: none yet), read at each campaign */
	const int64_t *lease_id;
	/* this node's rank in the round it runs, -1 when it has none: a
	 * follower campaigns after a delay in rank order */
	int64_t (*node_rank)(void *arg);
	void *arg;
};

/* One campaign, embedded in the etcd backend's struct rdzv_etcd. */
struct etcd_campaign {
	enum etcd_campaign_state state;
	struct etcd_campaign_params p;
	struct etcd_call *read; /* the leader key's read */
	struct etcd_call *txn;	/* the campaign transaction */
	struct etcd_watch *watch;
	struct etcd_leader *leader;
	struct event *defer; /* posts RESUME from the loop */
	struct event *retry; /* posts RETRY */
};

/* etcd_campaign_init: IDLE; 0, or DL_ENOMEM (then release it) */
int etcd_campaign_init(struct etcd_campaign *c,
		       const struct etcd_campaign_params *p);
/* etcd_campaign_release cancels its calls, ends its watch, frees its
 * leader and its events; before the client is freed */
void etcd_campaign_release(struct etcd_campaign *c);

/* etcd_campaign_post hands an event to the table; revision is KEY_TAKEN's
 * (the read's, the watch follows from the next) and WON's (the key's
 * create revision), else 0 */
void etcd_campaign_post(struct etcd_campaign *c, enum etcd_campaign_event ev,
			int64_t revision);
/* etcd_campaign_seen posts what a read of the leader key at revision
 * says (kv NULL: there is none): key free, won (bound to this agent's
 * lease) or key taken */
void etcd_campaign_seen(struct etcd_campaign *c, const struct etcd_kv *kv,
			int64_t revision);
/* etcd_campaign_busy: a read, a campaign or a leader is in hand (a
 * node's first write then does not campaign too) */
int etcd_campaign_busy(const struct etcd_campaign *c);

/* etcd_campaign_ops: the campaign, built once for the two transactions
 * that carry it (a node's first write, a campaign alone): cmp, the leader
 * key k does not exist; put, k := val bound to the lease (k and val are
 * not copied) */
void etcd_campaign_ops(const struct etcd_campaign *c, const char *k,
		       const char *val, struct etcd_compare *cmp,
		       struct etcd_op *put);
/* etcd_campaign_value: what this agent's leader key says (malloc'd; NULL
 * when out of memory) */
char *etcd_campaign_value(const struct etcd_campaign *c);

const char *etcd_campaign_state_name(enum etcd_campaign_state s);
const char *etcd_campaign_event_name(enum etcd_campaign_event e);

#endif
