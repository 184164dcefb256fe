/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - the rendezvous HTTP API (docs/http-api.md) without the HTTP:
 * routing, strict validation of paths, queries and JSON bodies, the
 * translation into state machine events and of its answers into status
 * codes and JSON, journaling before answering.
 */
#include "api.h"
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "journal.h"
#include "page.h"
#include "request.h"

#define RESP_MAX_BYTES (256u * 1024 * 1024)

static const char *const CT_JSON = "application/json";
static const char *const CT_TEXT = "text/plain; charset=utf-8";
static const char *const CT_BYTES = "application/octet-stream";

struct rdzv_api {
	struct rdzv_state *st;
	struct rdzv_journal *journal;
	char (*wake)[RDZV_NAME_MAX + 1]; /* jobs to wake at commit */
	size_t nwake, wake_cap;
	/* unsaved: a change the journal could not take (a full or failing
	 * disk). Until a rewrite of the whole state succeeds, no answer that
	 * acknowledges a change leaves: such requests get 503 and retry. */
	int unsaved;
	uint64_t rewrite_at_ms;	   /* the next rewrite attempt */
	uint64_t journal_failures; /* failed appends and rewrites */
	uint64_t now_ms;	   /* of the event being handled */
	size_t max_body_bytes;	   /* of every request but hang reports */
};

#define REWRITE_RETRY_MS 1000
#define NOT_DURABLE                                                            \
	"the rendezvous cannot journal state changes (is its --state-dir "     \
	"full or failing?); nothing was acknowledged: retry"

struct rdzv_api *rdzv_api_new(struct rdzv_state *st,
			      struct rdzv_journal *journal)
{
	struct rdzv_api *api = calloc(1, sizeof(*api));
	if (!api)
		return NULL;
	api->st = st;
	api->journal = journal;
	api->max_body_bytes = 64 * 1024;
	return api;
}

void rdzv_api_set_max_body(struct rdzv_api *api, size_t bytes)
{
	api->max_body_bytes = bytes;
}

void rdzv_api_free(struct rdzv_api *api)
{
	if (!api)
		return;
	free(api->wake);
	free(api);
}

void rdzv_response_init(struct rdzv_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	buf_init(&resp->body, RESP_MAX_BYTES);
	resp->content_type = CT_JSON;
	resp->endpoint = RDZV_EP_OTHER;
}

void rdzv_response_release(struct rdzv_response *resp)
{
	buf_release(&resp->body);
}

const char *rdzv_endpoint_name(enum rdzv_endpoint ep)
{
	static const char *const names[RDZV_EP_COUNT] = {
	    "join",    "heartbeat", "watch", "report",	"leave",
	    "jobs",    "job",	    "kv",    "dump",	"hang",
	    "healthz", "metrics",   "page",  "preempt", "other"};
	return (unsigned)ep < RDZV_EP_COUNT ? names[ep] : "other";
}

/* --- answers --- */

static void reply_json(struct rdzv_response *resp, int status, json_t *v)
{
	buf_reset(&resp->body);
	resp->status = status;
	resp->content_type = CT_JSON;
	if (!v || jsonh_dump(v, &resp->body) != 0) {
		buf_reset(&resp->body);
		buf_append_str(&resp->body,
			       "{\"error\":\"cannot encode the answer\"}");
		resp->status = 500;
	}
	json_decref(v);
}

static void reply_error(struct rdzv_response *resp, int status, const char *msg,
			const struct rdzv_reply *r)
{
	json_t *v = json_pack("{s:s}", "error", msg);
	if (v && r) {
		json_object_set_new(v, "round",
				    json_integer((json_int_t)r->round));
		json_object_set_new(v, "state",
				    json_string(rdzv_job_state_name(r->state)));
		json_object_set_new(v, "action",
				    json_string(rdzv_action_name(r->action)));
		json_object_set_new(v, "restart_count",
				    json_integer(r->restart_count));
	}
	reply_json(resp, status, v);
}

static int status_of(int rc)
{
	switch (rc) {
	case DL_EINVAL:
	case DL_ERANGE: return 400;
	case DL_EAUTH: return 401;
	case DL_ENOTFOUND: return 404;
	case DL_ECONFLICT:
	case DL_ESTALE: return 409;
	case DL_EGONE: return 410;
	case DL_ELIMIT: return 429;
	default: return 503;
	}
}

void api_reply_json(struct rdzv_response *resp, int status, json_t *v)
{
	reply_json(resp, status, v);
}

void api_reply_error(struct rdzv_response *resp, int status, const char *msg)
{
	reply_error(resp, status, msg, NULL);
}

int api_status_of(int rc)
{
	return status_of(rc);
}

/* reply_state_error answers a state machine error; 409 and 410 carry the
 * job's round, state and action. */
void api_reply_state_error(struct rdzv_response *resp, int rc, const char *err,
			   const struct rdzv_reply *r)
{
	int status = status_of(rc);
	reply_error(resp, status, err,
		    (status == 409 || status == 410) && r ? r : NULL);
}

json_t *api_status_json(const struct rdzv_reply *r)
{
	json_t *v =
	    json_pack("{s:I, s:s, s:s, s:I}", "round", (json_int_t)r->round,
		      "state", rdzv_job_state_name(r->state), "action",
		      rdzv_action_name(r->action), "restart_count",
		      (json_int_t)r->restart_count);
	/* a preempted job's stop step goes with every answer to a node */
	if (v && r->preempt_step)
		json_object_set_new(v, "preempt_step",
				    json_integer((json_int_t)r->preempt_step));
	return v;
}

/* --- journal and wake-ups --- */

static void want_wake(struct rdzv_api *api, const char *job)
{
	for (size_t i = 0; i < api->nwake; i++)
		if (strcmp(api->wake[i], job) == 0)
			return;
	if (api->nwake == api->wake_cap) {
		size_t cap = api->wake_cap ? api->wake_cap * 2 : 8;
		void *p = realloc(api->wake, cap * sizeof(api->wake[0]));
		if (!p)
			return;
		api->wake = p;
		api->wake_cap = cap;
	}
	memcpy(api->wake[api->nwake++], job, RDZV_NAME_MAX + 1);
}

/* journal_changes journals every job the last event changed; the answer
 * must not leave before this returns. */
static void journal_changes(struct rdzv_api *api)
{
	char name[RDZV_NAME_MAX + 1];
	unsigned what;
	while ((what = rdzv_state_pop_changed(api->st, name))) {
		/* while unsaved, the rewrite below takes every change */
		if ((what & RDZV_CHANGED_JOB) && api->journal &&
		    !api->unsaved &&
		    rdzv_journal_job(api->journal, api->st, name) != 0) {
			api->journal_failures++;
			api->unsaved = 1;
			api->rewrite_at_ms = 0;
		}
		if (what & RDZV_CHANGED_WAKE)
			want_wake(api, name);
	}
	if (api->unsaved && api->now_ms >= api->rewrite_at_ms) {
		if (rdzv_journal_rewrite(api->journal, api->st) == 0) {
			api->unsaved = 0;
			log_info("event=journal_recovered");
		} else {
			api->journal_failures++;
			api->rewrite_at_ms = api->now_ms + REWRITE_RETRY_MS;
		}
	}
}

void rdzv_api_commit(struct rdzv_api *api,
		     void (*wake)(void *ctx, const char *job), void *ctx)
{
	char name[RDZV_NAME_MAX + 1];
	journal_changes(api);
	while (api->nwake) {
		/* a wake-up may change state and queue more wake-ups */
		memcpy(name, api->wake[--api->nwake], sizeof(name));
		if (wake)
			wake(ctx, name);
		journal_changes(api);
	}
}

uint64_t rdzv_api_journal_failures(const struct rdzv_api *api)
{
	return api->journal_failures;
}

int rdzv_api_durable(const struct rdzv_api *api)
{
	return !api->unsaved;
}

void rdzv_api_tick(struct rdzv_api *api, uint64_t now_ms)
{
	api->now_ms = now_ms;
	rdzv_state_tick(api->st, now_ms);
	journal_changes(api);
}

static void park(struct rdzv_response *resp, enum rdzv_poll_kind kind,
		 const char *job, uint64_t deadline_ms)
{
	resp->status = 0;
	resp->poll.kind = kind;
	snprintf(resp->poll.job, sizeof(resp->poll.job), "%s", job);
	resp->poll.deadline_ms = deadline_ms;
}

/* --- endpoints --- */

static void do_join(struct rdzv_api *api, const struct rdzv_request *req,
		    const char *job, json_t *body, struct rdzv_response *resp)
{
	struct rdzv_node_info node;
	struct rdzv_job_config cfg;
	struct rdzv_reply r;
	uint64_t wait_ms;
	char err[512] = "";
	int rc;

	if (request_join(req, body, &node, &cfg, &wait_ms, err, sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	rc = rdzv_join(api->st, job, &node, &cfg, wait_ms > 0, req->now_ms, &r,
		       err, sizeof(err));
	if (rc < 0) {
		api_reply_state_error(resp, rc, err, &r);
	} else if (rc == RDZV_DONE) {
		reply_json(resp, 200,
			   rdzv_assignment_json(api->st, job, node.node_id));
	} else if (wait_ms == 0) {
		reply_json(resp, 202, rdzv_waiting_json(api->st, job));
	} else {
		park(resp, RDZV_POLL_JOIN, job, req->now_ms + wait_ms);
		memcpy(resp->poll.node_id, node.node_id, sizeof(node.node_id));
		memcpy(resp->poll.incarnation, node.incarnation,
		       sizeof(node.incarnation));
	}
}

static void do_watch(struct rdzv_api *api, const struct rdzv_request *req,
		     const char *job, struct rdzv_response *resp)
{
	char node_id[RDZV_NAME_MAX + 1], inc[RDZV_INCARNATION_MAX + 1];
	char seen[RDZV_HANG_ID_MAX + 1], err[512] = "";
	struct rdzv_reply r;
	uint64_t round = 0, wait_ms;
	int rc;

	if (request_query_u64(req->query, "round", 1, 0, UINT64_MAX / 2, &round,
			      err, sizeof(err)) ||
	    request_query_name(req->query, "node_id", RDZV_NAME_MAX, node_id,
			       sizeof(node_id), err, sizeof(err)) ||
	    request_query_name(req->query, "incarnation", RDZV_INCARNATION_MAX,
			       inc, sizeof(inc), err, sizeof(err)) ||
	    request_query_name(req->query, "dump_seen", RDZV_HANG_ID_MAX, seen,
			       sizeof(seen), err, sizeof(err)) ||
	    request_wait(req, NULL, RDZV_WAIT_DEFAULT_MS, &wait_ms, err,
			 sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	rc = rdzv_watch(api->st, job, node_id[0] ? node_id : NULL,
			inc[0] ? inc : NULL, round, req->now_ms, &r, err,
			sizeof(err));
	if (rc < 0) {
		api_reply_state_error(resp, rc, err, &r);
	} else if (rc == RDZV_DONE || wait_ms == 0 ||
		   (seen[0] &&
		    api_hang_open_other(api->st, job, seen, req->now_ms))) {
		api_reply_status_dump(api->st, resp, &r, job, req->now_ms);
	} else {
		park(resp, RDZV_POLL_WATCH, job, req->now_ms + wait_ms);
		memcpy(resp->poll.node_id, node_id, sizeof(node_id));
		memcpy(resp->poll.incarnation, inc, sizeof(inc));
		resp->poll.round = round;
		resp->poll.hang_seq = rdzv_hang_seq(api->st, job);
	}
}

static void do_report(struct rdzv_api *api, const struct rdzv_request *req,
		      const char *job, json_t *body, struct rdzv_response *resp)
{
	char node_id[RDZV_NAME_MAX + 1], inc[RDZV_INCARNATION_MAX + 1];
	char err[512] = "";
	const char *status = NULL;
	json_t *failures = NULL;
	struct rdzv_reply r;
	uint64_t round;
	int rc, ok;

	if (request_node_round(body, node_id, inc, &round, err, sizeof(err)) ||
	    jsonh_get_str(body, "status", 1, 16, &status, err, sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	if (strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0) {
		reply_error(
		    resp, 400,
		    "field 'status' must be \"succeeded\" or \"failed\"", NULL);
		return;
	}
	ok = status[0] == 's';
	if (!ok || json_object_get(body, "failures")) {
		json_t *in = json_object_get(body, "failures");
		if (!in && !ok) {
			reply_error(resp, 400,
				    "field 'failures' is required with status "
				    "\"failed\"",
				    NULL);
			return;
		}
		failures = request_failures(in, err, sizeof(err));
		if (!failures) {
			reply_error(resp, 400, err, NULL);
			return;
		}
	}
	rc = rdzv_report(api->st, job, node_id, inc, round, ok, failures,
			 req->now_ms, &r, err, sizeof(err));
	json_decref(failures);
	if (rc < 0)
		api_reply_state_error(resp, rc, err, &r);
	else
		api_reply_status(resp, 200, &r);
}

/* do_preempt: POST /v1/jobs/{job}/preempt {node_id, incarnation, round,
 * step, step_rate}: the node was told to stop; the answer carries the
 * job's stop step (preempt.c) */
static void do_preempt(struct rdzv_api *api, const struct rdzv_request *req,
		       const char *job, json_t *body,
		       struct rdzv_response *resp)
{
	char node_id[RDZV_NAME_MAX + 1], inc[RDZV_INCARNATION_MAX + 1];
	char err[512] = "";
	json_t *rate = json_object_get(body, "step_rate");
	struct rdzv_reply r;
	uint64_t round, step;
	int rc;

	if (request_node_round(body, node_id, inc, &round, err, sizeof(err)) ||
	    jsonh_get_u64(body, "step", 1, 0, UINT64_MAX / 4, &step, err,
			  sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	if (rate && !json_is_number(rate)) {
		reply_error(resp, 400, "field 'step_rate' must be a number",
			    NULL);
		return;
	}
	rc = rdzv_preempt(api->st, job, node_id, inc, round, step,
			  rate ? json_number_value(rate) : 0, req->now_ms, &r,
			  err, sizeof(err));
	if (rc == DL_EINVAL)
		reply_error(resp, 400, err, NULL);
	else if (rc < 0)
		api_reply_state_error(resp, rc, err, &r);
	else
		api_reply_status(resp, 200, &r);
}

static void do_leave(struct rdzv_api *api, const struct rdzv_request *req,
		     const char *job, json_t *body, struct rdzv_response *resp)
{
	char node_id[RDZV_NAME_MAX + 1], inc[RDZV_INCARNATION_MAX + 1];
	char err[512] = "";
	struct rdzv_reply r;
	int rc;

	if (request_node_round(body, node_id, inc, NULL, err, sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	rc = rdzv_leave(api->st, job, node_id, inc, req->now_ms, &r, err,
			sizeof(err));
	if (rc < 0)
		api_reply_state_error(resp, rc, err, &r);
	else
		reply_json(resp, 200,
			   json_pack("{s:s, s:I}", "state",
				     rdzv_job_state_name(r.state), "round",
				     (json_int_t)r.round));
}

static void kv_reply(struct rdzv_api *api, const char *job, const char *key,
		     struct rdzv_response *resp)
{
	const void *data;
	size_t len;
	buf_reset(&resp->body);
	rdzv_kv_get(api->st, job, key, &data, &len);
	if (buf_append(&resp->body, data, len) != 0) {
		reply_error(resp, 503, "out of memory", NULL);
		return;
	}
	resp->status = 200;
	resp->content_type = CT_BYTES;
}

static void do_kv(struct rdzv_api *api, const struct rdzv_request *req,
		  const char *job, const char *key, struct rdzv_response *resp)
{
	char err[512] = "";
	const void *data;
	size_t len;
	uint64_t wait_ms;
	int rc;

	if (!parse_name_valid(key, RDZV_NAME_MAX)) {
		reply_error(
		    resp, 400,
		    "key must be 1 to 128 characters of " PARSE_NAME_RULE,
		    NULL);
		return;
	}
	if (strcmp(req->method, "PUT") == 0) {
		rc = rdzv_kv_put(api->st, job, key, req->body, req->body_len,
				 err, sizeof(err));
		if (rc) {
			reply_error(resp, rc == DL_ELIMIT ? 413 : status_of(rc),
				    err, NULL);
			if (rc == DL_ELIMIT && strstr(err, "too many"))
				resp->status = 429;
			return;
		}
		if (api->journal && !api->unsaved &&
		    rdzv_journal_kv(api->journal, api->st, job, key, req->body,
				    req->body_len) != 0) {
			api->journal_failures++;
			api->unsaved = 1;
			api->rewrite_at_ms = 0;
		}
		reply_json(resp, 200, json_object());
		return;
	}
	if (request_wait(req, NULL, 0, &wait_ms, err, sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	rc = rdzv_kv_get(api->st, job, key, &data, &len);
	if (rc == 0) {
		kv_reply(api, job, key, resp);
	} else if (!rdzv_job_exists(api->st, job)) {
		snprintf(err, sizeof(err), "no job %s", job);
		reply_error(resp, 404, err, NULL);
	} else if (wait_ms == 0) {
		snprintf(err, sizeof(err), "no key %s in job %s", key, job);
		reply_error(resp, 404, err, NULL);
	} else {
		park(resp, RDZV_POLL_KV, job, req->now_ms + wait_ms);
		snprintf(resp->poll.key, sizeof(resp->poll.key), "%s", key);
	}
}

enum rdzv_endpoint rdzv_api_route(const char *path)
{
	static const struct {
		const char *name;
		enum rdzv_endpoint ep;
	} verbs[] = {{"join", RDZV_EP_JOIN},   {"heartbeat", RDZV_EP_HEARTBEAT},
		     {"watch", RDZV_EP_WATCH}, {"report", RDZV_EP_REPORT},
		     {"leave", RDZV_EP_LEAVE}, {"dump", RDZV_EP_DUMP},
		     {"hang", RDZV_EP_HANG},   {"preempt", RDZV_EP_PREEMPT}};
	const char *rest, *slash;

	if (strcmp(path, "/healthz") == 0)
		return RDZV_EP_HEALTHZ;
	if (strcmp(path, "/metrics") == 0)
		return RDZV_EP_METRICS;
	if (rdzv_page_asset(path, NULL))
		return RDZV_EP_PAGE;
	if (strcmp(path, "/v1/jobs") == 0 || strcmp(path, "/v1/jobs/") == 0)
		return RDZV_EP_JOBS;
	if (strncmp(path, "/v1/jobs/", 9) != 0)
		return RDZV_EP_OTHER;
	rest = path + 9;
	slash = strchr(rest, '/');
	if (!slash)
		return RDZV_EP_JOB;
	rest = slash + 1;
	if (strncmp(rest, "kv/", 3) == 0 && !strchr(rest + 3, '/'))
		return RDZV_EP_KV;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(rest, verbs[i].name) == 0)
			return verbs[i].ep;
	return RDZV_EP_OTHER;
}

static int method_ok(enum rdzv_endpoint ep, const char *method)
{
	switch (ep) {
	case RDZV_EP_JOIN:
	case RDZV_EP_HEARTBEAT:
	case RDZV_EP_REPORT:
	case RDZV_EP_LEAVE:
	case RDZV_EP_PREEMPT:
	case RDZV_EP_DUMP: return strcmp(method, "POST") == 0;
	case RDZV_EP_KV:
		return strcmp(method, "GET") == 0 || strcmp(method, "PUT") == 0;
	case RDZV_EP_HANG:
		return strcmp(method, "GET") == 0 ||
		       strcmp(method, "POST") == 0;
	default: return strcmp(method, "GET") == 0;
	}
}

#define BAD_JOB_NAME "job name must be 1 to 128 characters of " PARSE_NAME_RULE

/* answer_page answers the status page's files: the same page for every
 * path it serves (it reads the job from its own location), its script
 * and style. They hold no data: the page asks the JSON API for it. */
static void answer_page(const char *path, struct rdzv_response *resp)
{
	struct rdzv_page_file f;
	rdzv_page_asset(path, &f);
	buf_reset(&resp->body);
	if (buf_append(&resp->body, f.data, f.len) != 0) {
		reply_error(resp, 500, "out of memory", NULL);
		return;
	}
	resp->status = 200;
	resp->content_type = f.content_type;
}

/* answer_server answers the endpoints about the server rather than a job
 * (healthz, the job list, metrics); returns 1 when ep is one of them. */
static int answer_server(struct rdzv_api *api, enum rdzv_endpoint ep,
			 const char *path, struct rdzv_response *resp)
{
	switch (ep) {
	case RDZV_EP_HEALTHZ:
		if (api->unsaved) {
			reply_error(resp, 503, NOT_DURABLE, NULL);
			return 1;
		}
		buf_reset(&resp->body);
		buf_append_str(&resp->body, "ok\n");
		resp->status = 200;
		resp->content_type = CT_TEXT;
		return 1;
	case RDZV_EP_JOBS:
		reply_json(resp, 200, rdzv_jobs_json(api->st));
		return 1;
	case RDZV_EP_METRICS:
		/* rendered by the HTTP layer, which owns the counters */
		reply_error(resp, 404, "no metrics here", NULL);
		return 1;
	case RDZV_EP_PAGE: answer_page(path, resp); return 1;
	default: return 0;
	}
}

/* job_of copies the {job} of /v1/jobs/{job}[/...] into job and points
 * *rest at what follows it ("" or "/..."); 400 answered when invalid. */
static int job_of(const char *path, char *job, const char **rest,
		  struct rdzv_response *resp)
{
	const char *p = path + 9, *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);

	if (n == 0 || n > RDZV_NAME_MAX) {
		reply_error(resp, 400, BAD_JOB_NAME, NULL);
		return -1;
	}
	memcpy(job, p, n);
	job[n] = '\0';
	if (!parse_name_valid(job, RDZV_NAME_MAX)) {
		reply_error(resp, 400, BAD_JOB_NAME, NULL);
		return -1;
	}
	*rest = p + n;
	return 0;
}

/* answer_job_detail answers GET /v1/jobs/{job}. */
static void answer_job_detail(struct rdzv_api *api,
			      const struct rdzv_request *req, const char *job,
			      struct rdzv_response *resp)
{
	json_t *v = rdzv_job_detail_json(api->st, job, req->now_ms), *hang;
	char err[512];
	if (!v) {
		snprintf(err, sizeof(err), "no job %s", job);
		reply_error(resp, 404, err, NULL);
		return;
	}
	/* the latest hang diagnosis, without its reports */
	hang = rdzv_hang_summary_json(api->st, job, req->now_ms,
				      req->wall_ms ? req->wall_ms
						   : clock_wall_ms());
	if (hang)
		json_object_set_new(v, "hang", hang);
	reply_json(resp, 200, v);
}

/* answer_node_event answers the events a node posts or watches: join,
 * heartbeat, watch, report, leave. */
static void answer_node_event(struct rdzv_api *api,
			      const struct rdzv_request *req,
			      enum rdzv_endpoint ep, const char *job,
			      struct rdzv_response *resp)
{
	char err[512] = "";
	json_t *body = NULL;

	/* watches have no body; heartbeats read theirs (api_heartbeat.c) */
	if (ep != RDZV_EP_WATCH && ep != RDZV_EP_HEARTBEAT &&
	    request_body(req, &body, err, sizeof(err))) {
		reply_error(resp, 400, err, NULL);
		return;
	}
	switch (ep) {
	case RDZV_EP_JOIN: do_join(api, req, job, body, resp); break;
	case RDZV_EP_HEARTBEAT: api_heartbeat(api->st, req, job, resp); break;
	case RDZV_EP_WATCH: do_watch(api, req, job, resp); break;
	case RDZV_EP_REPORT: do_report(api, req, job, body, resp); break;
	case RDZV_EP_LEAVE: do_leave(api, req, job, body, resp); break;
	case RDZV_EP_PREEMPT: do_preempt(api, req, job, body, resp); break;
	default: reply_error(resp, 404, "no such path", NULL); break;
	}
	json_decref(body);
}

static void handle(struct rdzv_api *api, const struct rdzv_request *req,
		   struct rdzv_response *resp)
{
	enum rdzv_endpoint ep = rdzv_api_route(req->path);
	char job[RDZV_NAME_MAX + 1], key[RDZV_NAME_MAX + 1] = "";
	char err[512] = "";
	const char *rest;

	resp->endpoint = ep;
	resp->poll.kind = RDZV_POLL_NONE;
	if (ep == RDZV_EP_OTHER) {
		snprintf(err, sizeof(err), "no such path %.200s", req->path);
		reply_error(resp, 404, err, NULL);
		return;
	}
	if (!method_ok(ep, req->method)) {
		snprintf(err, sizeof(err), "method %.16s not allowed on %.200s",
			 req->method, req->path);
		reply_error(resp, 405, err, NULL);
		return;
	}
	if (answer_server(api, ep, req->path, resp))
		return;
	if (job_of(req->path, job, &rest, resp) != 0)
		return;
	if (ep == RDZV_EP_JOB) {
		answer_job_detail(api, req, job, resp);
		return;
	}
	if (req->body_len > api->max_body_bytes &&
	    !(ep == RDZV_EP_HANG && strcmp(req->method, "POST") == 0)) {
		snprintf(err, sizeof(err),
			 "request body over %zu bytes (the server's "
			 "--max-body)",
			 api->max_body_bytes);
		reply_error(resp, 413, err, NULL);
		return;
	}
	if (ep == RDZV_EP_DUMP || ep == RDZV_EP_HANG) {
		if (ep == RDZV_EP_DUMP)
			api_hang_dump(api->st, req, job, resp);
		else if (strcmp(req->method, "POST") == 0)
			api_hang_post(api->st, req, job, resp);
		else
			api_hang_get(api->st, req, job, resp);
		journal_changes(api);
		return;
	}
	if (ep == RDZV_EP_KV) {
		const char *k = rest + 4; /* after "/kv/" */
		if (strlen(k) > RDZV_NAME_MAX) {
			reply_error(resp, 400, "key is longer than 128 bytes",
				    NULL);
			return;
		}
		snprintf(key, sizeof(key), "%s", k);
		do_kv(api, req, job, key, resp);
	} else {
		answer_node_event(api, req, ep, job, resp);
	}
	journal_changes(api);
}

/* acknowledges: whether a 2xx answer (or a parked poll) to this request
 * tells the client its change took effect */
static int acknowledges(enum rdzv_endpoint ep, const char *method)
{
	return ep == RDZV_EP_JOIN || ep == RDZV_EP_REPORT ||
	       ep == RDZV_EP_LEAVE || ep == RDZV_EP_PREEMPT ||
	       (ep == RDZV_EP_KV && strcmp(method, "PUT") == 0);
}

void rdzv_api_handle(struct rdzv_api *api, const struct rdzv_request *req,
		     struct rdzv_response *resp)
{
	api->now_ms = req->now_ms;
	handle(api, req, resp);
	if (api->unsaved && acknowledges(resp->endpoint, req->method) &&
	    (resp->poll.kind != RDZV_POLL_NONE || resp->status < 300)) {
		resp->poll.kind = RDZV_POLL_NONE;
		reply_error(resp, 503, NOT_DURABLE, NULL);
	}
}

/* poll_check_join: a held join is answered once its round closed (200
 * with the assignment, unless a change is not yet durable), or when the
 * node lost its place; at its deadline 202 says to join again. */
static int poll_check_join(struct rdzv_api *api, const struct rdzv_poll *poll,
			   int expired, struct rdzv_response *resp)
{
	struct rdzv_reply r;
	char err[512] = "";
	int rc = rdzv_join_check(api->st, poll->job, poll->node_id,
				 poll->incarnation, &r, err, sizeof(err));

	if (rc < 0) {
		api_reply_state_error(resp, rc, err, &r);
		return 1;
	}
	if (rc == RDZV_DONE && api->unsaved) {
		reply_error(resp, 503, NOT_DURABLE, NULL);
		return 1;
	}
	if (rc == RDZV_DONE) {
		reply_json(
		    resp, 200,
		    rdzv_assignment_json(api->st, poll->job, poll->node_id));
		return 1;
	}
	if (!expired)
		return 0;
	reply_json(resp, 202, rdzv_waiting_json(api->st, poll->job));
	return 1;
}

/* poll_check_watch: a watch is answered when the job moved past its
 * round or ended, or at its deadline. */
static int poll_check_watch(struct rdzv_api *api, const struct rdzv_poll *poll,
			    uint64_t now_ms, int expired,
			    struct rdzv_response *resp)
{
	struct rdzv_reply r;
	char err[512] = "";
	int rc = rdzv_watch(api->st, poll->job,
			    poll->node_id[0] ? poll->node_id : NULL,
			    poll->incarnation[0] ? poll->incarnation : NULL,
			    poll->round, now_ms, &r, err, sizeof(err));

	if (rc < 0) {
		/* the job was forgotten while we waited */
		reply_error(resp, 410, err, NULL);
		return 1;
	}
	/* a hang trigger opened since it parked answers it at once */
	if (rc == RDZV_WAIT && !expired &&
	    !(rdzv_hang_seq(api->st, poll->job) > poll->hang_seq &&
	      api_hang_open_other(api->st, poll->job, NULL, now_ms)))
		return 0;
	api_reply_status_dump(api->st, resp, &r, poll->job, now_ms);
	return 1;
}

/* poll_check_kv: a KV get is answered once the key is there, or 404 at
 * its deadline or when the job is gone. */
static int poll_check_kv(struct rdzv_api *api, const struct rdzv_poll *poll,
			 int expired, struct rdzv_response *resp)
{
	char err[512];
	const void *data;
	size_t len;

	if (rdzv_kv_get(api->st, poll->job, poll->key, &data, &len) == 0) {
		kv_reply(api, poll->job, poll->key, resp);
		return 1;
	}
	if (!expired && rdzv_job_exists(api->st, poll->job))
		return 0;
	snprintf(err, sizeof(err), "no key %s in job %s", poll->key, poll->job);
	reply_error(resp, 404, err, NULL);
	return 1;
}

int rdzv_api_poll_check(struct rdzv_api *api, const struct rdzv_poll *poll,
			uint64_t now_ms, int expired,
			struct rdzv_response *resp)
{
	api->now_ms = now_ms;
	switch (poll->kind) {
	case RDZV_POLL_JOIN: return poll_check_join(api, poll, expired, resp);
	case RDZV_POLL_WATCH:
		return poll_check_watch(api, poll, now_ms, expired, resp);
	case RDZV_POLL_KV: return poll_check_kv(api, poll, expired, resp);
	case RDZV_POLL_NONE: break;
	}
	reply_error(resp, 500, "no such poll", NULL);
	return 1;
}

void rdzv_api_poll_end(struct rdzv_api *api, const struct rdzv_poll *poll,
		       uint64_t now_ms)
{
	if (poll->kind == RDZV_POLL_JOIN)
		rdzv_join_poll_end(api->st, poll->job, poll->node_id,
				   poll->incarnation, now_ms);
}
