/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_http_int.h - what the files of the dlaunch-rdzv backend share,
 * private to them: rdzv_http.c (the requests of a round and the backend
 * interface), rdzv_http_op.c (a request kind retried with backoff) and
 * rdzv_http_hang.c (the hang diagnosis calls).
 */
#ifndef DLAUNCH_AGENT_RDZV_HTTP_INT_H
#define DLAUNCH_AGENT_RDZV_HTTP_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/backoff.h"
#include "backends.h"

struct event;
struct event_base;

struct rdzv_http;

/* one retried request kind (rdzv_http_op.c) */
struct http_op {
	struct rdzv_http *h; /* passed to send and to the call's callback */
	struct client *client;
	const char *what; /* "join", ... for the log */
	struct client_call *call;
	struct event *retry;
	struct backoff backoff;
	int warned;
	/* the round the request in flight (or being retried) names: its
	 * answer speaks of that round and of no other */
	uint64_t round;
	void (*send)(struct rdzv_http *h);
};

struct rdzv_http {
	struct agent_rdzv base;
	struct event_base *evb;
	const struct agent_config *cfg;
	const char *node_id, *incarnation;
	char addr[256]; /* announced address ("" lets the server see) */
	unsigned master_port_free; /* port picked for our joins */
	uint64_t heartbeat_interval_ms;
	uint64_t round; /* of round_begin */
	uint64_t run;	/* of the job, from our last assignment (0: none) */
	int announced;	/* "joining" logged */
	int displaced;	/* a later join took this node's id (409 "replaced") */
	int leave_attempts;
	struct client *client;
	struct http_op join, watch, heartbeat, report, leave, status, preempt;
	json_t *pending_preempt; /* body of the preemption being asked */
	struct event *hb_timer;
	json_t *pending_report; /* body of the report being sent */
	/* hang diagnosis (docs/hangs.md): one call of each kind at most */
	struct client_call *hang_open_call, *hang_post_call, *hang_fetch_call;
	char hang_kind[32];
	char dump_seen[72]; /* the last trigger id an answer carried */
};

/* --- rdzv_http_op.c --- */

/* http_op_init sets op up for h: each attempt calls send(h) through
 * client; its retry timer lives on evb. DL_ENOMEM when the timer cannot
 * be made. */
int http_op_init(struct http_op *op, struct rdzv_http *h,
		 struct event_base *evb, struct client *client,
		 const char *what, void (*send)(struct rdzv_http *));
/* http_op_cap: the op's backoff tops out at max_ms (at most the usual
 * cap; 0: the usual cap). */
void http_op_cap(struct http_op *op, uint64_t max_ms);
/* http_op_cancel cancels the call in flight and the pending retry. */
void http_op_cancel(struct http_op *op);
/* http_op_release cancels and frees the op's timer (an op never set up
 * is fine). */
void http_op_release(struct http_op *op);
/* http_op_retry schedules another attempt after the backoff's next pause
 * (the first failure is logged once, from r). */
void http_op_retry(struct http_op *op, const struct client_reply *r);
/* http_op_answered: the call is over; 0 when r is retried (nothing more
 * to do now), 1 when it is an answer to act on (the backoff is reset). */
int http_op_answered(struct http_op *op, const struct client_reply *r);
/* http_op_call starts the op's request (body borrowed), cb(h, reply) at
 * its end; one that cannot start is retried. */
void http_op_call(struct http_op *op, const char *method, const char *path,
		  json_t *body, uint64_t timeout_ms, client_cb cb);

/* --- rdzv_http.c --- */

/* http_job_path: "/v1/jobs/{job}/{what}" into out. */
void http_job_path(struct rdzv_http *h, char *out, size_t size,
		   const char *what);
/* http_identity: a new object {node_id, incarnation} of this node. */
json_t *http_identity(struct rdzv_http *h);

/* --- rdzv_http_hang.c: the backend's hang_* functions (rdzv/rdzv.h) --- */

void http_hang_open(struct agent_rdzv *rr, const char *kind);
void http_hang_post(struct agent_rdzv *rr, json_t *report);
void http_hang_fetch(struct agent_rdzv *rr, const char *id);
void http_hang_cancel(struct agent_rdzv *rr);

#endif
