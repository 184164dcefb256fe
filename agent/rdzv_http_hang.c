/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_http_hang.c - the hang diagnosis of the dlaunch-rdzv backend
 * (docs/hangs.md, docs/http-api.md): opening a job's trigger, posting
 * this node's report, fetching the diagnosis. One call of each kind at
 * most, each bounded on its own and not retried; each answer (or its
 * absence) goes to the agent's hang callbacks.
 */
#include <stdio.h>

#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "rdzv_http_int.h"

#define HANG_CALL_MS 2000 /* each hang call's own bound */

static void on_hang_open(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	json_t *t = NULL;
	const char *id = NULL;
	h->hang_open_call = NULL;
	if (r->status == 200 && r->json &&
	    jsonh_get_str(r->json, "id", 1, 64, &id, NULL, 0) == 0) {
		json_t *tm = json_object_get(r->json, "time_ms");
		t = json_pack(
		    "{s:s,s:s,s:s}", "id", id, "kind",
		    json_is_string(json_object_get(r->json, "kind"))
			? json_string_value(json_object_get(r->json, "kind"))
			: h->hang_kind,
		    "by",
		    json_is_string(json_object_get(r->json, "by"))
			? json_string_value(json_object_get(r->json, "by"))
			: h->node_id);
		json_object_set_new(t, "time_ms",
				    json_integer(json_is_integer(tm)
						     ? json_integer_value(tm)
						     : (json_int_t)0));
	} else {
		log_warn("rendezvous at %s could not open a hang trigger: %s "
			 "(HTTP %ld)",
			 client_base_url(h->client),
			 *r->error ? r->error : "no answer", r->status);
	}
	if (h->base.hang.opened)
		h->base.hang.opened(h->base.hang.ctx, t);
	json_decref(t);
}

void http_hang_open(struct agent_rdzv *rr, const char *kind)
{
	struct rdzv_http *h = (struct rdzv_http *)rr;
	char path[512];
	json_t *b = http_identity(h);
	snprintf(h->hang_kind, sizeof(h->hang_kind), "%s", kind);
	json_object_set_new(b, "kind", json_string(kind));
	json_object_set_new(b, "by", json_string(h->node_id));
	http_job_path(h, path, sizeof(path), "dump");
	client_cancel(h->client, h->hang_open_call);
	h->hang_open_call = client_call(h->client, "POST", path, b,
					HANG_CALL_MS, on_hang_open, h);
	json_decref(b);
	if (!h->hang_open_call && h->base.hang.opened)
		h->base.hang.opened(h->base.hang.ctx, NULL);
}

static void on_hang_post(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	h->hang_post_call = NULL;
	if (r->status != 200)
		log_warn("rendezvous at %s did not take this node's hang "
			 "report: %s (HTTP %ld)",
			 client_base_url(h->client),
			 *r->error ? r->error : "no answer", r->status);
	if (h->base.hang.posted)
		h->base.hang.posted(h->base.hang.ctx, r->status == 200);
}

void http_hang_post(struct agent_rdzv *rr, json_t *report)
{
	struct rdzv_http *h = (struct rdzv_http *)rr;
	char path[768];
	snprintf(path, sizeof(path),
		 "/v1/jobs/%s/hang?node_id=%s&incarnation=%s", h->cfg->run_id,
		 h->node_id, h->incarnation);
	client_cancel(h->client, h->hang_post_call);
	h->hang_post_call = client_call(h->client, "POST", path, report,
					HANG_CALL_MS, on_hang_post, h);
	if (!h->hang_post_call && h->base.hang.posted)
		h->base.hang.posted(h->base.hang.ctx, 0);
}

static void on_hang_fetch(void *arg, const struct client_reply *r)
{
	struct rdzv_http *h = arg;
	h->hang_fetch_call = NULL;
	if (h->base.hang.fetched)
		h->base.hang.fetched(h->base.hang.ctx,
				     r->status == 200 ? r->json : NULL);
}

void http_hang_fetch(struct agent_rdzv *rr, const char *id)
{
	struct rdzv_http *h = (struct rdzv_http *)rr;
	char path[512];
	snprintf(path, sizeof(path), "/v1/jobs/%s/hang?id=%s", h->cfg->run_id,
		 id);
	client_cancel(h->client, h->hang_fetch_call);
	h->hang_fetch_call = client_call(h->client, "GET", path, NULL,
					 HANG_CALL_MS, on_hang_fetch, h);
	if (!h->hang_fetch_call && h->base.hang.fetched)
		h->base.hang.fetched(h->base.hang.ctx, NULL);
}

void http_hang_cancel(struct agent_rdzv *rr)
{
	struct rdzv_http *h = (struct rdzv_http *)rr;
	client_cancel(h->client, h->hang_open_call);
	client_cancel(h->client, h->hang_post_call);
	client_cancel(h->client, h->hang_fetch_call);
	h->hang_open_call = h->hang_post_call = h->hang_fetch_call = NULL;
}
