/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_etcd.c - the rendezvous backend over etcd (docs/etcd.md).
 *
 * A node writes only its own key (PREFIX/JOB/nodes/NODE), bound to its
 * lease: what it asks for (the join it is at, the report of the round it
 * ended, that it leaves). Its lease's keep-alive is its heartbeat; when
 * the node dies the lease expires and the key goes with it. It reads only
 * its own inbox (PREFIX/JOB/inbox/NODE), which the leader writes, and
 * watches the leader key to take over when the leader is gone.
 *
 * Every agent campaigns for the leader key (a transaction that creates
 * it only where there is none, bound to the agent's lease; a node's first
 * write is its campaign too); the winner runs etcd_leader.c beside its
 * own node's part, which goes through etcd like everyone else's. The
 * campaign (reading the key, leading, watching it, the takeover) is a
 * table of states x events of its own, embedded in struct rdzv_etcd
 * (etcd_campaign.h); the node's side posts it what it learns.
 *
 * This file: the inbox, the lease, and the interface of ../rdzv/rdzv.h
 * (answers go to the loop it was made with); the node key (its writes,
 * the first of them, the key taken by another agent) is
 * rdzv_etcd_nodekey.c's.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/backoff.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_client.h"
#include "etcd_recovery.h"
#include "rdzv_etcd.h"
#include "rdzv_etcd_node.h"

void rdzv_etcd_key(struct rdzv_etcd *h, char *out, size_t size,
		   const char *what, const char *id)
{
	etcd_key(out, size, h->prefix, what, id);
}

void rdzv_etcd_post_kind(struct rdzv_etcd *h, enum agent_event_kind k,
			 uint64_t round)
{
	agent_rdzv_post_kind(&h->base, k, round);
}

static int is_ended(const char *state)
{
	return state && (strcmp(state, "SUCCEEDED") == 0 ||
			 strcmp(state, "FAILED") == 0 ||
			 strcmp(state, "PREEMPTED") == 0);
}

/* ---------------------------------------------------------- the inbox */

/* consider: what the inbox says, for the join or the round in hand */
static void consider(struct rdzv_etcd *h)
{
	json_t *v = h->inbox, *a;
	uint64_t join = 0, round = 0;
	const char *state = NULL, *error = NULL, *why = NULL;
	if (!v || jsonh_get_u64(v, "join", 1, 0, UINT64_MAX, &join, NULL, 0) ||
	    jsonh_get_u64(v, "round", 1, 0, UINT64_MAX, &round, NULL, 0) ||
	    jsonh_get_str(v, "state", 1, 16, &state, NULL, 0) ||
	    jsonh_get_str(v, "error", 0, 1024, &error, NULL, 0) ||
	    jsonh_get_str(v, "ended_why", 0, 1024, &why, NULL, 0))
		return;
	a = json_object_get(v, "assignment");
	if (h->joining && join > h->join_seq)
		/* the leader joined this node to the next round itself, from
		 * its key (etcd_leader_prejoin): that join is this one */
		h->join_seq = join;
	if (h->joining && join == h->join_seq) {
		if (error) {
			log_error("rendezvous refused to let node %s join job "
				  "%s: %s",
				  h->node_id, h->cfg->run_id, error);
			h->joining = 0;
			rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		} else if (is_ended(state)) {
			struct agent_event ev;
			/* as the join's 410 answer says it */
			log_info("job %s has already ended (%s)%s%s",
				 h->cfg->run_id, state, why ? ": " : "",
				 why ? why : "");
			h->joining = 0;
			memset(&ev, 0, sizeof(ev));
			ev.kind = AGENT_EV_JOIN_ENDED;
			snprintf(ev.job_state, sizeof(ev.job_state), "%s",
				 state);
			agent_rdzv_post(&h->base, &ev);
		} else if (json_is_object(a) && strcmp(state, "RUNNING") == 0) {
			/* liveness is the lease's: no heartbeat to pace */
			uint64_t hb = 0, run = 0;
			h->joining = 0;
			if (jsonh_get_u64(a, "run", 0, 1, UINT32_MAX, &run,
					  NULL, 0) == 0 &&
			    run)
				h->run = run;
			if (agent_rdzv_post_joined(&h->base, a, h->cfg->nproc,
						   &hb) != 0)
				rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		} else if (json_is_true(json_object_get(v, "rejoin"))) {
			/* the round this join was placed in ended before we
			 * heard of it */
			h->join_seq++;
			rdzv_etcd_put_node(h);
		}
		return;
	}
	if (!h->in_round)
		return;
	if (is_ended(state))
		agent_rdzv_post_action(&h->base, h->round, "stop", state);
	else if (round > h->round)
		agent_rdzv_post_action(&h->base, h->round, "restart", state);
	else /* the job's stop step, once the leader picked it */
		agent_rdzv_post_preempt(&h->base, h->round, v);
}

void rdzv_etcd_take_inbox(struct rdzv_etcd *h, const char *value, size_t len)
{
	json_t *v = NULL;
	const char *inc = NULL;
	if (jsonh_parse(value, len, 16, &v, NULL, 0) != 0 ||
	    jsonh_get_str(v, "incarnation", 1, 64, &inc, NULL, 0) ||
	    strcmp(inc, h->incarnation) != 0) {
		json_decref(v); /* another agent's, or not one at all */
		return;
	}
	json_decref(h->inbox);
	h->inbox = v;
	consider(h);
}

static void on_inbox(void *arg, enum etcd_watch_what what,
		     const struct etcd_watch_response *w, const char *error);

void rdzv_etcd_watch_inbox(struct rdzv_etcd *h, int64_t from)
{
	char k[ETCD_JOB_KEY_MAX];
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_INBOX, h->node_id);
	etcd_watch_free(h->inbox_watch);
	h->inbox_watch = etcd_watch_new(h->c, "inbox watch", k, strlen(k), NULL,
					0, from, 0, on_inbox, h);
}

static void on_inbox(void *arg, enum etcd_watch_what what,
		     const struct etcd_watch_response *w, const char *error)
{
	struct rdzv_etcd *h = arg;
	if (what == ETCD_WATCH_EVENTS) {
		for (size_t i = 0; i < w->n_events; i++)
			if (w->events[i].type == ETCD_EVENT_PUT)
				rdzv_etcd_take_inbox(h, w->events[i].kv.value,
						     w->events[i].kv.value_len);
		return;
	}
	if (what == ETCD_WATCH_FAILED)
		log_error("etcd: watching this node's inbox failed: %s; "
			  "reading it again",
			  error);
	/* compacted (or failed): the value now, then watch from there */
	etcd_watch_free(h->inbox_watch);
	h->inbox_watch = NULL;
	rdzv_etcd_read_inbox(h);
}

static void on_inbox_read(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	char err[1024], k[ETCD_JOB_KEY_MAX];
	h->inbox_read = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_INBOX, h->node_id);
		log_error("cannot read this node's inbox %s in etcd: %s", k,
			  err);
		if (h->joining) {
			h->joining = 0;
			rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		}
		return;
	}
	if (r.n_kvs == 1)
		rdzv_etcd_take_inbox(h, r.kvs[0].value, r.kvs[0].value_len);
	rdzv_etcd_watch_inbox(h, r.header.revision + 1);
	etcd_range_response_release(&r);
}

void rdzv_etcd_read_inbox(struct rdzv_etcd *h)
{
	char k[ETCD_JOB_KEY_MAX], err[128];
	json_t *body = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_INBOX, h->node_id);
	if (etcd_build_read(k, &body, err, sizeof(err)) == 0)
		h->inbox_read = etcd_call(h->c, "inbox read", "/v3/kv/range",
					  body, 0, on_inbox_read, h);
	json_decref(body);
}

/* --------------------------------------------------------------- lease */

static void on_lease(void *arg, int64_t id, int lost, const char *error)
{
	struct rdzv_etcd *h = arg;
	if (lost < 0) {
		log_error("cannot join job %s through etcd: %s", h->cfg->run_id,
			  error);
		if (h->joining) {
			h->joining = 0;
			rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		}
		return;
	}
	h->lease_id = id;
	if (lost) {
		/* our keys went with the old lease, the leader key too, and
		 * the leader evicted this node: a join in hand starts
		 * afresh; a round in hand is over (the inbox will say so) */
		etcd_campaign_post(&h->camp, ETCD_CAMPAIGN_EV_LEASE_LOST, 0);
		if (h->joining)
			h->join_seq++;
		rdzv_etcd_put_node(h);
		if (!h->put_reads)
			etcd_campaign_post(&h->camp, ETCD_CAMPAIGN_EV_START, 0);
		return;
	}
	rdzv_etcd_put_node(h); /* and the first reads with it */
}

/* inbox_join: the join the inbox answers (0: none) */
static uint64_t inbox_join(const struct rdzv_etcd *h)
{
	uint64_t join = 0;
	if (!h->inbox ||
	    jsonh_get_u64(h->inbox, "join", 1, 0, UINT64_MAX, &join, NULL, 0))
		return 0;
	return join;
}

/* ---------------------------------------------------------- interface */

static void etcd_join(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	if (!h->join_seq)
		log_info("node %s joining job %s through etcd at %s (%d-%d "
			 "nodes)",
			 h->node_id, h->cfg->run_id,
			 etcd_client_endpoints(h->c), h->cfg->min_nodes,
			 h->cfg->max_nodes);
	h->join_seq++;
	h->joining = 1;
	json_decref(h->recovery); /* the round it told of is over */
	h->recovery = NULL;
	if (h->lease && inbox_join(h) >= h->join_seq) {
		/* the leader joined this node to the next round already
		 * (etcd_leader_prejoin), from its key under this lease:
		 * nothing to write, the answer comes to the inbox (or, the
		 * node evicted since, a "rejoin") */
		h->join_seq = inbox_join(h);
		log_info("node %s: the leader joined it to the next round "
			 "(join %llu): nothing to write",
			 h->node_id, (unsigned long long)h->join_seq);
		consider(h);
		return;
	}
	if (!h->master_port)
		h->master_port = agent_rdzv_free_port();
	if (!h->lease) {
		h->lease = etcd_lease_new(h->c, agent_etcd_lease_ttl_s(h->cfg),
					  on_lease, h);
		if (!h->lease) {
			h->joining = 0;
			rdzv_etcd_post_kind(h, AGENT_EV_JOIN_FAILED, 0);
		}
		return;
	}
	rdzv_etcd_put_node(h);
	consider(h);
}

static void etcd_round_end(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	h->in_round = 0;
	h->joining = 0;
}

static uint64_t recovery_round(const struct rdzv_etcd *h)
{
	json_t *n = json_object_get(h->recovery, "round");
	return json_is_integer(n) ? (uint64_t)json_integer_value(n) : 0;
}

/* on_recovery_wait: the pause before the recovery's write is over
 * (write_recovery); a write made meanwhile (a report, a preemption)
 * carried it already, and a round over since made it moot */
static void on_recovery_wait(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_etcd *h = arg;
	(void)fd;
	(void)what;
	if (h->recovery_owed && h->in_round && recovery_round(h) == h->round)
		rdzv_etcd_put_node(h);
}

/* write_recovery: the node key says how the workers entered the round,
 * after a pause of one to two milliseconds per node of the round
 * (etcd_recovery_delay_ms): nobody waits for it, and written at once by
 * every node of a round just formed it would be thousands of writes in
 * the way of that round's assignments still going out */
static void write_recovery(struct rdzv_etcd *h)
{
	const struct agent_round *cur = h->base.loop.current;
	uint64_t ms =
	    etcd_recovery_delay_ms(cur ? cur->nnodes : 1, backoff_seed());
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	h->recovery_owed = 1;
	if (!h->recovery_wait)
		h->recovery_wait = evtimer_new(h->evb, on_recovery_wait, h);
	if (!h->recovery_wait || evtimer_add(h->recovery_wait, &tv) != 0)
		rdzv_etcd_put_node(h); /* out of memory: no pause */
}

static void etcd_round_begin(struct agent_rdzv *r, uint64_t round)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	/* a success report of an earlier round is moot now */
	json_decref(h->report);
	h->report = NULL;
	h->report_owed = 0;
	h->round = round;
	h->in_round = 1;
	h->joining = 0;
	etcd_hang_round(h); /* hear hang triggers from now on */
	/* a node that joined says how it entered before the round begins
	 * here (etcd_entered): that is written now */
	if (recovery_round(h) == round)
		write_recovery(h);
	else {
		json_decref(h->recovery);
		h->recovery = NULL;
	}
	consider(h);
}

/* etcd_entered: the workers entered the loop's current round. After an in-place
 * re-form or a restart the node key says so (one write, the node's own,
 * bound to its lease as every other); the leader hands it to the state
 * machine and the job record keeps it. A first start costs no write. A
 * node that joined says it before its round begins here: the write waits
 * for etcd_round_begin. */
static void etcd_entered(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	const struct agent_rdzv_loop *l = &h->base.loop;
	json_t *rec =
	    etcd_recovery_json(l->current->round, l->recovery, l->recovery_why);
	if (!rec)
		return;
	json_decref(h->recovery);
	h->recovery = rec;
	if (h->in_round && h->round == l->current->round)
		write_recovery(h);
}

static void etcd_report(struct agent_rdzv *r, uint64_t round, int failed,
			json_t *failures)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	json_decref(h->report);
	h->report = json_pack("{s:I, s:s}", "round", (json_int_t)round,
			      "status", failed ? "failed" : "succeeded");
	if (h->report && failed && json_is_array(failures))
		json_object_set_new(h->report, "failures",
				    json_deep_copy(failures));
	h->report_round = round;
	h->report_owed = 1;
	rdzv_etcd_put_node(h);
}

/* etcd_preempt: the node key asks for a preemption; the leader's answer
 * is the stop step in every inbox (no answer: --preempt-grace ends it) */
static void etcd_preempt(struct agent_rdzv *r, uint64_t round, uint64_t step,
			 double step_rate)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	json_decref(h->preempt);
	h->preempt =
	    json_pack("{s:I, s:I, s:f}", "round", (json_int_t)round, "step",
		      (json_int_t)step, "step_rate", step_rate);
	rdzv_etcd_put_node(h);
}

static void etcd_cancel_all(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	etcd_round_end(r);
	h->report_owed = 0;
	etcd_cancel(h->status_call);
	h->status_call = NULL;
}

static void on_revoked(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	h->leave_call = NULL;
	if (a->rc == 0)
		log_info("node %s left job %s", h->node_id, h->cfg->run_id);
	else
		log_warn("could not leave job %s: %s", h->cfg->run_id,
			 a->error);
	rdzv_etcd_post_kind(h, AGENT_EV_LEFT, 0);
}

static void on_left_put(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	json_t *body = NULL;
	char err[128];
	(void)a;
	h->leave_call = NULL;
	/* the key said "leaving"; dropping the lease drops every key of
	 * this agent, the leader key too */
	if (etcd_build_lease_revoke(h->lease_id, &body, err, sizeof(err)) == 0)
		h->leave_call = etcd_call(h->c, "leave", "/v3/lease/revoke",
					  body, ETCD_CALL_ONCE, on_revoked, h);
	json_decref(body);
	if (!h->leave_call)
		rdzv_etcd_post_kind(h, AGENT_EV_LEFT, 0);
}

static void etcd_leave(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	char k[ETCD_JOB_KEY_MAX], err[256], *text;
	json_t *v, *body = NULL;
	if (!h->lease_id) {
		rdzv_etcd_post_kind(h, AGENT_EV_LEFT, 0);
		return;
	}
	etcd_campaign_post(&h->camp, ETCD_CAMPAIGN_EV_LEAVE, 0);
	h->leaving = 1;
	etcd_cancel(h->put);
	h->put = NULL;
	h->put_reads = 0;
	if (h->displaced) {
		/* the key is another agent's: only this agent's lease goes */
		struct etcd_answer a = {0, "", 0, ""};
		on_left_put(h, &a);
		return;
	}
	v = rdzv_etcd_node_value(h);
	text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_NODES, h->node_id);
	if (text && etcd_build_put(k, strlen(k), text, strlen(text),
				   h->lease_id, &body, err, sizeof(err)) == 0)
		h->leave_call = etcd_call(h->c, "leave", "/v3/kv/put", body,
					  ETCD_CALL_ONCE, on_left_put, h);
	free(text);
	json_decref(body);
	if (!h->leave_call) {
		struct etcd_answer a = {DL_ENOMEM, "", 0, ""};
		on_left_put(h, &a);
	}
}

static void on_status(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	struct agent_event ev;
	json_t *saved = NULL, *failures = NULL;
	char err[1024];
	h->status_call = NULL;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_STATUS;
	if (etcd_answer_range(a, &r, err, sizeof(err)) == 0) {
		if (r.n_kvs == 1 &&
		    jsonh_parse(r.kvs[0].value, r.kvs[0].value_len, 64, &saved,
				NULL, 0) == 0)
			failures = json_object_get(saved, "failures");
		if (json_is_array(failures))
			ev.json = json_incref(failures);
		json_decref(saved);
		etcd_range_response_release(&r);
	}
	agent_rdzv_post(&h->base, &ev);
}

static void etcd_status(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	char k[ETCD_JOB_KEY_MAX], err[128];
	json_t *body = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_STATE, NULL);
	if (etcd_build_range(k, strlen(k), NULL, 0, 0, 0, &body, err,
			     sizeof(err)) == 0)
		h->status_call = etcd_call(h->c, "status", "/v3/kv/range", body,
					   ETCD_CALL_ONCE, on_status, h);
	json_decref(body);
	if (!h->status_call) {
		struct etcd_answer a = {DL_ENOMEM, "", 0, ""};
		on_status(h, &a);
	}
}

static void etcd_free(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	if (!h)
		return;
	etcd_campaign_release(&h->camp);
	if (h->lease)
		etcd_lease_free(h->lease);
	etcd_client_free(h->c); /* every call and watch with it */
	etcd_hang_free(h);
	json_decref(h->report);
	json_decref(h->preempt);
	json_decref(h->recovery);
	if (h->recovery_wait)
		event_free(h->recovery_wait);
	json_decref(h->inbox);
	free(h);
}

/* node_rank: this node's rank in the round its inbox assigns, -1 when
 * none (the campaign's order of followers) */
static int64_t node_rank(void *arg)
{
	struct rdzv_etcd *h = arg;
	json_t *a = json_object_get(h->inbox, "assignment");
	json_t *r = json_object_get(a, "node_rank");
	return json_is_integer(r) ? (int64_t)json_integer_value(r) : -1;
}

static const struct agent_rdzv_ops etcd_ops = {
    .name = "etcd",
    .join = etcd_join,
    .round_begin = etcd_round_begin,
    .round_end = etcd_round_end,
    .report = etcd_report,
    .cancel = etcd_cancel_all,
    .leave = etcd_leave,
    .status = etcd_status,
    .free = etcd_free,
    .entered = etcd_entered,
    .hang_open = etcd_hang_open,
    .hang_post = etcd_hang_post,
    .hang_fetch = etcd_hang_fetch,
    .hang_cancel = etcd_hang_cancel,
    .hang_keep = etcd_hang_keep,
    .preempt = etcd_preempt,
};

int agent_rdzv_etcd_new(const struct agent_rdzv_params *p,
			struct agent_rdzv **out, char *err, size_t err_size)
{
	const struct agent_config *cfg = p->cfg;
	struct rdzv_etcd *h = calloc(1, sizeof(*h));
	struct etcd_campaign_params camp;
	int rc;
	if (!h) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	h->base.ops = &etcd_ops;
	h->base.loop = p->loop;
	h->evb = p->base;
	h->cfg = cfg;
	h->node_id = p->node_id;
	h->incarnation = p->incarnation;
	etcd_job_prefix(h->prefix, sizeof(h->prefix), cfg->etcd.key_prefix,
			cfg->run_id);
	rc = etcd_client_new(p->base, cfg, &h->c, err, err_size);
	if (rc) {
		free(h);
		return rc;
	}
	camp.base = p->base;
	camp.c = h->c;
	camp.prefix = h->prefix;
	camp.job = cfg->run_id;
	camp.node_id = h->node_id;
	camp.incarnation = h->incarnation;
	camp.rerun_after_ms = agent_etcd_rerun_after_ms(cfg);
	camp.lease_id = &h->lease_id;
	camp.node_rank = node_rank;
	camp.arg = h;
	if (etcd_campaign_init(&h->camp, &camp) != 0 || etcd_hang_new(h) != 0) {
		etcd_free(&h->base);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	if (cfg->local_addr)
		snprintf(h->addr, sizeof(h->addr), "%s", cfg->local_addr);
	else
		agent_rdzv_local_addr(etcd_client_endpoint(h->c), 2379, h->addr,
				      sizeof(h->addr));
	h->base.addr = h->addr;
	*out = &h->base;
	return 0;
}
