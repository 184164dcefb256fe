/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_etcd_nodekey.c - the etcd backend's node key (docs/etcd.md): what
 * it says (rdzv_etcd_node_value), writing it (rdzv_etcd_put_node), the
 * first write, which also campaigns and reads the inbox and the leader
 * key in one transaction, and the key watched: another agent that writes
 * it with another incarnation took this node's id, and this agent stops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_client.h"
#include "rdzv_etcd_node.h"

/* ------------------------------------------------- the node key taken */

/* displaced: another agent wrote this node's key with incarnation other:
 * it runs with this node's id now. This agent writes nothing more (its
 * leave would take the key back, its lease's revocation would delete it)
 * and stops, exit status 1: a join fails, a round in hand ends. */
static void displaced(struct rdzv_etcd *h, const char *other)
{
	char k[ETCD_JOB_KEY_MAX];
	if (h->displaced)
		return;
	h->displaced = 1;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	log_error("node id %s was taken: another agent (incarnation %s) "
		  "wrote this node's key %s; this agent (incarnation %s) "
		  "stops: give every agent a node id of its own",
		  h->node_id, other, k, h->incarnation);
	etcd_cancel(h->put);
	h->put = NULL;
	h->put_again = 0;
	if (h->joining) {
		h->joining = 0;
		rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		return;
	}
	/* a round in hand, or this node's part of it done: the job is over
	 * for this agent; a report it owes is never written */
	agent_rdzv_post_action(&h->base, h->round, "stop", "FAILED");
	if (h->report_owed) {
		h->report_owed = 0;
		rdzv_etcd_post_kind(h, AGENT_EV_REPORT_DONE, h->report_round);
	}
}

/* config_differs: the first field of config a (a node key's) that b
 * (this agent's) has otherwise, or NULL */
static const char *config_differs(json_t *a, json_t *b)
{
	const char *field;
	json_t *bv;
	json_object_foreach(b, field, bv)
	{
		if (!json_equal(json_object_get(a, field), bv))
			return field;
	}
	return NULL;
}

/* node_seen: the node key holds value (len bytes) */
static void node_seen(struct rdzv_etcd *h, const char *value, size_t len)
{
	json_t *v = NULL;
	const char *inc = NULL;
	json_t *mine = NULL;
	if (jsonh_parse(value, len, 16, &v, NULL, 0) == 0 &&
	    jsonh_get_str(v, "incarnation", 1, 64, &inc, NULL, 0) == 0 &&
	    strcmp(inc, h->incarnation) != 0) {
		/* one whose configuration differs would be refused: it puts
		 * this agent's value back and stops (refused_holder) */
		mine = rdzv_etcd_node_value(h);
		if (mine && !config_differs(json_object_get(v, "config"),
					    json_object_get(mine, "config")))
			displaced(h, inc);
		else
			log_warn("another agent (incarnation %s) with another "
				 "configuration wrote this node's key; it puts "
				 "it back and stops",
				 inc);
	}
	json_decref(mine);
	json_decref(v);
}

static void on_node_key(void *arg, enum etcd_watch_what what,
			const struct etcd_watch_response *w, const char *error);

static void watch_node(struct rdzv_etcd *h, int64_t from)
{
	char k[ETCD_JOB_KEY_MAX];
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	etcd_watch_free(h->node_watch);
	h->node_watch = etcd_watch_new(h->c, "node key watch", k, strlen(k),
				       NULL, 0, from, 0, on_node_key, h);
}

static void on_node_read(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	char err[1024];
	h->node_read = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_warn("cannot read this node's key in etcd (%s); it is not "
			 "watched any more",
			 err);
		return;
	}
	if (r.n_kvs == 1)
		node_seen(h, r.kvs[0].value, r.kvs[0].value_len);
	if (!h->displaced)
		watch_node(h, r.header.revision + 1);
	etcd_range_response_release(&r);
}

static void on_node_key(void *arg, enum etcd_watch_what what,
			const struct etcd_watch_response *w, const char *error)
{
	struct rdzv_etcd *h = arg;
	char k[ETCD_JOB_KEY_MAX], err[128];
	json_t *body = NULL;
	if (what == ETCD_WATCH_EVENTS) {
		for (size_t i = 0; i < w->n_events && !h->displaced; i++)
			if (w->events[i].type == ETCD_EVENT_PUT)
				node_seen(h, w->events[i].kv.value,
					  w->events[i].kv.value_len);
		return;
	}
	if (what == ETCD_WATCH_FAILED)
		log_warn("etcd: watching this node's key failed: %s; reading "
			 "it again",
			 error);
	/* compacted (or failed): the value now, then watch from there */
	etcd_watch_free(h->node_watch);
	h->node_watch = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	if (etcd_build_read(k, &body, err, sizeof(err)) == 0)
		h->node_read = etcd_call(h->c, "node key read", "/v3/kv/range",
					 body, 0, on_node_read, h);
	json_decref(body);
}

/* ----------------------------------------------------------- node key */

json_t *rdzv_etcd_node_value(struct rdzv_etcd *h)
{
	const struct agent_config *cfg = h->cfg;
	struct rdzv_job_config jc;
	json_t *v;
	rdzv_job_config_init(&jc);
	jc.min_nodes = (uint32_t)cfg->min_nodes;
	jc.max_nodes = (uint32_t)cfg->max_nodes;
	jc.max_restarts = (uint32_t)cfg->max_restarts;
	jc.join_timeout_ms = cfg->join_timeout_ms;
	jc.last_call_timeout_ms = cfg->last_call_timeout_ms;
	jc.heartbeat_interval_ms = cfg->heartbeat_interval_ms;
	jc.heartbeat_timeout_ms = cfg->heartbeat_timeout_ms;
	v = json_pack("{s:s, s:s, s:i, s:i, s:I, s:o}", "incarnation",
		      h->incarnation, "addr", h->addr, "nproc", cfg->nproc,
		      "master_port", (int)h->master_port, "join",
		      (json_int_t)h->join_seq, "config",
		      rdzv_job_config_json(&jc));
	if (v && h->run)
		json_object_set_new(v, "run", json_integer((json_int_t)h->run));
	if (v && h->report)
		json_object_set(v, "report", h->report);
	if (v && h->leaving)
		json_object_set_new(v, "leaving", json_true());
	if (v && h->recovery)
		json_object_set(v, "recovery", h->recovery);
	if (v && h->preempt)
		json_object_set(v, "preempt", h->preempt);
	return v;
}

/* entered: the answer of a node's first write (put_node), which also
 * campaigned and read the inbox and the leader key at its revision; both
 * watches follow from there. An answer that cannot be read leaves the
 * reads and the campaign to their own calls. */
static void on_put_back(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	h->node_read = NULL;
	if (a->rc != 0)
		log_warn("could not put node %s's key back: %s", h->node_id,
			 a->error);
	if (h->joining) {
		h->joining = 0;
		rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
	}
}

/* refused_holder: kv, this node's key before this agent's first write,
 * held by another incarnation whose configuration differs: the
 * rendezvous would refuse this agent, and its write displaced the holder.
 * It puts the holder's value back under the holder's lease, writes
 * nothing more, and its join fails when that is done (its leave then
 * drops only its own lease, the leader key with it if it won it). 1 when
 * so. */
static int refused_holder(struct rdzv_etcd *h, const struct etcd_kv *kv)
{
	json_t *v = NULL, *mine = rdzv_etcd_node_value(h), *body = NULL;
	const char *inc = NULL, *field = NULL;
	char k[ETCD_JOB_KEY_MAX], err[128];
	if (mine &&
	    jsonh_parse(kv->value, kv->value_len, 16, &v, NULL, 0) == 0 &&
	    jsonh_get_str(v, "incarnation", 1, 64, &inc, NULL, 0) == 0 &&
	    strcmp(inc, h->incarnation) != 0)
		field = config_differs(json_object_get(v, "config"),
				       json_object_get(mine, "config"));
	if (field) {
		log_error("node id %s is held by another agent (incarnation "
			  "%s) whose configuration differs (field '%s'): the "
			  "rendezvous would refuse this agent; it puts that "
			  "agent's key back and stops: give every agent a "
			  "node id of its own and one configuration",
			  h->node_id, inc, field);
		h->displaced = 1; /* the key is the other agent's */
		rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
		if (etcd_build_put(k, strlen(k), kv->value, kv->value_len,
				   kv->lease, &body, err, sizeof(err)) == 0)
			h->node_read =
			    etcd_call(h->c, "node key put back", "/v3/kv/put",
				      body, ETCD_CALL_ONCE, on_put_back, h);
		json_decref(body);
		if (!h->node_read) {
			struct etcd_answer a = {DL_ENOMEM, "", 0,
						"out of memory"};
			on_put_back(h, &a);
		}
	}
	json_decref(v);
	json_decref(mine);
	return field != NULL;
}

static void entered(struct rdzv_etcd *h, const struct etcd_answer *a)
{
	struct etcd_txn_response t;
	const struct etcd_range_response *in, *ld;
	char err[1024] = "";
	int ok;
	memset(&t, 0, sizeof(t)); /* released below whatever the answer */
	ok =
	    etcd_answer_txn(a, &t, err, sizeof(err)) == 0 && t.n_responses == 4;
	in = ok ? &t.responses[t.succeeded ? 3 : 2].range : NULL;
	ld = ok && !t.succeeded ? &t.responses[3].range : NULL;
	if (!ok || t.responses[0].kind != ETCD_OP_RANGE ||
	    t.responses[t.succeeded ? 3 : 2].kind != ETCD_OP_RANGE ||
	    (ld && t.responses[3].kind != ETCD_OP_RANGE)) {
		log_warn("etcd: this node's first write gave an answer that "
			 "cannot be read (%s); reading its inbox and the "
			 "leader key apart",
			 err);
		etcd_txn_response_release(&t);
		rdzv_etcd_read_inbox(h);
		on_node_key(h, ETCD_WATCH_COMPACTED, NULL, NULL);
		etcd_campaign_post(&h->camp, ETCD_CAMPAIGN_EV_START, 0);
		return;
	}
	if (t.responses[0].range.n_kvs == 1 &&
	    refused_holder(h, &t.responses[0].range.kvs[0])) {
		etcd_txn_response_release(&t);
		return;
	}
	if (in->n_kvs == 1)
		rdzv_etcd_take_inbox(h, in->kvs[0].value, in->kvs[0].value_len);
	rdzv_etcd_watch_inbox(h, t.header.revision + 1);
	watch_node(h, t.header.revision + 1);
	if (t.succeeded)
		etcd_campaign_post(&h->camp, ETCD_CAMPAIGN_EV_WON,
				   t.header.revision);
	else
		etcd_campaign_seen(&h->camp,
				   ld->n_kvs == 1 ? &ld->kvs[0] : NULL,
				   t.header.revision);
	etcd_txn_response_release(&t);
}

static void on_put(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	int had_report = h->put_has_report, reads = h->put_reads;
	char k[ETCD_JOB_KEY_MAX];
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	h->put = NULL;
	h->put_reads = 0;
	if (a->rc == 0 && reads && !h->inbox_watch)
		entered(h, a);
	if (a->rc == DL_ENOTFOUND) {
		/* "requested lease not found": the lease expired under the
		 * write; the lease takes a new one and the key is written
		 * again with it (on_lease), report and all */
		log_warn("this node's key %s was refused for an expired "
			 "lease; writing it again with a new one",
			 k);
		return;
	}
	if (a->rc != 0) {
		log_error("cannot write this node's key %s in etcd: %s", k,
			  a->error);
		if (h->joining) {
			h->joining = 0;
			rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		}
	}
	if (had_report && h->report_owed && !h->put_again) {
		h->report_owed = 0;
		rdzv_etcd_post_kind(h, AGENT_EV_REPORT_DONE, h->report_round);
	}
	if (h->put_again)
		rdzv_etcd_put_node(h);
}

/* put_node writes the node key. A node's first write (no inbox watch
 * yet) is also its campaign and its first reads, in one transaction: where
 * there is no leader key it creates it, bound to this node's lease, and
 * either way it reads the inbox and the leader key at the revision it
 * writes at. One request and one raft proposal where a join took four
 * requests; no herd of campaigns when a job's nodes start together (the
 * first one to write leads, the others see it); and both watches start
 * from the revision the reads saw, so nothing written in between is
 * missed. */
void rdzv_etcd_put_node(struct rdzv_etcd *h)
{
	char k[ETCD_JOB_KEY_MAX], kin[ETCD_JOB_KEY_MAX], kld[ETCD_JOB_KEY_MAX],
	    err[256], *text, *lval;
	json_t *v, *body = NULL;
	struct etcd_op node, in, ld, lput;
	struct etcd_compare free_key;
	int reads;
	if (!h->lease_id)
		return; /* written when the lease is granted */
	if (h->displaced)
		return; /* the key is another agent's */
	if (h->put) {
		h->put_again = 1;
		return;
	}
	h->put_again = 0;
	reads = !h->inbox_watch && !h->inbox_read && !h->leaving &&
		!etcd_campaign_busy(&h->camp);
	v = rdzv_etcd_node_value(h);
	text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (text && h->recovery)
		h->recovery_owed = 0; /* this write carries it */
	lval = etcd_campaign_value(&h->camp);
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	rdzv_etcd_key(h, kin, sizeof(kin), ETCD_KEY_INBOX, h->node_id);
	rdzv_etcd_key(h, kld, sizeof(kld), ETCD_KEY_LEADER, NULL);
	memset(&node, 0, sizeof(node));
	node.kind = ETCD_OP_PUT;
	node.key.data = k;
	node.key.len = strlen(k);
	node.value.data = text;
	node.value.len = text ? strlen(text) : 0;
	node.lease = h->lease_id;
	memset(&in, 0, sizeof(in));
	in.kind = ETCD_OP_RANGE;
	in.key.data = kin;
	in.key.len = strlen(kin);
	if (text && lval) {
		etcd_campaign_ops(&h->camp, kld, lval, &free_key, &lput);
		ld = in;
		ld.key = lput.key;
		/* look: the node key before this write (refused_holder) */
		struct etcd_op look = in;
		look.key = node.key;
		const struct etcd_op won[4] = {look, node, lput, in};
		const struct etcd_op lost[4] = {look, node, in, ld};
		if ((reads ? etcd_build_txn(&free_key, 1, won, 4, lost, 4,
					    &body, err, sizeof(err))
			   : etcd_build_op(&node, &body, err, sizeof(err))) ==
		    0) {
			h->put_has_report = h->report != NULL;
			h->put_reads = reads;
			h->put = etcd_call(
			    h->c,
			    reads ? "node write and campaign" : "node write",
			    reads ? "/v3/kv/txn" : "/v3/kv/put", body,
			    h->leaving ? ETCD_CALL_ONCE : 0, on_put, h);
		}
	}
	free(text);
	free(lval);
	json_decref(body);
	if (!h->put) {
		struct etcd_answer a = {DL_ENOMEM, "", 0, "out of memory"};
		on_put(h, &a);
	}
}
