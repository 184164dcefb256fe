/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.c - the rendezvous HTTP API (docs/http-api.md) without the HTTP:
 * routing, strict validation of paths, the translation of the state
 * machine's answers into status codes and JSON, journaling before
 * answering, the server's own endpoints and the re-check of parked polls.
 * The endpoints' bodies and queries are read where they are answered:
 * api_node.c (join, watch, report, preempt, leave), api_heartbeat.c,
 * api_kv.c (the job's store) and api_hang.c (hang triggers and reports).
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

#define REWRITE_RETRY_MS 1000

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
		if (r->replaced)
			json_object_set_new(v, "replaced", json_true());
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

void api_journal_failed(struct rdzv_api *api)
{
	api->journal_failures++;
	api->unsaved = 1;
	api->rewrite_at_ms = 0;
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
		    rdzv_journal_job(api->journal, api->st, name) != 0)
			api_journal_failed(api);
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
		api_kv(api, req, job, key, resp);
	} else {
		api_node_event(api, req, ep, job, resp);
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

int rdzv_api_poll_check(struct rdzv_api *api, const struct rdzv_poll *poll,
			uint64_t now_ms, int expired,
			struct rdzv_response *resp)
{
	api->now_ms = now_ms;
	switch (poll->kind) {
	case RDZV_POLL_JOIN: return api_poll_join(api, poll, expired, resp);
	case RDZV_POLL_WATCH:
		return api_poll_watch(api, poll, now_ms, expired, resp);
	case RDZV_POLL_KV: return api_poll_kv(api, poll, expired, resp);
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
