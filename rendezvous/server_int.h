/*
 * server_int.h - the server object shared by server.c (lifecycle, binding,
 * TLS, timer) and http.c (requests and parked long polls). Private.
 */
#ifndef DLAUNCH_RDZV_SERVER_INT_H
#define DLAUNCH_RDZV_SERVER_INT_H

#include <event2/event.h>
#include <event2/http.h>
#include <openssl/ssl.h>

#include "api.h"
#include "dlaunch/rdzv_server.h"
#include "journal.h"
#include "metrics.h"

struct pending;

struct rdzv_server {
	struct event_base *base;
	struct evhttp *http;
	struct rdzv_state *st;
	struct rdzv_api *api;
	struct rdzv_journal *journal;
	struct rdzv_metrics *metrics;
	SSL_CTX *ssl_ctx;
	char *token;
	char host[256];
	uint16_t port;
	struct event *tick_timer;
	uint64_t tick_at_ms;	 /* when tick_timer fires; UINT64_MAX: idle */
	struct pending *pending; /* parked long polls, a doubly linked list */
	uint64_t npending;
	int draining; /* new requests get 503 */
};

/* http_request_cb is evhttp's handler for every request. */
void http_request_cb(struct evhttp_request *req, void *arg);
/* http_after_event journals, wakes the parked polls of the jobs that
 * changed and re-arms the timer; run after every event fed to the state. */
void http_after_event(struct rdzv_server *srv);
/* http_drain answers every parked long poll with 503. */
void http_drain(struct rdzv_server *srv);
/* server_schedule_tick re-arms the state machine's timer. */
void server_schedule_tick(struct rdzv_server *srv);

#endif
