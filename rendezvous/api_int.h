/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_int.h - what api.c shares with the files that answer some of its
 * endpoints (api_hang.c), private to them.
 */
#ifndef DLAUNCH_RDZV_API_INT_H
#define DLAUNCH_RDZV_API_INT_H

#include <jansson.h>

#include "api.h"

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
