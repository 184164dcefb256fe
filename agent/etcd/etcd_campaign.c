/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_campaign.c - which agent of a job leads it over etcd: the
 * campaign for the job's leader key, the watch of the key by the agents
 * that do not lead, and the takeover when it goes (docs/etcd.md).
 *
 * A node's first write campaigns with it (rdzv_etcd.c's put_node); this
 * is what follows: an agent that holds the key runs etcd_leader.c; one
 * that does not watches the key and, when it is gone, campaigns again in
 * the order of node ranks.
 */
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_leader.h"
#include "rdzv_etcd_node.h"

void rdzv_etcd_on_deposed(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_etcd *h = arg;
	(void)fd;
	(void)what;
	etcd_leader_free(h->leader);
	h->leader = NULL;
	rdzv_etcd_campaign(h);
}

static void deposed(void *arg)
{
	struct rdzv_etcd *h = arg;
	/* from inside the leader's own callbacks: freed from the loop */
	event_active(h->depose, EV_TIMEOUT, 0);
}

/* campaign_delay_ms: how long a follower waits to campaign once the
 * leader key is gone. Every follower watches the key; were they all to
 * campaign at once, etcd would get a transaction from each of thousands
 * of nodes for the one that wins. The node with the lowest node rank goes
 * first: rank r waits r x 10 ms (at most 2 s); a node without a rank yet
 * waits 100 to 600 ms. A new leader key seen meanwhile stands the
 * campaign down (on_leader_key). */
static uint64_t campaign_delay_ms(struct rdzv_etcd *h)
{
	json_t *a = json_object_get(h->inbox, "assignment");
	json_t *r = json_object_get(a, "node_rank");
	json_int_t rank = json_is_integer(r) ? json_integer_value(r) : -1;
	if (rank < 0)
		return 100 + clock_now_ns() % 500;
	return rank > 200 ? 2000 : (uint64_t)rank * 10;
}

static void on_leader_key(void *arg, enum etcd_watch_what what,
			  const struct etcd_watch_response *w,
			  const char *error)
{
	struct rdzv_etcd *h = arg;
	int gone = -1; /* the last event: 1 deleted, 0 written */
	if (what != ETCD_WATCH_EVENTS) {
		if (what == ETCD_WATCH_FAILED)
			log_warn("etcd: watching the leader key failed: %s",
				 error);
		event_active(h->depose, EV_TIMEOUT, 0);
		return;
	}
	for (size_t i = 0; i < w->n_events; i++)
		gone = w->events[i].type == ETCD_EVENT_DELETE;
	if (gone == 1) {
		uint64_t ms = campaign_delay_ms(h);
		struct timeval tv = {(time_t)(ms / 1000),
				     (suseconds_t)(ms % 1000) * 1000};
		evtimer_add(h->recampaign, &tv);
	} else if (gone == 0) {
		evtimer_del(h->recampaign); /* another agent leads now */
	}
}

/* lead: this agent holds the leader key, created at revision */
void rdzv_etcd_lead(struct rdzv_etcd *h, int64_t revision)
{
	struct timeval tv = {1, 0};
	h->leader = etcd_leader_new(
	    h->evb, h->c, h->prefix, h->cfg->run_id, h->node_id, revision,
	    agent_etcd_rerun_after_ms(h->cfg), deposed, h);
	if (!h->leader)
		evtimer_add(h->recampaign, &tv);
}

static void on_campaign(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_txn_response t;
	char err[1024], k[ETCD_JOB_KEY_MAX];
	struct timeval tv = {1, 0};
	h->campaign = NULL;
	if (etcd_answer_txn(a, &t, err, sizeof(err)) != 0) {
		log_warn("etcd: campaign for the leader key failed: %s", err);
		evtimer_add(h->recampaign, &tv);
		return;
	}
	const struct etcd_kv *kv =
	    t.n_responses == 1 && t.responses[0].range.n_kvs == 1
		? &t.responses[0].range.kvs[0]
		: NULL;
	if (t.succeeded || (kv && kv->lease == h->lease_id)) {
		/* won; or the key is still ours (bound to our lease) after
		 * this agent stopped leading for a failure of its own */
		rdzv_etcd_lead(h, t.succeeded ? t.header.revision
					      : kv->create_revision);
	} else {
		int64_t rev = t.header.revision;
		int present = kv != NULL;
		rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_LEADER, NULL);
		etcd_watch_free(h->leader_watch);
		h->leader_watch = NULL;
		if (present)
			h->leader_watch = etcd_watch_new(
			    h->c, "leader watch", k, strlen(k), NULL, 0,
			    rev + 1, 0, on_leader_key, h);
		if (!h->leader_watch)
			evtimer_add(h->recampaign, &tv);
	}
	etcd_txn_response_release(&t);
}

void rdzv_etcd_campaign_ops(struct rdzv_etcd *h, const char *k, const char *val,
			    struct etcd_compare *cmp, struct etcd_op *put)
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
	put->lease = h->lease_id;
}

/* send_campaign: the campaign alone (rdzv_etcd_campaign_ops), with a
 * read of the key for when it is lost */
static void send_campaign(struct rdzv_etcd *h)
{
	char k[ETCD_JOB_KEY_MAX], err[256], *val;
	struct etcd_compare cmp;
	struct etcd_op put, get;
	json_t *body = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_LEADER, NULL);
	val = rdzv_etcd_leader_value(h);
	if (!val)
		return;
	rdzv_etcd_campaign_ops(h, k, val, &cmp, &put);
	memset(&get, 0, sizeof(get));
	get.kind = ETCD_OP_RANGE;
	get.key = cmp.key;
	if (etcd_build_txn(&cmp, 1, &put, 1, &get, 1, &body, err,
			   sizeof(err)) == 0)
		h->campaign = etcd_call(h->c, "campaign", "/v3/kv/txn", body, 0,
					on_campaign, h);
	json_decref(body);
	free(val);
}

/* on_leader_read: a leader key there is watched (or led, when it is
 * still this agent's); none is campaigned for. Reading first spares etcd
 * a write per joining agent when a leader exists, as it mostly does. */
static void on_leader_read(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	char err[1024];
	struct timeval tv = {1, 0};
	h->campaign = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_warn("etcd: reading the leader key failed: %s", err);
		evtimer_add(h->recampaign, &tv);
		return;
	}
	rdzv_etcd_leader_seen(h, r.n_kvs == 1 ? &r.kvs[0] : NULL,
			      r.header.revision);
	etcd_range_response_release(&r);
}

/* leader_seen: the leader key as read at revision (kv NULL: none) */
void rdzv_etcd_leader_seen(struct rdzv_etcd *h, const struct etcd_kv *kv,
			   int64_t revision)
{
	char k[ETCD_JOB_KEY_MAX];
	struct timeval tv = {1, 0};
	if (h->leader || h->campaign || h->leaving)
		return;
	etcd_watch_free(h->leader_watch);
	h->leader_watch = NULL;
	if (!kv) {
		send_campaign(h);
	} else if (kv->lease == h->lease_id) {
		rdzv_etcd_lead(h, kv->create_revision);
	} else {
		rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_LEADER, NULL);
		h->leader_watch =
		    etcd_watch_new(h->c, "leader watch", k, strlen(k), NULL, 0,
				   revision + 1, 0, on_leader_key, h);
		if (!h->leader_watch)
			evtimer_add(h->recampaign, &tv);
	}
}

/* campaign: lead when the leader key is free (or still ours), else
 * watch it */
void rdzv_etcd_campaign(struct rdzv_etcd *h)
{
	char k[ETCD_JOB_KEY_MAX], err[256];
	json_t *body = NULL;
	if (h->leader || h->campaign || !h->lease_id || h->leaving)
		return;
	etcd_watch_free(h->leader_watch);
	h->leader_watch = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_LEADER, NULL);
	if (rdzv_etcd_read_body(k, &body, err, sizeof(err)) == 0)
		h->campaign = etcd_call(h->c, "leader read", "/v3/kv/range",
					body, 0, on_leader_read, h);
	json_decref(body);
}

void rdzv_etcd_on_recampaign(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rdzv_etcd_campaign(arg);
}
