/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_int.h - what api.c shares with the files that answer some of its
 * endpoints (api_node.c, api_heartbeat.c, api_kv.c, api_hang.c), private
 * to them.
 */
#ifndef DLAUNCH_RDZV_API_INT_H
#define DLAUNCH_RDZV_API_INT_H

#include <jansson.h>

#include "api.h"

/* The API object (api.h's struct rdzv_api): api.c owns its life. */
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

#define NOT_DURABLE                                                            \
	"the rendezvous cannot journal state changes (is its --state-dir "     \
	"full or failing?); nothing was acknowledged: retry"

/* api_journal_failed: an append to the journal failed; nothing that
 * acknowledges a change is answered until a rewrite of the whole state
 * succeeds (api.c retries it). */
void api_journal_failed(struct rdzv_api *api);

/* api_reply_json answers status with v (taken; NULL: a 500). */
void api_reply_json(struct rdzv_response *resp, int status, json_t *v);
/* api_reply_error answers status with {"error": msg}. */
void api_reply_error(struct rdzv_response *resp, int status, const char *msg);
/* api_status_of: the HTTP status of a DL_E* code from the state. */
int api_status_of(int rc);
/* api_reply_state_error answers a state machine error rc with message
 * err; 409 and 410 carry the job's round, state and action from r. */
void api_reply_state_error(struct rdzv_response *resp, int rc, const char *err,
			   const struct rdzv_reply *r);

/* api_status_json: the status a node is told (round, state, action,
 * restart_count, preempt_step while preempted) as a new object. */
json_t *api_status_json(const struct rdzv_reply *r);
/* api_reply_status answers status with r's status object, written without
 * jansson where it can be (api_heartbeat.c): the same bytes. */
void api_reply_status(struct rdzv_response *resp, int status,
		      const struct rdzv_reply *r);
/* api_reply_status_dump: a heartbeat's or watch's answer (200), with
 * "dump" (the job's open hang trigger) while one is open. */
void api_reply_status_dump(const struct rdzv_state *st,
			   struct rdzv_response *resp,
			   const struct rdzv_reply *r, const char *job,
			   uint64_t now_ms);

/* api_park parks resp as a long poll of kind on job until deadline_ms. */
void api_park(struct rdzv_response *resp, enum rdzv_poll_kind kind,
	      const char *job, uint64_t deadline_ms);

/* api_node_event answers the events a node posts or watches: join,
 * heartbeat, watch, report, preempt and leave (api_node.c). */
void api_node_event(struct rdzv_api *api, const struct rdzv_request *req,
		    enum rdzv_endpoint ep, const char *job,
		    struct rdzv_response *resp);
/* api_poll_join and api_poll_watch re-check a parked join or watch
 * (api_node.c), api_poll_kv a parked GET of a key (api_kv.c): 1 when resp
 * holds the answer, 0 to keep it parked. */
int api_poll_join(struct rdzv_api *api, const struct rdzv_poll *poll,
		  int expired, struct rdzv_response *resp);
int api_poll_watch(struct rdzv_api *api, const struct rdzv_poll *poll,
		   uint64_t now_ms, int expired, struct rdzv_response *resp);
int api_poll_kv(struct rdzv_api *api, const struct rdzv_poll *poll, int expired,
		struct rdzv_response *resp);

/* api_kv answers GET and PUT /v1/jobs/{job}/kv/{key} (api_kv.c). */
void api_kv(struct rdzv_api *api, const struct rdzv_request *req,
	    const char *job, const char *key, struct rdzv_response *resp);

/* api_heartbeat answers POST /v1/jobs/{job}/heartbeat (api_heartbeat.c):
 * the body is read without jansson when it is a flat object of plain
 * strings and integers, with jansson otherwise, by the same rules. */
void api_heartbeat(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp);

/* api_hang_dump answers POST /v1/jobs/{job}/dump, api_hang_post POST and
 * api_hang_get GET /v1/jobs/{job}/hang (api_hang.c). */
void api_hang_dump(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp);
void api_hang_post(struct rdzv_state *st, const struct rdzv_request *req,
		   const char *job, struct rdzv_response *resp);
void api_hang_get(struct rdzv_state *st, const struct rdzv_request *req,
		  const char *job, struct rdzv_response *resp);

/* api_hang_open_other: the job has an open hang trigger other than seen
 * (a trigger id, or NULL for any); watches answer at once for it. */
int api_hang_open_other(const struct rdzv_state *st, const char *job,
			const char *seen, uint64_t now_ms);

#endif
