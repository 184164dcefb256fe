/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_node.c - the events a node posts or watches (docs/http-api.md):
 * join, watch, report, preempt and leave (heartbeats are
 * api_heartbeat.c's), each validated and turned into a state machine
 * event, and the re-check of a parked join or watch. Routing, answers and
 * journaling are api.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "request.h"

void api_park(struct rdzv_response *resp, enum rdzv_poll_kind kind,
	      const char *job, uint64_t deadline_ms)
{
	resp->status = 0;
	resp->poll.kind = kind;
	snprintf(resp->poll.job, sizeof(resp->poll.job), "%s", job);
	resp->poll.deadline_ms = deadline_ms;
}

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
		api_reply_error(resp, 400, err);
		return;
	}
	rc = rdzv_join(api->st, job, &node, &cfg, wait_ms > 0, req->now_ms, &r,
		       err, sizeof(err));
	if (rc < 0) {
		api_reply_state_error(resp, rc, err, &r);
	} else if (rc == RDZV_DONE) {
		api_reply_json(
		    resp, 200,
		    rdzv_assignment_json(api->st, job, node.node_id));
	} else if (wait_ms == 0) {
		api_reply_json(resp, 202, rdzv_waiting_json(api->st, job));
	} else {
		api_park(resp, RDZV_POLL_JOIN, job, req->now_ms + wait_ms);
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
		api_reply_error(resp, 400, err);
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
		api_park(resp, RDZV_POLL_WATCH, job, req->now_ms + wait_ms);
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
		api_reply_error(resp, 400, err);
		return;
	}
	if (strcmp(status, "succeeded") != 0 && strcmp(status, "failed") != 0) {
		api_reply_error(
		    resp, 400,
		    "field 'status' must be \"succeeded\" or \"failed\"");
		return;
	}
	ok = status[0] == 's';
	if (!ok || json_object_get(body, "failures")) {
		json_t *in = json_object_get(body, "failures");
		if (!in && !ok) {
			api_reply_error(
			    resp, 400,
			    "field 'failures' is required with status "
			    "\"failed\"");
			return;
		}
		failures = request_failures(in, err, sizeof(err));
		if (!failures) {
			api_reply_error(resp, 400, err);
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
		api_reply_error(resp, 400, err);
		return;
	}
	if (rate && !json_is_number(rate)) {
		api_reply_error(resp, 400,
				"field 'step_rate' must be a number");
		return;
	}
	rc = rdzv_preempt(api->st, job, node_id, inc, round, step,
			  rate ? json_number_value(rate) : 0, req->now_ms, &r,
			  err, sizeof(err));
	if (rc == DL_EINVAL)
		api_reply_error(resp, 400, err);
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
		api_reply_error(resp, 400, err);
		return;
	}
	rc = rdzv_leave(api->st, job, node_id, inc, req->now_ms, &r, err,
			sizeof(err));
	if (rc < 0)
		api_reply_state_error(resp, rc, err, &r);
	else
		api_reply_json(resp, 200,
			       json_pack("{s:s, s:I}", "state",
					 rdzv_job_state_name(r.state), "round",
					 (json_int_t)r.round));
}

/* api_node_event answers the events a node posts or watches: join,
 * heartbeat, watch, report, preempt, leave. */
void api_node_event(struct rdzv_api *api, const struct rdzv_request *req,
		    enum rdzv_endpoint ep, const char *job,
		    struct rdzv_response *resp)
{
	char err[512] = "";
	json_t *body = NULL;

	/* watches have no body; heartbeats read theirs (api_heartbeat.c) */
	if (ep != RDZV_EP_WATCH && ep != RDZV_EP_HEARTBEAT &&
	    request_body(req, &body, err, sizeof(err))) {
		api_reply_error(resp, 400, err);
		return;
	}
	switch (ep) {
	case RDZV_EP_JOIN: do_join(api, req, job, body, resp); break;
	case RDZV_EP_HEARTBEAT: api_heartbeat(api->st, req, job, resp); break;
	case RDZV_EP_WATCH: do_watch(api, req, job, resp); break;
	case RDZV_EP_REPORT: do_report(api, req, job, body, resp); break;
	case RDZV_EP_LEAVE: do_leave(api, req, job, body, resp); break;
	case RDZV_EP_PREEMPT: do_preempt(api, req, job, body, resp); break;
	default: api_reply_error(resp, 404, "no such path"); break;
	}
	json_decref(body);
}

/* api_poll_join: a held join is answered once its round closed (200
 * with the assignment, unless a change is not yet durable), or when the
 * node lost its place; at its deadline 202 says to join again. */
int api_poll_join(struct rdzv_api *api, const struct rdzv_poll *poll,
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
		api_reply_error(resp, 503, NOT_DURABLE);
		return 1;
	}
	if (rc == RDZV_DONE) {
		api_reply_json(
		    resp, 200,
		    rdzv_assignment_json(api->st, poll->job, poll->node_id));
		return 1;
	}
	if (!expired)
		return 0;
	api_reply_json(resp, 202, rdzv_waiting_json(api->st, poll->job));
	return 1;
}

/* api_poll_watch: a watch is answered when the job moved past its
 * round or ended, or at its deadline. */
int api_poll_watch(struct rdzv_api *api, const struct rdzv_poll *poll,
		   uint64_t now_ms, int expired, struct rdzv_response *resp)
{
	struct rdzv_reply r;
	char err[512] = "";
	int rc = rdzv_watch(api->st, poll->job,
			    poll->node_id[0] ? poll->node_id : NULL,
			    poll->incarnation[0] ? poll->incarnation : NULL,
			    poll->round, now_ms, &r, err, sizeof(err));

	if (rc < 0) {
		/* the job was forgotten while we waited */
		api_reply_error(resp, 410, err);
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
