/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.h - the HTTP front of the rendezvous server (private to rendezvous/).
 *
 * http.c translates: an evhttp request into a struct rdzv_request for api.c
 * and its struct rdzv_response back into one reply; it authenticates,
 * counts replies for /metrics and keeps the parked long polls (their
 * deadlines, client hang-ups and re-checks).
 *
 * The layering runs one way: server.c -> http.c -> api.c -> the state
 * machine. http.c never runs the work that follows an event itself; every
 * time it has fed an event to the api (a request, a poll expiring or being
 * abandoned) it calls the after_event hook its owner gave it, and the owner
 * (server.c) commits the changes, which re-checks parked polls through
 * http_wake_job, and re-arms the state machine's timer.
 */
#ifndef DLAUNCH_RDZV_HTTP_H
#define DLAUNCH_RDZV_HTTP_H

#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>

#include "api.h"
#include "journal.h"

/* What an event asks of the after-event step. */
enum http_after {
	/* the state may have changed: commit (journal, wake parked polls)
	 * and re-arm the timer */
	HTTP_AFTER_CHANGE = 0,
	/* a heartbeat or watch: it changes no membership and only moves
	 * its node's deadline later, so an armed timer fires no later than
	 * it must (early is harmless: the tick finds nothing and re-arms);
	 * commit, and arm the timer only when it is idle. This skips the
	 * deadline scan over every member on the hottest path. */
	HTTP_AFTER_SIGN_OF_LIFE,
	/* a parked poll ended unanswered: deadlines may move, nothing to
	 * commit; re-arm the timer */
	HTTP_AFTER_POLL_END,
};

struct http_config {
	struct event_base *base;
	struct rdzv_api *api;		    /* borrowed */
	const struct rdzv_state *st;	    /* borrowed, for /metrics */
	const struct rdzv_journal *journal; /* borrowed, NULL: none */
	const char *token;		    /* copied; NULL: no auth */
	int tls; /* TLS connections: no hang-up watch (records are not EOF) */
	void (*after_event)(void *ctx, enum http_after what);
	void *ctx;
};

struct rdzv_http;

/* http_new: the front described by cfg; NULL when out of memory. */
struct rdzv_http *http_new(const struct http_config *cfg);
/* http_free answers the parked polls (503) and frees; NULL is allowed. */
void http_free(struct rdzv_http *h);

/* http_request_cb is evhttp's handler for every request; arg is the
 * struct rdzv_http. Every request ends in exactly one reply. */
void http_request_cb(struct evhttp_request *req, void *arg);

/* http_wake_job re-checks the polls parked on job and answers those that
 * can be answered (ctx is the struct rdzv_http); it is the wake callback
 * of rdzv_api_commit and feeds no further event. */
void http_wake_job(void *ctx, const char *job);

/* http_drain answers every parked long poll with 503 and, from now on,
 * every new request too ("Connection: close"). */
void http_drain(struct rdzv_http *h);

#endif
