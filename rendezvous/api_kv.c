/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_kv.c - a job's key-value store over the API (docs/http-api.md,
 * /v1/jobs/{job}/kv/{key}): PUT journals the value, GET answers it or
 * parks until it is there, and the re-check of a parked GET.
 */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"
#include "journal.h"
#include "request.h"

static const char *const CT_BYTES = "application/octet-stream";

static void kv_reply(struct rdzv_api *api, const char *job, const char *key,
		     struct rdzv_response *resp)
{
	const void *data;
	size_t len;
	buf_reset(&resp->body);
	rdzv_kv_get(api->st, job, key, &data, &len);
	if (buf_append(&resp->body, data, len) != 0) {
		api_reply_error(resp, 503, "out of memory");
		return;
	}
	resp->status = 200;
	resp->content_type = CT_BYTES;
}

/* api_kv answers GET and PUT /v1/jobs/{job}/kv/{key} (key validated
 * here); a GET with wait_ms parks until the key is set. */
void api_kv(struct rdzv_api *api, const struct rdzv_request *req,
	    const char *job, const char *key, struct rdzv_response *resp)
{
	char err[512] = "";
	const void *data;
	size_t len;
	uint64_t wait_ms;
	int rc;

	if (!parse_name_valid(key, RDZV_NAME_MAX)) {
		api_reply_error(
		    resp, 400,
		    "key must be 1 to 128 characters of " PARSE_NAME_RULE);
		return;
	}
	if (strcmp(req->method, "PUT") == 0) {
		rc = rdzv_kv_put(api->st, job, key, req->body, req->body_len,
				 err, sizeof(err));
		if (rc) {
			api_reply_error(
			    resp, rc == DL_ELIMIT ? 413 : api_status_of(rc),
			    err);
			if (rc == DL_ELIMIT && strstr(err, "too many"))
				resp->status = 429;
			return;
		}
		if (api->journal && !api->unsaved &&
		    rdzv_journal_kv(api->journal, api->st, job, key, req->body,
				    req->body_len) != 0)
			api_journal_failed(api);
		api_reply_json(resp, 200, json_object());
		return;
	}
	if (request_wait(req, NULL, 0, &wait_ms, err, sizeof(err))) {
		api_reply_error(resp, 400, err);
		return;
	}
	rc = rdzv_kv_get(api->st, job, key, &data, &len);
	if (rc == 0) {
		kv_reply(api, job, key, resp);
	} else if (!rdzv_job_exists(api->st, job)) {
		snprintf(err, sizeof(err), "no job %s", job);
		api_reply_error(resp, 404, err);
	} else if (wait_ms == 0) {
		snprintf(err, sizeof(err), "no key %s in job %s", key, job);
		api_reply_error(resp, 404, err);
	} else {
		api_park(resp, RDZV_POLL_KV, job, req->now_ms + wait_ms);
		snprintf(resp->poll.key, sizeof(resp->poll.key), "%s", key);
	}
}

/* api_poll_kv: a KV get is answered once the key is there, or 404 at
 * its deadline or when the job is gone. */
int api_poll_kv(struct rdzv_api *api, const struct rdzv_poll *poll, int expired,
		struct rdzv_response *resp)
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
	api_reply_error(resp, 404, err);
	return 1;
}
