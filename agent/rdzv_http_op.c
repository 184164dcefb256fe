/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_http_op.c - one request kind of the dlaunch-rdzv backend (join,
 * watch, heartbeat, ...): its call in flight, its retry timer and its
 * backoff (backoff.h: a base of 200 ms doubling to 5 s, each pause drawn
 * from [base/2, base] so that agents that lost the server together do
 * not come back together). The first failure and the recovery are logged
 * once.
 */
#include <event2/event.h>
#include <stdio.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "rdzv_http_int.h"

#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS	 5000

static void http_op_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct http_op *op = arg;
	(void)fd;
	(void)what;
	op->send(op->h);
}

int http_op_init(struct http_op *op, struct rdzv_http *h,
		 struct event_base *evb, struct client *client,
		 const char *what, void (*send)(struct rdzv_http *))
{
	op->h = h;
	op->client = client;
	op->what = what;
	op->send = send;
	op->retry = evtimer_new(evb, http_op_retry_cb, op);
	backoff_init(&op->backoff, BACKOFF_FIRST_MS, BACKOFF_MAX_MS,
		     backoff_seed());
	return op->retry ? 0 : DL_ENOMEM;
}

/* op_cap sets the op's backoff to top out at max_ms (at most the usual
 * cap). The ops that keep a member alive (heartbeat, watch) are capped at
 * the heartbeat interval: a restarted server starts every member's clock
 * at its restore, and a member whose next try came after
 * heartbeat_timeout would be evicted; their pauses still spread over
 * [interval/2, interval]. */
void http_op_cap(struct http_op *op, uint64_t max_ms)
{
	if (max_ms > BACKOFF_MAX_MS || max_ms == 0)
		max_ms = BACKOFF_MAX_MS;
	backoff_init(&op->backoff,
		     max_ms < BACKOFF_FIRST_MS ? max_ms : BACKOFF_FIRST_MS,
		     max_ms, backoff_seed());
}

void http_op_cancel(struct http_op *op)
{
	if (op->call) {
		client_cancel(op->client, op->call);
		op->call = NULL;
	}
	if (op->retry)
		evtimer_del(op->retry);
}

void http_op_release(struct http_op *op)
{
	if (!op->h)
		return;
	http_op_cancel(op);
	if (op->retry)
		event_free(op->retry);
	op->retry = NULL;
}

/* op_retry schedules another attempt after the next pause of the op's
 * backoff. */
void http_op_retry(struct http_op *op, const struct client_reply *r)
{
	struct timeval tv;
	uint64_t pause_ms = backoff_next(&op->backoff);
	if (!op->warned) {
		if (r->transport_failed)
			log_warn("cannot reach rendezvous at %s for %s: %s (is "
				 "dlaunch-rdzv running?); retrying",
				 client_base_url(op->client), op->what,
				 r->error);
		else
			log_warn("rendezvous at %s answered %ld to %s: %s; "
				 "retrying",
				 client_base_url(op->client), r->status,
				 op->what, r->error);
		op->warned = 1;
	}
	tv.tv_sec = (time_t)(pause_ms / 1000);
	tv.tv_usec = (suseconds_t)(pause_ms % 1000) * 1000;
	evtimer_add(op->retry, &tv);
}

/* op_answered takes the steps every answer starts with: the call is over;
 * a transport failure or 5xx is retried with backoff (returns 0: nothing
 * more to do now), anything else resets the backoff (returns 1). */
int http_op_answered(struct http_op *op, const struct client_reply *r)
{
	op->call = NULL;
	if (client_retryable(r)) {
		http_op_retry(op, r);
		return 0;
	}
	if (op->warned)
		log_info("rendezvous reachable again (%s)", op->what);
	op->warned = 0;
	backoff_reset(&op->backoff);
	return 1;
}

/* op_call starts the op's request; one that cannot even be started (out
 * of memory) is retried like one that got no answer. */
void http_op_call(struct http_op *op, const char *method, const char *path,
		  json_t *body, uint64_t timeout_ms, client_cb cb)
{
	op->call =
	    client_call(op->client, method, path, body, timeout_ms, cb, op->h);
	if (!op->call) {
		struct client_reply r = {.transport_failed = 1,
					 .error = "out of memory",
					 .body = ""};
		http_op_retry(op, &r);
	}
}
