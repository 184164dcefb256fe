/*
 * server.c - the rendezvous server as a library (dlaunch/rdzv_server.h):
 * binds the listener (HTTP or HTTPS), recovers the journal, arms the state
 * machine's timer, and tears everything down in order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "server_int.h"

void rdzv_server_config_init(struct rdzv_server_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->listen = "127.0.0.1:29400";
	cfg->max_body_bytes = 64 * 1024;
	cfg->max_header_bytes = 16 * 1024;
	cfg->max_jobs = 1024;
	cfg->max_nodes_per_job = 65536;
	cfg->idle_timeout_ms = 60000;
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rdzv_server *srv = arg;
	(void)fd;
	(void)what;
	srv->tick_at_ms = UINT64_MAX;
	rdzv_api_tick(srv->api, clock_now_ms());
	http_after_event(srv);
}

void server_schedule_tick(struct rdzv_server *srv)
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

int rdzv_server_new(struct event_base *base,
		    const struct rdzv_server_config *cfg,
		    struct rdzv_server **out, char *err, size_t err_size)
{
	struct rdzv_server *srv = calloc(1, sizeof(*srv));
	struct rdzv_limits limits;
	struct timeval idle;
	int rc = DL_ENOMEM;

	if (!srv) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	srv->base = base;
	srv->tick_at_ms = UINT64_MAX;
	rdzv_limits_init(&limits);
	if (cfg->max_jobs)
		limits.max_jobs = cfg->max_jobs;
	if (cfg->max_nodes_per_job)
		limits.max_nodes_per_job = cfg->max_nodes_per_job;
	if (cfg->max_body_bytes)
		limits.max_value_bytes = cfg->max_body_bytes;
	srv->st = rdzv_state_new(&limits);
	srv->metrics = rdzv_metrics_new();
	srv->http = evhttp_new(base);
	srv->tick_timer = evtimer_new(base, tick_cb, srv);
	if (cfg->token && !(srv->token = strdup(cfg->token)))
		goto fail;
	if (!srv->st || !srv->metrics || !srv->http || !srv->tick_timer) {
		snprintf(err, err_size, "out of memory");
		goto fail;
	}
	if (cfg->token && !cfg->token[0]) {
		snprintf(err, err_size, "the token is empty");
		rc = DL_EINVAL;
		goto fail;
	}
	if (cfg->state_dir) {
		rc = rdzv_journal_open(cfg->state_dir, srv->st, clock_now_ms(),
				       &srv->journal, err, err_size);
		if (rc)
			goto fail;
	}
	srv->api = rdzv_api_new(srv->st, srv->journal);
	if (!srv->api) {
		rc = DL_ENOMEM;
		snprintf(err, err_size, "out of memory");
		goto fail;
	}
	evhttp_set_max_body_size(
	    srv->http,
	    (ev_ssize_t)(cfg->max_body_bytes ? cfg->max_body_bytes : 65536));
	evhttp_set_max_headers_size(srv->http,
				    (ev_ssize_t)(cfg->max_header_bytes
						     ? cfg->max_header_bytes
						     : 16384));
	idle.tv_sec =
	    (time_t)((cfg->idle_timeout_ms ? cfg->idle_timeout_ms : 60000) /
		     1000);
	idle.tv_usec = (suseconds_t)((cfg->idle_timeout_ms % 1000) * 1000);
	evhttp_set_timeout_tv(srv->http, &idle);
	evhttp_set_allowed_methods(
	    srv->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
			   EVHTTP_REQ_HEAD | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(srv->http, http_request_cb, srv);
	if (cfg->tls_cert_file || cfg->tls_key_file) {
		if (!cfg->tls_cert_file || !cfg->tls_key_file) {
			snprintf(err, err_size,
				 "TLS needs both a certificate and a key");
			rc = DL_EINVAL;
			goto fail;
		}
		rc = setup_tls(srv, cfg, err, err_size);
		if (rc)
			goto fail;
	}
	rc = bind_listener(srv, cfg->listen ? cfg->listen : "127.0.0.1:29400",
			   err, err_size);
	if (rc)
		goto fail;
	if (!srv->token && !is_loopback(srv->host))
		log_warn("listening on %s:%u without a token: anyone who can "
			 "reach it can join and stop jobs (use --token-file "
			 "or DLAUNCH_TOKEN)",
			 srv->host, (unsigned)srv->port);
	log_info("event=listening addr=%s:%u tls=%s auth=%s state_dir=%s",
		 srv->host, (unsigned)srv->port, srv->ssl_ctx ? "on" : "off",
		 srv->token ? "token" : "none",
		 cfg->state_dir ? cfg->state_dir : "-");
	server_schedule_tick(srv);
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
	if (srv && srv->http)
		http_drain(srv);
}

void rdzv_server_free(struct rdzv_server *srv)
{
	if (!srv)
		return;
	if (srv->http) {
		http_drain(srv);
		evhttp_free(srv->http);
	}
	if (srv->tick_timer)
		event_free(srv->tick_timer);
	rdzv_api_free(srv->api);
	rdzv_journal_close(srv->journal);
	rdzv_metrics_free(srv->metrics);
	rdzv_state_free(srv->st);
	if (srv->ssl_ctx)
		SSL_CTX_free(srv->ssl_ctx);
	free(srv->token);
	free(srv);
}
