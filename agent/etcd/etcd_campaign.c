/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_campaign.c - which agent of a job leads it over etcd: the
 * campaign for the job's leader key, the watch of the key by the agents
 * that do not lead, and the takeover when it goes (docs/etcd.md), as the
 * table of states x events that etcd_campaign.h draws.
 *
 * The calls' answers and the watch's events are turned into events here
 * (on_read, on_txn, on_key) and the table decides; the cells are at the
 * bottom of the file, in one table, which is the documentation of how a
 * campaign behaves.
 */
#include "etcd_campaign.h"

#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_leader.h"

/* the pause before a campaign that failed is tried again */
#define RETRY_MS 1000

typedef void (*cell_fn)(struct etcd_campaign *c, int64_t revision);

static const char *const state_names[ETCD_CAMPAIGN_N_STATES] = {
    [ETCD_CAMPAIGN_IDLE] = "IDLE",
    [ETCD_CAMPAIGN_READING] = "READING",
    [ETCD_CAMPAIGN_CAMPAIGNING] = "CAMPAIGNING",
    [ETCD_CAMPAIGN_LEADING] = "LEADING",
    [ETCD_CAMPAIGN_WATCHING] = "WATCHING",
    [ETCD_CAMPAIGN_DEPOSED] = "DEPOSED",
    [ETCD_CAMPAIGN_LEFT] = "LEFT",
};

static const char *const event_names[ETCD_CAMPAIGN_N_EVENTS] = {
    [ETCD_CAMPAIGN_EV_START] = "start",
    [ETCD_CAMPAIGN_EV_KEY_FREE] = "key_free",
    [ETCD_CAMPAIGN_EV_KEY_TAKEN] = "key_taken",
    [ETCD_CAMPAIGN_EV_WON] = "won",
    [ETCD_CAMPAIGN_EV_LOST] = "lost",
    [ETCD_CAMPAIGN_EV_FAILED] = "failed",
    [ETCD_CAMPAIGN_EV_KEY_DELETED] = "key_deleted",
    [ETCD_CAMPAIGN_EV_KEY_WRITTEN] = "key_written",
    [ETCD_CAMPAIGN_EV_WATCH_COMPACTED] = "watch_compacted",
    [ETCD_CAMPAIGN_EV_RETRY] = "retry",
    [ETCD_CAMPAIGN_EV_DEPOSED] = "deposed",
    [ETCD_CAMPAIGN_EV_RESUME] = "resume",
    [ETCD_CAMPAIGN_EV_LEASE_LOST] = "lease_lost",
    [ETCD_CAMPAIGN_EV_LEAVE] = "leave",
};

const char *etcd_campaign_state_name(enum etcd_campaign_state s)
{
	return (unsigned)s < ETCD_CAMPAIGN_N_STATES ? state_names[s] : "?";
}

const char *etcd_campaign_event_name(enum etcd_campaign_event e)
{
	return (unsigned)e < ETCD_CAMPAIGN_N_EVENTS ? event_names[e] : "?";
}

static void enter(struct etcd_campaign *c, enum etcd_campaign_state s)
{
	log_debug("etcd campaign: %s -> %s", state_names[c->state],
		  state_names[s]);
	c->state = s;
}

/* ------------------------------------------------------------ answers */

static void leader_key(const struct etcd_campaign *c, char *out, size_t size)
{
	etcd_key(out, size, c->p.prefix, ETCD_KEY_LEADER, NULL);
}

void etcd_campaign_seen(struct etcd_campaign *c, const struct etcd_kv *kv,
			int64_t revision)
{
	if (!kv)
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_KEY_FREE, 0);
	else if (kv->lease == *c->p.lease_id)
		/* still this agent's, bound to its lease: after it stopped
		 * leading for a failure of its own */
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_WON,
				   kv->create_revision);
	else
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_KEY_TAKEN, revision);
}

/* on_read: a leader key there is watched (or led, when it is still this
 * agent's); none is campaigned for. Reading first spares etcd a write
 * per joining agent when a leader exists, as it mostly does. */
static void on_read(void *arg, const struct etcd_answer *a)
{
	struct etcd_campaign *c = arg;
	struct etcd_range_response r;
	char err[1024];
	c->read = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_warn("etcd: reading the leader key failed: %s", err);
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_FAILED, 0);
		return;
	}
	etcd_campaign_seen(c, r.n_kvs == 1 ? &r.kvs[0] : NULL,
			   r.header.revision);
	etcd_range_response_release(&r);
}

static void on_txn(void *arg, const struct etcd_answer *a)
{
	struct etcd_campaign *c = arg;
	struct etcd_txn_response t;
	const struct etcd_kv *kv;
	char err[1024];
	c->txn = NULL;
	if (etcd_answer_txn(a, &t, err, sizeof(err)) != 0) {
		log_warn("etcd: campaign for the leader key failed: %s", err);
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_FAILED, 0);
		return;
	}
	kv = t.n_responses == 1 && t.responses[0].range.n_kvs == 1
		 ? &t.responses[0].range.kvs[0]
		 : NULL;
	if (t.succeeded)
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_WON, t.header.revision);
	else if (kv)
		etcd_campaign_seen(c, kv, t.header.revision);
	else /* another agent won and its key is already gone */
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_LOST, 0);
	etcd_txn_response_release(&t);
}

static void on_key(void *arg, enum etcd_watch_what what,
		   const struct etcd_watch_response *w, const char *error)
{
	struct etcd_campaign *c = arg;
	int gone = -1; /* the last event: 1 deleted, 0 written */
	if (what != ETCD_WATCH_EVENTS) {
		if (what == ETCD_WATCH_FAILED)
			log_warn("etcd: watching the leader key failed: %s",
				 error);
		etcd_campaign_post(c, ETCD_CAMPAIGN_EV_WATCH_COMPACTED, 0);
		return;
	}
	for (size_t i = 0; i < w->n_events; i++)
		gone = w->events[i].type == ETCD_EVENT_DELETE;
	if (gone >= 0)
		etcd_campaign_post(c,
				   gone ? ETCD_CAMPAIGN_EV_KEY_DELETED
					: ETCD_CAMPAIGN_EV_KEY_WRITTEN,
				   0);
}

static void on_deposed(void *arg)
{
	/* from inside the leader's own callbacks: DEPOSED frees it later */
	etcd_campaign_post(arg, ETCD_CAMPAIGN_EV_DEPOSED, 0);
}

static void on_defer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	etcd_campaign_post(arg, ETCD_CAMPAIGN_EV_RESUME, 0);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	etcd_campaign_post(arg, ETCD_CAMPAIGN_EV_RETRY, 0);
}

/* -------------------------------------------------------------- steps */

static void retry_in(struct etcd_campaign *c, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(c->retry, &tv);
}

/* retry_later: back to IDLE, the campaign tried again in RETRY_MS */
static void retry_later(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	retry_in(c, RETRY_MS);
	enter(c, ETCD_CAMPAIGN_IDLE);
}

static void drop_watch(struct etcd_campaign *c)
{
	etcd_watch_free(c->watch);
	c->watch = NULL;
}

static void drop_leader(struct etcd_campaign *c)
{
	etcd_leader_free(c->leader);
	c->leader = NULL;
}

/* defer: what is over is dropped at the next turn of the loop (RESUME),
 * outside the callback of the leader or the watch that said so */
static void defer(struct etcd_campaign *c)
{
	event_active(c->defer, EV_TIMEOUT, 0);
	enter(c, ETCD_CAMPAIGN_DEPOSED);
}

/* campaign_delay_ms: how long a follower waits to campaign once the
 * leader key is gone. Every follower watches the key; were they all to
 * campaign at once, etcd would get a transaction from each of thousands
 * of nodes for the one that wins. The node with the lowest node rank goes
 * first: rank r waits r x 10 ms (at most 2 s); a node without a rank yet
 * waits 100 to 600 ms. A new leader key seen meanwhile stands the
 * campaign down (key_written). */
static uint64_t campaign_delay_ms(const struct etcd_campaign *c)
{
	int64_t rank = c->p.node_rank ? c->p.node_rank(c->p.arg) : -1;
	if (rank < 0)
		return 100 + clock_now_ns() % 500;
	return rank > 200 ? 2000 : (uint64_t)rank * 10;
}

/* ---------------------------------------------------------------- cells */

/* read_key: the campaign begins by reading the key (READING); without a
 * lease there is nothing to campaign with (the lease's grant starts it) */
static void read_key(struct etcd_campaign *c, int64_t revision)
{
	char k[ETCD_JOB_KEY_MAX], err[256];
	json_t *body = NULL;
	(void)revision;
	if (!*c->p.lease_id)
		return;
	drop_watch(c);
	evtimer_del(c->retry);
	leader_key(c, k, sizeof(k));
	if (etcd_build_read(k, &body, err, sizeof(err)) == 0)
		c->read = etcd_call(c->p.c, "leader key read", "/v3/kv/range",
				    body, 0, on_read, c);
	json_decref(body);
	if (!c->read) {
		retry_later(c, 0);
		return;
	}
	enter(c, ETCD_CAMPAIGN_READING);
}

/* campaign: the key is free; create it bound to this agent's lease
 * (etcd_campaign_ops), with a read of it for when it is lost */
static void campaign(struct etcd_campaign *c, int64_t revision)
{
	char k[ETCD_JOB_KEY_MAX], err[256], *val;
	struct etcd_compare cmp;
	struct etcd_op put, get;
	json_t *body = NULL;
	(void)revision;
	leader_key(c, k, sizeof(k));
	val = etcd_campaign_value(c);
	if (val) {
		etcd_campaign_ops(c, k, val, &cmp, &put);
		memset(&get, 0, sizeof(get));
		get.kind = ETCD_OP_RANGE;
		get.key = cmp.key;
		if (etcd_build_txn(&cmp, 1, &put, 1, &get, 1, &body, err,
				   sizeof(err)) == 0)
			c->txn = etcd_call(c->p.c, "campaign", "/v3/kv/txn",
					   body, 0, on_txn, c);
	}
	json_decref(body);
	free(val);
	if (!c->txn) {
		retry_later(c, 0);
		return;
	}
	enter(c, ETCD_CAMPAIGN_CAMPAIGNING);
}

/* watch_key: another agent leads; watch its key from the revision after
 * the one it was seen at */
static void watch_key(struct etcd_campaign *c, int64_t revision)
{
	char k[ETCD_JOB_KEY_MAX];
	drop_watch(c);
	leader_key(c, k, sizeof(k));
	c->watch = etcd_watch_new(c->p.c, "leader watch", k, strlen(k), NULL, 0,
				  revision + 1, 0, on_key, c);
	if (!c->watch) {
		retry_later(c, 0);
		return;
	}
	enter(c, ETCD_CAMPAIGN_WATCHING);
}

/* lead: this agent holds the key, created at revision */
static void lead(struct etcd_campaign *c, int64_t revision)
{
	drop_watch(c);
	c->leader = etcd_leader_new(c->p.base, c->p.c, c->p.prefix, c->p.job,
				    c->p.node_id, revision, c->p.rerun_after_ms,
				    on_deposed, c);
	if (!c->leader) {
		retry_later(c, 0);
		return;
	}
	enter(c, ETCD_CAMPAIGN_LEADING);
}

/* key_deleted: the leader is gone; campaign after this node's turn */
static void key_deleted(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	retry_in(c, campaign_delay_ms(c));
}

/* key_written: another agent leads now; a campaign waiting stands down */
static void key_written(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	evtimer_del(c->retry);
}

/* over: the leader was deposed, or the watch of the key broke */
static void over(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	defer(c);
}

static void lease_lost_leading(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	log_warn("etcd leader: this agent's lease expired, its leader key "
		 "with it; it stops leading job %s",
		 c->p.job);
	defer(c);
}

/* lease_lost_campaigning: the transaction in flight would bind the key
 * to the lease that expired; it is dropped and the key read again, to
 * campaign with the new lease */
static void lease_lost_campaigning(struct etcd_campaign *c, int64_t revision)
{
	etcd_cancel(c->txn);
	c->txn = NULL;
	enter(c, ETCD_CAMPAIGN_IDLE);
	read_key(c, revision);
}

/* resume: back on the loop; the leader or the watch that is over goes,
 * and a new campaign begins */
static void resume(struct etcd_campaign *c, int64_t revision)
{
	drop_leader(c);
	drop_watch(c);
	enter(c, ETCD_CAMPAIGN_IDLE);
	read_key(c, revision);
}

/* leave: nothing more, for good; the agent's leave revokes its lease,
 * the leader key with it */
static void leave(struct etcd_campaign *c, int64_t revision)
{
	(void)revision;
	etcd_cancel(c->read);
	c->read = NULL;
	etcd_cancel(c->txn);
	c->txn = NULL;
	drop_watch(c);
	drop_leader(c);
	evtimer_del(c->retry);
	event_del(c->defer);
	enter(c, ETCD_CAMPAIGN_LEFT);
}

/* The table: read it as "in this state, this event does that". An empty
 * cell changes nothing (and says so in the log). LEFT takes nothing. */
static const cell_fn table[ETCD_CAMPAIGN_N_STATES][ETCD_CAMPAIGN_N_EVENTS] = {
    [ETCD_CAMPAIGN_IDLE] = {[ETCD_CAMPAIGN_EV_START] = read_key,
			    [ETCD_CAMPAIGN_EV_RETRY] = read_key,
			    /* a node's first write, which campaigns too */
			    [ETCD_CAMPAIGN_EV_KEY_FREE] = campaign,
			    [ETCD_CAMPAIGN_EV_KEY_TAKEN] = watch_key,
			    [ETCD_CAMPAIGN_EV_WON] = lead,
			    [ETCD_CAMPAIGN_EV_LEAVE] = leave},
    [ETCD_CAMPAIGN_READING] = {[ETCD_CAMPAIGN_EV_KEY_FREE] = campaign,
			       [ETCD_CAMPAIGN_EV_KEY_TAKEN] = watch_key,
			       [ETCD_CAMPAIGN_EV_WON] = lead,
			       [ETCD_CAMPAIGN_EV_FAILED] = retry_later,
			       [ETCD_CAMPAIGN_EV_LEAVE] = leave},
    [ETCD_CAMPAIGN_CAMPAIGNING] = {[ETCD_CAMPAIGN_EV_WON] = lead,
				   [ETCD_CAMPAIGN_EV_KEY_TAKEN] = watch_key,
				   [ETCD_CAMPAIGN_EV_LOST] = retry_later,
				   [ETCD_CAMPAIGN_EV_FAILED] = retry_later,
				   [ETCD_CAMPAIGN_EV_LEASE_LOST] =
				       lease_lost_campaigning,
				   [ETCD_CAMPAIGN_EV_LEAVE] = leave},
    [ETCD_CAMPAIGN_LEADING] = {[ETCD_CAMPAIGN_EV_DEPOSED] = over,
			       [ETCD_CAMPAIGN_EV_LEASE_LOST] =
				   lease_lost_leading,
			       [ETCD_CAMPAIGN_EV_LEAVE] = leave},
    [ETCD_CAMPAIGN_WATCHING] = {[ETCD_CAMPAIGN_EV_START] = read_key,
				[ETCD_CAMPAIGN_EV_RETRY] = read_key,
				[ETCD_CAMPAIGN_EV_KEY_DELETED] = key_deleted,
				[ETCD_CAMPAIGN_EV_KEY_WRITTEN] = key_written,
				[ETCD_CAMPAIGN_EV_WATCH_COMPACTED] = over,
				[ETCD_CAMPAIGN_EV_LEAVE] = leave},
    [ETCD_CAMPAIGN_DEPOSED] =
	{[ETCD_CAMPAIGN_EV_RESUME] = resume, [ETCD_CAMPAIGN_EV_LEAVE] = leave},
};

void etcd_campaign_post(struct etcd_campaign *c, enum etcd_campaign_event ev,
			int64_t revision)
{
	cell_fn cell = NULL;
	if ((unsigned)ev < ETCD_CAMPAIGN_N_EVENTS &&
	    (unsigned)c->state < ETCD_CAMPAIGN_N_STATES)
		cell = table[c->state][ev];
	if (!cell) {
		log_debug("etcd campaign: %s has no cell in %s; ignored",
			  etcd_campaign_event_name(ev),
			  etcd_campaign_state_name(c->state));
		return;
	}
	cell(c, revision);
}

/* ------------------------------------------------------------ the rest */

int etcd_campaign_busy(const struct etcd_campaign *c)
{
	return c->state != ETCD_CAMPAIGN_IDLE &&
	       c->state != ETCD_CAMPAIGN_WATCHING;
}

void etcd_campaign_ops(const struct etcd_campaign *c, const char *k,
		       const char *val, struct etcd_compare *cmp,
		       struct etcd_op *put)
{
	memset(cmp, 0, sizeof(*cmp));
	cmp->key.data = k;
	cmp->key.len = strlen(k);
	cmp->target = ETCD_CMP_CREATE;
	cmp->result = ETCD_CMP_EQUAL;
	cmp->number = 0;
	memset(put, 0, sizeof(*put));
	put->kind = ETCD_OP_PUT;
	put->key = cmp->key;
	put->value.data = val;
	put->value.len = strlen(val);
	put->lease = *c->p.lease_id;
}

char *etcd_campaign_value(const struct etcd_campaign *c)
{
	json_t *v = json_pack("{s:s, s:s}", "node_id", c->p.node_id,
			      "incarnation", c->p.incarnation);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	return text;
}

int etcd_campaign_init(struct etcd_campaign *c,
		       const struct etcd_campaign_params *p)
{
	memset(c, 0, sizeof(*c));
	c->state = ETCD_CAMPAIGN_IDLE;
	c->p = *p;
	c->defer = event_new(p->base, -1, 0, on_defer, c);
	c->retry = evtimer_new(p->base, on_retry, c);
	return c->defer && c->retry ? 0 : DL_ENOMEM;
}

void etcd_campaign_release(struct etcd_campaign *c)
{
	etcd_cancel(c->read);
	etcd_cancel(c->txn);
	etcd_watch_free(c->watch);
	etcd_leader_free(c->leader);
	if (c->defer)
		event_free(c->defer);
	if (c->retry)
		event_free(c->retry);
	memset(c, 0, sizeof(*c));
}
