/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_http.c - the rendezvous backend that talks to dlaunch-rdzv over
 * its HTTP API (docs/http-api.md), on the agent's loop (rdzv/client.c): the
 * requests of a round and the backend's interface (rdzv/rdzv.h); the hang
 * diagnosis calls are rdzv_http_hang.c's.
 *
 * Each request kind is an op (rdzv_http_op.c): its call in flight, its
 * retry timer and its backoff. A request that does not reach the server,
 * or gets 429/5xx, is tried again with backoff while the workers keep
 * running. The heartbeat and the watch
 * pause at most one heartbeat interval, so that a member is heard again
 * within heartbeat_timeout of a restarted server's return. An answer is about
 * the round its request named, and is posted as such: the round loop drops it
 * when it has moved on.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "hang.h"
#include "rdzv_http_int.h"

#define WATCH_WAIT_MS	  30000
#define JOIN_WAIT_MS	  30000
#define LEAVE_TIMEOUT_MS  3000
#define LEAVE_ATTEMPTS	  3
#define RDZV_DEFAULT_PORT 29400

/* with_action: 200, 409 (a stale round) and 410 (the job ended) answers
 * carry the job's state and what to do */
static int with_action(const struct client_reply *r)
{
	return r->status == 200 || r->status == 409 || r->status == 410;
}

/* post_action posts the action of an answer about round. Returns 1 when
 * it said restart or stop. */
static int post_action(struct rdzv_http *h, uint64_t round,
		       const struct client_reply *r)
{
	const char *action = NULL, *state = NULL;
	if (!r->json || !with_action(r))
		return 0;
	if (r->status == 409 &&
	    json_is_true(json_object_get(r->json, "replaced"))) {
		/* a later join took this node's id: another agent runs
		 * with it now; joining again would take it back, and the
		 * two would end each other's rounds in turn */
		if (!h->displaced)
			log_error("rendezvous: %s; this agent (incarnation "
				  "%s) stops",
				  *r->error ? r->error : "node id taken",
				  h->incarnation);
		h->displaced = 1;
		agent_rdzv_post_action(&h->base, round, "stop", "FAILED");
		return 1;
	}
	jsonh_get_str(r->json, "action", 0, 32, &action, NULL, 0);
	jsonh_get_str(r->json, "state", 0, 32, &state, NULL, 0);
	if (agent_rdzv_post_action(&h->base, round, action, state))
		return 1;
	/* a preempted job's stop step comes with every answer */
	if (r->status == 200)
		agent_rdzv_post_preempt(&h->base, round, r->json);
	return 0;
}

/* heard_dump: an answer carries an open trigger ("dump"); returns 1
 * when it is one this agent had not heard of */
static int heard_dump(struct rdzv_http *h, const struct client_reply *r)
{
	json_t *d = r->json ? json_object_get(r->json, "dump") : NULL;
	const char *id = json_string_value(json_object_get(d, "id"));
	int fresh;
	/* the id goes into the watch's URL: only one of the documented form */
	if (!json_is_object(d) || !hang_id_valid(id))
		return 0;
	fresh = strcmp(id, h->dump_seen) != 0;
	snprintf(h->dump_seen, sizeof(h->dump_seen), "%s", id);
	if (h->base.hang.heard)
		h->base.hang.heard(h->base.hang.ctx, d);
	return fresh;
}

/* ----------------------------------------------------------- requests */

void http_job_path(struct rdzv_http *h, char *out, size_t size,
		   const char *what)
{
	snprintf(out, size, "/v1/jobs/%s/%s", h->cfg->run_id, what);
}

json_t *http_identity(struct rdzv_http *h)
{
	json_t *o = json_object();
	json_object_set_new(o, "node_id", json_string(h->node_id));
	json_object_set_new(o, "incarnation", json_string(h->incarnation));
	return o;
}

static void post_join_failed(struct rdzv_http *h)
{
	agent_rdzv_post_kind(&h->base, AGENT_EV_JOIN_FAILED, 0);
}

/* join_ended: 410, the job has ended before this join */
static void join_ended(struct rdzv_http *h, const struct client_reply *r)
{
	struct agent_event ev;
	const char *state = NULL, *msg = NULL;
	if (r->json) {
		jsonh_get_str(r->json, "state", 0, 32, &state, NULL, 0);
		jsonh_get_str(r->json, "error", 0, 1024, &msg, NULL, 0);
	}
	log_info("job %s has already ended (%s)%s%s", h->cfg->run_id,
		 state ? state : "?", msg ? ": " : "", msg ? msg : "");
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_JOIN_ENDED;
	snprintf(ev.job_state, sizeof(ev.job_state), "%s", state ? state : "");
	agent_rdzv_post(&h->base, &ev);
}

static void joined(struct rdzv_http *h, const struct client_reply *r)
{
	if (!r->json) {
		log_error("bad join answer from rendezvous: not a JSON object");
		post_join_failed(h);
		return;
	}
	if (agent_rdzv_post_joined(&h->base, r->json, h->cfg->nproc,
				   &h->heartbeat_interval_ms) != 0) {
		post_join_failed(h);
		return;
	}
	http_op_cap(&h->heartbeat, h->heartbeat_interval_ms);
	http_op_cap(&h->watch, h->heartbeat_interval_ms);
	/* servers before reruns send no run: their jobs have one */
	if (jsonh_get_u64(r->json, "run", 0, 1, UINT32_MAX, &h->run, NULL, 0) !=
	    0)
		h->run = 0;
}

static void send_join(struct rdzv_http *h);

static void on_join(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	if (r->misconfigured) {
		/* retrying would wait out the join timeout for nothing */
		h->join.call = NULL;
		log_error("cannot talk to rendezvous at %s: %s (check "
			  "--rdzv-endpoint and --rdzv-ca)",
			  client_base_url(h->client), r->error);
		post_join_failed(h);
		return;
	}
	if (!http_op_answered(&h->join, r))
		return;
	if (r->status == 202) { /* the round is still open: wait again */
		send_join(h);
	} else if (r->status == 410) {
		join_ended(h, r);
	} else if (r->status != 200) {
		log_error("rendezvous refused to let node %s join job %s: %s "
			  "(HTTP %ld)",
			  h->node_id, h->cfg->run_id,
			  *r->error ? r->error : "no reason given", r->status);
		post_join_failed(h);
	} else {
		joined(h, r);
	}
}

static void send_join(struct rdzv_http *h)
{
	const struct agent_config *cfg = h->cfg;
	char path[512];
	json_t *b = http_identity(h);
	if (!h->announced) {
		log_info("node %s joining job %s at %s (%d-%d nodes)",
			 h->node_id, cfg->run_id, client_base_url(h->client),
			 cfg->min_nodes, cfg->max_nodes);
		h->announced = 1;
	}
	if (!h->master_port_free)
		h->master_port_free = agent_rdzv_free_port();
	if (h->addr[0])
		json_object_set_new(b, "addr", json_string(h->addr));
	json_object_set_new(b, "nproc", json_integer(cfg->nproc));
	/* the run we took part in: a rejoin after it ended must not be
	 * taken for the first join of a new run */
	if (h->run)
		json_object_set_new(b, "run", json_integer((json_int_t)h->run));
	if (h->master_port_free)
		json_object_set_new(b, "master_port",
				    json_integer(h->master_port_free));
	json_object_set_new(b, "min_nodes", json_integer(cfg->min_nodes));
	json_object_set_new(b, "max_nodes", json_integer(cfg->max_nodes));
	json_object_set_new(b, "max_restarts", json_integer(cfg->max_restarts));
	json_object_set_new(b, "join_timeout",
			    json_real((double)cfg->join_timeout_ms / 1000));
	json_object_set_new(
	    b, "last_call_timeout",
	    json_real((double)cfg->last_call_timeout_ms / 1000));
	json_object_set_new(
	    b, "heartbeat_interval",
	    json_real((double)cfg->heartbeat_interval_ms / 1000));
	json_object_set_new(
	    b, "heartbeat_timeout",
	    json_real((double)cfg->heartbeat_timeout_ms / 1000));
	json_object_set_new(b, "wait_ms", json_integer(JOIN_WAIT_MS));
	http_job_path(h, path, sizeof(path), "join");
	http_op_call(&h->join, "POST", path, b,
		     JOIN_WAIT_MS + cfg->read_timeout_ms, on_join);
	json_decref(b);
}

static void send_watch(struct rdzv_http *h);

static void on_watch(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	int stale_dump;
	if (!http_op_answered(&h->watch, r))
		return;
	stale_dump = r->status == 200 && !heard_dump(h, r) &&
		     json_is_object(json_object_get(r->json, "dump"));
	if (post_action(h, h->watch.round, r))
		return; /* the round is over: no need to watch it */
	if (r->status == 200 && r->json &&
	    json_object_get(r->json, "preempt_step"))
		return; /* the job is preempted: heartbeats carry the rest */
	if (r->status != 200)
		log_warn("watch answered %ld: %s", r->status, r->error);
	if (h->watch.round != h->round)
		return;
	if (stale_dump) {
		/* a server that answers at once while a trigger is open must
		 * not make this a busy loop */
		struct timeval tv = {0, 500 * 1000};
		evtimer_add(h->watch.retry, &tv);
		return;
	}
	send_watch(h); /* a timed-out long-poll: poll again */
}

static void send_watch(struct rdzv_http *h)
{
	char path[900];
	h->watch.round = h->round;
	/* the trigger heard last: the server parks the watch until another
	 * one opens (docs/http-api.md) */
	snprintf(path, sizeof(path),
		 "/v1/jobs/%s/watch?round=%llu&node_id=%s&wait_ms=%d%s%s",
		 h->cfg->run_id, (unsigned long long)h->round, h->node_id,
		 WATCH_WAIT_MS, h->dump_seen[0] ? "&dump_seen=" : "",
		 h->dump_seen);
	http_op_call(&h->watch, "GET", path, NULL,
		     WATCH_WAIT_MS + h->cfg->read_timeout_ms, on_watch);
}

static void on_heartbeat(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	if (!http_op_answered(&h->heartbeat, r))
		return;
	if (r->status == 200)
		heard_dump(h, r);
	if (with_action(r))
		post_action(h, h->heartbeat.round, r);
	else
		log_warn("heartbeat answered %ld: %s", r->status, r->error);
}

static void send_heartbeat(struct rdzv_http *h)
{
	const struct agent_rdzv_loop *loop = &h->base.loop;
	char path[512];
	json_t *b = http_identity(h);
	h->heartbeat.round = h->round;
	json_object_set_new(b, "round", json_integer((json_int_t)h->round));
	/* how this node's workers entered the round, once it is known */
	if (loop->recovery[0] && loop->current->round == h->round) {
		json_object_set_new(b, "recovery", json_string(loop->recovery));
		json_object_set_new(b, "recovery_why",
				    json_string(loop->recovery_why));
	}
	http_job_path(h, path, sizeof(path), "heartbeat");
	http_op_call(&h->heartbeat, "POST", path, b,
		     h->cfg->heartbeat_timeout_ms, on_heartbeat);
	json_decref(b);
}

static void on_hb_timer(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_http *h = arg;
	(void)fd;
	(void)what;
	if (!h->heartbeat.call && !evtimer_pending(h->heartbeat.retry, NULL))
		send_heartbeat(h);
}

static void on_report(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	if (!http_op_answered(&h->report, r))
		return;
	json_decref(h->pending_report);
	h->pending_report = NULL;
	if (with_action(r))
		post_action(h, h->report.round, r);
	else
		log_warn("report answered %ld: %s", r->status, r->error);
	agent_rdzv_post_kind(&h->base, AGENT_EV_REPORT_DONE, h->report.round);
}

/* send_report (re)sends the pending report: retries resend its body, so
 * the round stays the one it names */
static void send_report(struct rdzv_http *h)
{
	char path[512];
	http_job_path(h, path, sizeof(path), "report");
	http_op_call(&h->report, "POST", path, h->pending_report,
		     h->cfg->read_timeout_ms, on_report);
}

static void on_leave(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	h->leave.call = NULL;
	if (client_retryable(r) && ++h->leave_attempts < LEAVE_ATTEMPTS) {
		http_op_retry(&h->leave, r);
		return;
	}
	if (r->status == 200)
		log_info("node %s left job %s", h->node_id, h->cfg->run_id);
	else
		log_warn("could not leave job %s: %s", h->cfg->run_id,
			 r->transport_failed || !*r->error ? "no answer"
							   : r->error);
	agent_rdzv_post_kind(&h->base, AGENT_EV_LEFT, 0);
}

static void send_leave(struct rdzv_http *h)
{
	char path[512];
	json_t *b = http_identity(h);
	http_job_path(h, path, sizeof(path), "leave");
	h->leave.call = client_call(h->client, "POST", path, b,
				    LEAVE_TIMEOUT_MS, on_leave, h);
	json_decref(b);
	if (!h->leave.call)
		agent_rdzv_post_kind(&h->base, AGENT_EV_LEFT, 0);
}

/* on_status posts the job's failures (NULL when there is no usable
 * answer: the loop then reports what this node knows) */
static void on_status(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	struct agent_event ev;
	json_t *failures = NULL;
	h->status.call = NULL;
	if (r->status == 200 && r->json)
		failures = json_object_get(r->json, "failures");
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_STATUS;
	if (json_is_array(failures))
		ev.json = json_incref(failures);
	agent_rdzv_post(&h->base, &ev);
}

static void send_status(struct rdzv_http *h)
{
	char path[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s", h->cfg->run_id);
	h->status.call = client_call(h->client, "GET", path, NULL,
				     h->cfg->read_timeout_ms, on_status, h);
	if (!h->status.call) {
		struct client_reply r = {
		    .transport_failed = 1, .error = "", .body = ""};
		on_status(h, &r);
	}
}

static void on_preempt(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	if (!http_op_answered(&h->preempt, r))
		return;
	json_decref(h->pending_preempt);
	h->pending_preempt = NULL;
	if (r->status == 200 && r->json &&
	    json_object_get(r->json, "preempt_step")) {
		post_action(h, h->preempt.round, r);
		return;
	}
	/* the round or the job ended first: its action says what now */
	if (post_action(h, h->preempt.round, r))
		return;
	log_warn("rendezvous refused the preemption (HTTP %ld): %s", r->status,
		 *r->error ? r->error : "no reason given");
	agent_rdzv_post_kind(&h->base, AGENT_EV_PREEMPT_FAILED, 0);
}

/* send_preempt (re)sends the pending preemption */
static void send_preempt(struct rdzv_http *h)
{
	char path[512];
	http_job_path(h, path, sizeof(path), "preempt");
	http_op_call(&h->preempt, "POST", path, h->pending_preempt,
		     h->cfg->read_timeout_ms, on_preempt);
}

/* ---------------------------------------------------------- interface */

static void http_preempt(struct agent_rdzv *r, uint64_t round, uint64_t step,
			 double step_rate)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	json_t *b = http_identity(h);
	http_op_cancel(&h->preempt);
	json_decref(h->pending_preempt);
	h->preempt.round = round;
	json_object_set_new(b, "round", json_integer((json_int_t)round));
	json_object_set_new(b, "step", json_integer((json_int_t)step));
	json_object_set_new(b, "step_rate", json_real(step_rate));
	h->pending_preempt = b;
	send_preempt(h);
}

static void http_join(struct agent_rdzv *r)
{
	send_join((struct rdzv_http *)r);
}

static void http_round_end(struct agent_rdzv *r)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	http_op_cancel(&h->join);
	http_op_cancel(&h->watch);
	http_op_cancel(&h->heartbeat);
	if (h->hb_timer)
		evtimer_del(h->hb_timer);
}

static void http_round_begin(struct agent_rdzv *r, uint64_t round)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	struct timeval tv = {(time_t)(h->heartbeat_interval_ms / 1000),
			     (suseconds_t)(h->heartbeat_interval_ms % 1000) *
				 1000};
	http_round_end(r);
	/* a success report of an earlier round (sent from DONE, then the
	 * round ended) is moot now; its body must not stand in for this
	 * round's report */
	http_op_cancel(&h->report);
	json_decref(h->pending_report);
	h->pending_report = NULL;
	h->round = round;
	event_add(h->hb_timer, &tv);
	send_watch(h);
}

static void http_report(struct agent_rdzv *r, uint64_t round, int failed,
			json_t *failures)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	json_t *b = http_identity(h);
	http_op_cancel(&h->report);
	json_decref(h->pending_report);
	h->report.round = round;
	json_object_set_new(b, "round", json_integer((json_int_t)round));
	if (failed) {
		json_object_set_new(b, "status", json_string("failed"));
		json_object_set_new(b, "failures", json_deep_copy(failures));
	} else {
		json_object_set_new(b, "status", json_string("succeeded"));
	}
	h->pending_report = b;
	send_report(h);
}

static void http_cancel(struct agent_rdzv *r)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	http_round_end(r);
	http_op_cancel(&h->report);
	http_op_cancel(&h->status);
	http_op_cancel(&h->preempt);
}

static void http_leave(struct agent_rdzv *r)
{
	send_leave((struct rdzv_http *)r);
}

static void http_status(struct agent_rdzv *r)
{
	send_status((struct rdzv_http *)r);
}

static void http_free(struct agent_rdzv *r)
{
	struct rdzv_http *h = (struct rdzv_http *)r;
	if (!h)
		return;
	http_op_release(&h->join);
	http_op_release(&h->watch);
	http_op_release(&h->heartbeat);
	http_op_release(&h->report);
	http_op_release(&h->leave);
	http_op_release(&h->status);
	http_op_release(&h->preempt);
	json_decref(h->pending_preempt);
	if (h->hb_timer)
		event_free(h->hb_timer);
	client_free(h->client);
	json_decref(h->pending_report);
	free(h);
}

static const struct agent_rdzv_ops http_ops = {
    .name = "dlaunch",
    .join = http_join,
    .round_begin = http_round_begin,
    .round_end = http_round_end,
    .report = http_report,
    .cancel = http_cancel,
    .leave = http_leave,
    .status = http_status,
    .free = http_free,
    .hang_open = http_hang_open,
    .hang_post = http_hang_post,
    .hang_fetch = http_hang_fetch,
    .hang_cancel = http_hang_cancel,
    .preempt = http_preempt,
};

int agent_rdzv_http_new(const struct agent_rdzv_params *p,
			struct agent_rdzv **out, char *err, size_t err_size)
{
	const struct agent_config *cfg = p->cfg;
	struct rdzv_http *h = calloc(1, sizeof(*h));
	int rc;
	if (!h) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	h->base.ops = &http_ops;
	h->base.loop = p->loop;
	h->evb = p->base;
	h->cfg = cfg;
	h->node_id = p->node_id;
	h->incarnation = p->incarnation;
	h->heartbeat_interval_ms = cfg->heartbeat_interval_ms;
	rc = client_new(p->base, cfg->endpoint, cfg->token, cfg->ca_file,
			&h->client, err, err_size);
	if (rc) {
		free(h);
		return rc;
	}
	h->hb_timer = event_new(p->base, -1, EV_PERSIST, on_hb_timer, h);
	if (!h->hb_timer ||
	    http_op_init(&h->join, h, h->evb, h->client, "join", send_join) ||
	    http_op_init(&h->watch, h, h->evb, h->client, "watch",
			 send_watch) ||
	    http_op_init(&h->heartbeat, h, h->evb, h->client, "heartbeat",
			 send_heartbeat) ||
	    http_op_init(&h->report, h, h->evb, h->client, "report",
			 send_report) ||
	    http_op_init(&h->leave, h, h->evb, h->client, "leave",
			 send_leave) ||
	    http_op_init(&h->status, h, h->evb, h->client, "status",
			 send_status) ||
	    http_op_init(&h->preempt, h, h->evb, h->client, "preempt",
			 send_preempt)) {
		http_free(&h->base);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	if (cfg->local_addr)
		snprintf(h->addr, sizeof(h->addr), "%s", cfg->local_addr);
	else
		agent_rdzv_local_addr(cfg->endpoint, RDZV_DEFAULT_PORT, h->addr,
				      sizeof(h->addr));
	h->base.addr = h->addr;
	*out = &h->base;
	return 0;
}
