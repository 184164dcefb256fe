/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_hang.c - the hang diagnosis endpoints of docs/http-api.md: POST
 * /v1/jobs/{job}/dump opens a trigger, POST /v1/jobs/{job}/hang stores a
 * node's report for it, GET /v1/jobs/{job}/hang answers the reports with
 * their analysis; and the "dump" field heartbeat and watch answers carry
 * while a trigger is open. Validation here, the rules in hangs.c.
 */
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "request.h"

/* optional_name reads an optional name field (at most max_len bytes) into
 * out ("" when absent). */
static int optional_name(json_t *body, const char *key, size_t max_len,
			 char *out, char *err, size_t err_size)
{
	const char *s = NULL;
	out[0] = '\0';
	if (jsonh_get_str(body, key, 0, max_len, &s, err, err_size))
		return DL_EINVAL;
	if (!s)
		return 0;
	if (!parse_name_valid(s, max_len))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field '%s' must be 1 to %zu characters of "
				 "" PARSE_NAME_RULE,
				 key, max_len);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static uint64_t wall_of(const struct rdzv_request *req)
{
	return req->wall_ms ? req->wall_ms : clock_wall_ms();
}

void api_hang_dump(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp)
{
	char node_id[RDZV_NAME_MAX + 1], inc[RDZV_INCARNATION_MAX + 1];
	char by[RDZV_NAME_MAX + 1], err[512] = "";
	enum rdzv_hang_kind kind = RDZV_HANG_DUMP;
	const char *kind_s = NULL;
	json_t *body = NULL, *out = NULL;
	int rc;

	/* every field is optional: an empty body is a plain dump by "cli" */
	if (req->body_len && request_body(req, &body, err, sizeof(err)))
		goto bad;
	if (optional_name(body, "node_id", RDZV_NAME_MAX, node_id, err,
			  sizeof(err)) ||
	    optional_name(body, "incarnation", RDZV_INCARNATION_MAX, inc, err,
			  sizeof(err)) ||
	    optional_name(body, "by", RDZV_NAME_MAX, by, err, sizeof(err)) ||
	    jsonh_get_str(body, "kind", 0, 32, &kind_s, err, sizeof(err)))
		goto bad;
	if (kind_s && rdzv_hang_kind_parse(kind_s, &kind)) {
		snprintf(err, sizeof(err),
			 "field 'kind' must be one of dump, progress-timeout, "
			 "stall, exit");
		goto bad;
	}
	if (!by[0])
		snprintf(by, sizeof(by), "%s", node_id[0] ? node_id : "cli");
	rc = rdzv_hang_trigger(st, job, node_id, inc, kind, by, req->now_ms,
			       wall_of(req), &out, err, sizeof(err));
	if (rc)
		api_reply_error(resp, api_status_of(rc), err);
	else
		api_reply_json(resp, 200, out);
	json_decref(body);
	return;
bad:
	json_decref(body);
	api_reply_error(resp, 400, err);
}

void api_hang_post(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp)
{
	char inc[RDZV_INCARNATION_MAX + 1], err[512] = "";
	json_t *body = NULL;
	int rc, complete = 0;

	if (req->body_len > RDZV_HANG_REPORT_MAX_BYTES) {
		snprintf(err, sizeof(err),
			 "a node report is at most %u bytes (this one has "
			 "%zu): cut its stacks",
			 RDZV_HANG_REPORT_MAX_BYTES, req->body_len);
		api_reply_error(resp, 413, err);
		return;
	}
	if (request_body(req, &body, err, sizeof(err)) ||
	    request_query_name(req->query, "incarnation", RDZV_INCARNATION_MAX,
			       inc, sizeof(inc), err, sizeof(err))) {
		json_decref(body);
		api_reply_error(resp, 400, err);
		return;
	}
	if (!inc[0] && optional_name(body, "incarnation", RDZV_INCARNATION_MAX,
				     inc, err, sizeof(err))) {
		json_decref(body);
		api_reply_error(resp, 400, err);
		return;
	}
	rc = rdzv_hang_report(st, job, inc[0] ? inc : NULL, body, req->body_len,
			      req->now_ms, wall_of(req), &complete, err,
			      sizeof(err));
	if (rc)
		api_reply_error(resp, rc == DL_ELIMIT ? 413 : api_status_of(rc),
				err);
	else
		api_reply_json(
		    resp, 200,
		    json_pack(
			"{s:O, s:b}", "id",
			json_object_get(json_object_get(body, "trigger"), "id"),
			"complete", complete));
	json_decref(body);
}

void api_hang_get(struct rdzv_state *st, const struct rdzv_request *req,
		  const char *job, struct rdzv_response *resp)
{
	char id[RDZV_HANG_ID_MAX + 1], err[512] = "";
	json_t *out;

	if (request_query_name(req->query, "id", RDZV_HANG_ID_MAX, id,
			       sizeof(id), err, sizeof(err))) {
		api_reply_error(resp, 400, err);
		return;
	}
	if (!rdzv_job_exists(st, job)) {
		snprintf(err, sizeof(err), "no job %s", job);
		api_reply_error(resp, 404, err);
		return;
	}
	out = rdzv_hang_json(st, job, id[0] ? id : NULL, req->now_ms,
			     wall_of(req));
	if (!out && id[0]) {
		snprintf(err, sizeof(err),
			 "no trigger %s in job %s (only the last %d are kept)",
			 id, job, RDZV_HANG_KEPT);
		api_reply_error(resp, 404, err);
		return;
	}
	api_reply_json(resp, 200, out);
}

int api_hang_open_other(const struct rdzv_state *st, const char *job,
			const char *seen, uint64_t now_ms)
{
	json_t *d = rdzv_hang_open_json(st, job, now_ms);
	const char *id = json_string_value(json_object_get(d, "id"));
	int other = id && (!seen || strcmp(id, seen) != 0);
	json_decref(d);
	return other;
}
