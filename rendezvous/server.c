/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c - the rendezvous server as a library (dlaunch/rdzv_server.h):
 * binds the listener (HTTP or HTTPS), recovers the journal, owns the state
 * machine's timer and the after-event step, and tears everything down in
 * order.
 *
 * Layering: server.c -> http.c (requests, replies, parked polls) -> api.c
 * (validation, answers, durability) -> the state machine. Every event the
 * state machine is fed - a request, a parked poll expiring or abandoned, a
 * timer tick - ends in after_event() here, the one place that commits the
 * changes (journal, wake the parked polls of the jobs that changed) and
 * re-arms the timer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "api.h"
#include "dlaunch/rdzv_server.h"
#include "http.h"
#include "journal.h"

struct rdzv_server {
	struct event_base *base;
	struct evhttp *http;
	struct rdzv_http *front; /* requests, replies and parked polls */
	struct rdzv_state *st;
	struct rdzv_api *api;
	struct rdzv_journal *journal;
	SSL_CTX *ssl_ctx;
	int has_token;
	char host[256];
	uint16_t port;
	struct event *tick_timer;
	uint64_t tick_at_ms; /* when tick_timer fires; UINT64_MAX: idle */
};

void rdzv_server_config_init(struct rdzv_server_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen = "127.0.0.1:29400";
	cfg->max_body_bytes = 64 * 1024;
	cfg->max_header_bytes = 16 * 1024;
	cfg->max_jobs = 1024;
	cfg->max_nodes_per_job = 65536;
	cfg->idle_timeout_ms = 60000;
	cfg->rerun_after_ms = 30000;
}

/* schedule_tick re-arms the timer for the state machine's next deadline. */
static void schedule_tick(struct rdzv_server *srv)
{
	uint64_t at = rdzv_state_next_deadline(srv->st);
	uint64_t now = clock_now_ms(), wait;
	struct timeval tv;
	if (at == srv->tick_at_ms)
		return;
	srv->tick_at_ms = at;
	if (at == UINT64_MAX) {
		evtimer_del(srv->tick_timer);
		return;
	}
	/* +1: the deadline is reached when now >= at */
	wait = at > now ? at - now + 1 : 0;
	tv.tv_sec = (time_t)(wait / 1000);
	tv.tv_usec = (suseconds_t)(wait % 1000) * 1000;
	evtimer_add(srv->tick_timer, &tv);
}

/*
 * after_event is the one step that follows every event fed to the state
 * machine (http.h says which kinds there are): it journals what changed,
 * answers the parked polls that the changes decide (answering feeds no
 * new event, but a wake-up may change state: rdzv_api_commit loops until
 * nothing is left) and re-arms the timer.
 */
static void after_event(void *ctx, enum http_after what)
{
	struct rdzv_server *srv = ctx;
	if (what != HTTP_AFTER_POLL_END)
		rdzv_api_commit(srv->api, http_wake_job, srv->front);
	if (what == HTTP_AFTER_SIGN_OF_LIFE && srv->tick_at_ms != UINT64_MAX)
		return;
	schedule_tick(srv);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_server *srv = arg;
	(void)fd;
	(void)what;
	srv->tick_at_ms = UINT64_MAX;
	rdzv_api_tick(srv->api, clock_now_ms());
	after_event(srv, HTTP_AFTER_CHANGE);
}

static struct bufferevent *tls_bevcb(struct event_base *base, void *arg)
{
	struct rdzv_server *srv = arg;
	SSL *ssl = SSL_new(srv->ssl_ctx);
	if (!ssl)
		return NULL;
	return bufferevent_openssl_socket_new(
	    base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static int setup_tls(struct rdzv_server *srv,
		     const struct rdzv_server_config *cfg, char *err,
		     size_t err_size)
{
	unsigned long e;
	srv->ssl_ctx = SSL_CTX_new(TLS_server_method());
	if (!srv->ssl_ctx) {
		snprintf(err, err_size, "cannot create a TLS context");
		return DL_ENOMEM;
	}
	SSL_CTX_set_min_proto_version(srv->ssl_ctx, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(srv->ssl_ctx,
					       cfg->tls_cert_file) != 1) {
		e = ERR_get_error();
		snprintf(err, err_size, "cannot load TLS certificate %s: %s",
			 cfg->tls_cert_file, ERR_reason_error_string(e));
		return DL_EINVAL;
	}
	if (SSL_CTX_use_PrivateKey_file(srv->ssl_ctx, cfg->tls_key_file,
					SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(srv->ssl_ctx) != 1) {
		e = ERR_get_error();
		snprintf(err, err_size,
			 "cannot load TLS key %s (or it does not match the "
			 "certificate): %s",
			 cfg->tls_key_file, ERR_reason_error_string(e));
		return DL_EINVAL;
	}
	evhttp_set_bevcb(srv->http, tls_bevcb, srv);
	return 0;
}

static int is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (strcmp(host, "localhost") == 0)
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

#define RDZV_LISTEN_BACKLOG 65535

static int bind_listener(struct rdzv_server *srv, const char *addr, char *err,
			 size_t err_size)
{
	struct evhttp_bound_socket *bound;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	evutil_socket_t fd;
	uint16_t port;

	if (parse_host_port(addr, 0, 1, srv->host, sizeof(srv->host), &port) !=
	    0) {
		snprintf(err, err_size,
			 "invalid listen address %s (use HOST:PORT)", addr);
		return DL_EINVAL;
	}
	bound = evhttp_bind_socket_with_handle(srv->http, srv->host, port);
	if (!bound) {
		snprintf(err, err_size,
			 "cannot listen on %s (address in use or not "
			 "local?)",
			 addr);
		return DL_ESYS;
	}
	fd = evhttp_bound_socket_get_fd(bound);
	/* evhttp listens with a backlog of 128: thousands of nodes joining at
	 * once overflow it and wait out SYN retransmits (1 s, 3 s, ...).
	 * listen() again on the bound socket just raises the backlog (the
	 * kernel caps it at net.core.somaxconn). */
	if (listen(fd, RDZV_LISTEN_BACKLOG) != 0)
		log_warn("cannot raise the listen backlog to %d: %s",
			 RDZV_LISTEN_BACKLOG, strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) != 0) {
		snprintf(err, err_size, "cannot read the bound address");
		return DL_ESYS;
	}
	if (ss.ss_family == AF_INET6)
		srv->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else
		srv->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* open_core creates the state machine (recovering it from cfg->state_dir),
 * the api over it and the HTTP front. */
static int open_core(struct rdzv_server *srv,
		     const struct rdzv_server_config *cfg, char *err,
		     size_t err_size)
{
	struct rdzv_limits limits;
	struct http_config hc;
	int rc;

	rdzv_limits_init(&limits);
	if (cfg->max_jobs)
		limits.max_jobs = cfg->max_jobs;
	if (cfg->max_nodes_per_job)
		limits.max_nodes_per_job = cfg->max_nodes_per_job;
	if (cfg->max_body_bytes)
		limits.max_value_bytes = cfg->max_body_bytes;
	limits.rerun_after_ms = cfg->rerun_after_ms;
	srv->st = rdzv_state_new(&limits);
	if (!srv->st)
		goto nomem;
	if (cfg->state_dir) {
		rc = rdzv_journal_open(cfg->state_dir, srv->st, clock_now_ms(),
				       &srv->journal, err, err_size);
		if (rc)
			return rc;
	}
	srv->api = rdzv_api_new(srv->st, srv->journal);
	if (!srv->api)
		goto nomem;
	memset(&hc, 0, sizeof(hc));
	hc.base = srv->base;
	hc.api = srv->api;
	hc.st = srv->st;
	hc.journal = srv->journal;
	hc.token = cfg->token;
	hc.tls = cfg->tls_cert_file || cfg->tls_key_file;
	hc.after_event = after_event;
	hc.ctx = srv;
	srv->front = http_new(&hc);
	if (!srv->front)
		goto nomem;
	return 0;
nomem:
	snprintf(err, err_size, "out of memory");
	return DL_ENOMEM;
}

/* setup_http sets evhttp's limits and handler, and TLS when asked for. */
static int setup_http(struct rdzv_server *srv,
		      const struct rdzv_server_config *cfg, char *err,
		      size_t err_size)
{
	uint64_t idle_ms = cfg->idle_timeout_ms ? cfg->idle_timeout_ms : 60000;
	size_t max_body = cfg->max_body_bytes ? cfg->max_body_bytes : 65536;
	struct timeval idle;

	/* hang reports (POST /v1/jobs/{job}/hang) may be larger than other
	 * bodies: libevent lets up to twice their bound through, so that a
	 * report somewhat over it gets the api's clear 413 (libevent's own
	 * 413 cuts the connection while the client is still sending), and
	 * the api holds every other request to --max-body */
	rdzv_api_set_max_body(srv->api, max_body);
	evhttp_set_max_body_size(
	    srv->http, (ev_ssize_t)(max_body > 2 * RDZV_HANG_REPORT_MAX_BYTES
					? max_body
					: 2 * RDZV_HANG_REPORT_MAX_BYTES));
	evhttp_set_max_headers_size(srv->http,
				    (ev_ssize_t)(cfg->max_header_bytes
						     ? cfg->max_header_bytes
						     : 16384));
	idle.tv_sec = (time_t)(idle_ms / 1000);
	idle.tv_usec = (suseconds_t)((cfg->idle_timeout_ms % 1000) * 1000);
	evhttp_set_timeout_tv(srv->http, &idle);
	evhttp_set_allowed_methods(
	    srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
			   EVHTTP_REQ_HEAD | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(srv->http, http_request_cb, srv->front);
	if (!cfg->tls_cert_file && !cfg->tls_key_file)
		return 0;
	if (!cfg->tls_cert_file || !cfg->tls_key_file) {
		snprintf(err, err_size,
			 "TLS needs both a certificate and a key");
		return DL_EINVAL;
	}
	return setup_tls(srv, cfg, err, err_size);
}

int rdzv_server_new(struct event_base *base,
		    const struct rdzv_server_config *cfg,
		    struct rdzv_server **out, char *err, size_t err_size)
{
	struct rdzv_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	srv->base = base;
	srv->tick_at_ms = UINT64_MAX;
	srv->has_token = cfg->token != NULL;
	srv->http = evhttp_new(base);
	srv->tick_timer = evtimer_new(base, tick_cb, srv);
	if (!srv->http || !srv->tick_timer) {
		snprintf(err, err_size, "out of memory");
		rc = DL_ENOMEM;
		goto fail;
	}
	if (cfg->token && !cfg->token[0]) {
		snprintf(err, err_size, "the token is empty");
		rc = DL_EINVAL;
		goto fail;
	}
	rc = open_core(srv, cfg, err, err_size);
	if (!rc)
		rc = setup_http(srv, cfg, err, err_size);
	if (!rc)
		rc = bind_listener(
		    srv, cfg->listen ? cfg->listen : "127.0.0.1:29400", err,
		    err_size);
	if (rc)
		goto fail;
	if (!srv->has_token && !is_loopback(srv->host))
		log_warn("listening on %s:%u without a token: anyone who can "
			 "reach it can join and stop jobs (use --token-file "
			 "or DLAUNCH_TOKEN)",
			 srv->host, (unsigned)srv->port);
	log_info("event=listening addr=%s:%u tls=%s auth=%s state_dir=%s",
		 srv->host, (unsigned)srv->port, srv->ssl_ctx ? "on" : "off",
		 srv->has_token ? "token" : "none",
		 cfg->state_dir ? cfg->state_dir : "-");
	schedule_tick(srv);
	*out = srv;
	return 0;
fail:
	rdzv_server_free(srv);
	return rc ? rc : DL_ENOMEM;
}

const char *rdzv_server_host(const struct rdzv_server *srv)
{
	return srv->host;
}

uint16_t rdzv_server_port(const struct rdzv_server *srv)
{
	return srv->port;
}

void rdzv_server_drain(struct rdzv_server *srv)
{
	if (srv && srv->front)
		http_drain(srv->front);
}

void rdzv_server_free(struct rdzv_server *srv)
{
	if (!srv)
		return;
	/* the parked polls are answered while evhttp and the api live */
	if (srv->front)
		http_drain(srv->front);
	if (srv->http)
		evhttp_free(srv->http);
	http_free(srv->front);
	if (srv->tick_timer)
		event_free(srv->tick_timer);
	rdzv_api_free(srv->api);
	rdzv_journal_close(srv->journal);
	rdzv_state_free(srv->st);
	if (srv->ssl_ctx)
		SSL_CTX_free(srv->ssl_ctx);
	free(srv);
}
