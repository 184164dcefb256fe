/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http.c - libevent evhttp glue: authentication, the request's bytes into
 * api.c and its answer back out, parked long polls with their deadlines
 * and client disconnects, metrics per answered request. What follows each
 * event (commit, wake-ups, the timer) is the owner's after_event hook
 * (http.h).
 *
 * Every request ends in exactly one reply, except one whose client went
 * away while it was parked: libevent frees such a request with its
 * connection, so the close callback unlinks the poll and nothing is ever
 * sent to it.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/socket.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "http.h"
#include "metrics.h"

struct pending;

#define PAGE_CSP                                                               \
	"default-src 'none'; script-src 'self'; style-src 'self'; "            \
	"connect-src 'self'; img-src 'self'; base-uri 'none'; "                \
	"form-action 'none'; frame-ancestors 'none'"

struct rdzv_http {
	struct event_base *base;
	struct rdzv_api *api;
	const struct rdzv_state *st;
	const struct rdzv_journal *journal;
	struct rdzv_metrics *metrics;
	struct evbuffer *out; /* each answer's body, on its way to libevent */
	char *token;
	unsigned char token_hash[SHA256_DIGEST_LENGTH]; /* of token */
	int tls;
	void (*after_event)(void *ctx, enum http_after what);
	void *ctx;
	struct pending *pending; /* parked long polls, a doubly linked list */
	uint64_t parked[RDZV_EP_COUNT]; /* of them, by endpoint */
	int draining;			/* new requests get 503 */
};

struct pending {
	struct pending *prev, *next;
	struct rdzv_http *http;
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	struct event *timer;
	struct event *hangup; /* readability of the client's socket */
	struct rdzv_poll poll;
	enum rdzv_endpoint endpoint;
	uint64_t start_ns;
};

static const char *reason_of(int status)
{
	switch (status) {
	case 200: return "OK";
	case 202: return "Accepted";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 413: return "Payload Too Large";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 499: return "Client Closed Request";
	case 503: return "Service Unavailable";
	}
	return "Unknown";
}

static void free_body(const void *data, size_t len, void *arg)
{
	(void)len;
	(void)arg;
	free((void *)data);
}

/* send_response sends resp as req's one reply and counts it. The body's
 * storage goes to libevent, which frees it once written (resp's body is
 * left empty); a copy only where libevent will not take it. */
static void send_response(struct rdzv_http *http, struct evhttp_request *req,
			  struct rdzv_response *resp, uint64_t start_ns)
{
	struct evbuffer *out = http->out;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	if (resp->body.len &&
	    evbuffer_add_reference(out, resp->body.data, resp->body.len,
				   free_body, NULL) == 0)
		buf_init(&resp->body, resp->body.max_bytes);
	else if (resp->body.len)
		evbuffer_add(out, resp->body.data, resp->body.len);
	evhttp_add_header(h, "Content-Type", resp->content_type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	if (resp->endpoint == RDZV_EP_PAGE) {
		/* the page runs its own script and style and talks to this
		 * server only: nothing inline, nothing from elsewhere */
		evhttp_add_header(h, "Content-Security-Policy", PAGE_CSP);
		evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	}
	if (resp->status == 401)
		evhttp_add_header(h, "WWW-Authenticate", "Bearer");
	if (http->draining)
		evhttp_add_header(h, "Connection", "close");
	evhttp_send_reply(req, resp->status, reason_of(resp->status), out);
	/* libevent moved the body out; a request without a connection leaves
	 * it, and it must not go with the next answer */
	evbuffer_drain(out, evbuffer_get_length(out));
	rdzv_metrics_observe(http->metrics, resp->endpoint, resp->status,
			     clock_now_ns() - start_ns);
}

static void send_error(struct rdzv_http *http, struct evhttp_request *req,
		       enum rdzv_endpoint ep, int status, const char *msg,
		       uint64_t start_ns)
{
	struct rdzv_response resp;
	json_t *v = json_pack("{s:s}", "error", msg);
	rdzv_response_init(&resp);
	resp.endpoint = ep;
	resp.status = status;
	if (!v || jsonh_dump(v, &resp.body))
		buf_append_str(&resp.body, "{\"error\":\"internal error\"}");
	json_decref(v);
	send_response(http, req, &resp, start_ns);
	rdzv_response_release(&resp);
}

/* unlink_pending takes p off the list and frees it; the request itself is
 * libevent's (answered already, or freed with its connection). */
static void unlink_pending(struct pending *p)
{
	struct rdzv_http *http = p->http;
	if (p->prev)
		p->prev->next = p->next;
	else
		http->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	http->parked[p->endpoint]--;
	if (p->timer)
		event_free(p->timer);
	if (p->hangup)
		event_free(p->hangup);
	free(p);
}

/* finish_pending answers a parked poll with resp and forgets it. */
static void finish_pending(struct pending *p, struct rdzv_response *resp)
{
	struct rdzv_http *http = p->http;
	/* the close callback must not fire for a request we answered */
	evhttp_connection_set_closecb(p->conn, NULL, NULL);
	resp->endpoint = p->endpoint;
	rdzv_api_poll_end(http->api, &p->poll, clock_now_ms());
	send_response(http, p->req, resp, p->start_ns);
	unlink_pending(p);
}

void http_wake_job(void *ctx, const char *job)
{
	struct rdzv_http *http = ctx;
	uint64_t now_ms = clock_now_ms();
	struct pending *p = http->pending, *next;
	for (; p; p = next) {
		struct rdzv_response resp;
		next = p->next;
		if (strcmp(p->poll.job, job) != 0)
			continue;
		rdzv_response_init(&resp);
		if (rdzv_api_poll_check(http->api, &p->poll, now_ms, 0, &resp))
			finish_pending(p, &resp);
		rdzv_response_release(&resp);
		/* each poll owns its own connection: answering p leaves next
		 * intact */
	}
}

/* after_event hands what follows an event to the owner (http.h). */
static void after_event(struct rdzv_http *http, enum http_after what)
{
	http->after_event(http->ctx, what);
}

static void pending_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	struct rdzv_http *http = p->http;
	struct rdzv_response resp;
	(void)fd;
	(void)what;
	rdzv_response_init(&resp);
	rdzv_api_poll_check(http->api, &p->poll, clock_now_ms(), 1, &resp);
	finish_pending(p, &resp);
	rdzv_response_release(&resp);
	after_event(http, HTTP_AFTER_CHANGE);
}

static void pending_close_cb(struct evhttp_connection *conn, void *arg)
{
	struct pending *p = arg;
	struct rdzv_http *http = p->http;
	(void)conn;
	log_debug("job=%s event=poll_abandoned node=%s", p->poll.job,
		  p->poll.node_id[0] ? p->poll.node_id : "-");
	rdzv_api_poll_end(http->api, &p->poll, clock_now_ms());
	rdzv_metrics_observe(http->metrics, p->endpoint, 499,
			     clock_now_ns() - p->start_ns);
	unlink_pending(p);
	after_event(http, HTTP_AFTER_POLL_END);
}

/*
 * hangup_cb: the socket of a parked request became readable. libevent does
 * not read from a connection while its request is being handled, so a
 * client that gave up is only seen here: a peek reading end-of-file (or an
 * error) means it closed, and the poll is answered at once (the write
 * fails and libevent frees the connection) rather than holding the node's
 * place until its deadline. Anything else (pipelined bytes, TLS records)
 * is left to libevent and the watch stops.
 */
static void hangup_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	struct rdzv_http *http = p->http;
	struct rdzv_response resp;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	(void)what;
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) {
		if (n > 0)
			event_del(p->hangup);
		return;
	}
	log_debug("job=%s event=poll_abandoned node=%s", p->poll.job,
		  p->poll.node_id[0] ? p->poll.node_id : "-");
	rdzv_response_init(&resp);
	resp.status = 499; /* nginx's "client closed request": never seen */
	buf_append_str(&resp.body, "{\"error\":\"client went away\"}");
	finish_pending(p, &resp);
	rdzv_response_release(&resp);
	after_event(http, HTTP_AFTER_CHANGE);
}

static int park(struct rdzv_http *http, struct evhttp_request *req,
		const struct rdzv_response *resp, uint64_t start_ns)
{
	struct pending *p = calloc(1, sizeof(*p));
	uint64_t now_ms = clock_now_ms();
	uint64_t wait_ms = resp->poll.deadline_ms > now_ms
			       ? resp->poll.deadline_ms - now_ms
			       : 0;
	struct timeval tv = {(time_t)(wait_ms / 1000),
			     (suseconds_t)(wait_ms % 1000) * 1000};

	if (!p)
		return -1;
	p->http = http;
	p->req = req;
	p->conn = evhttp_request_get_connection(req);
	p->poll = resp->poll;
	p->endpoint = resp->endpoint;
	p->start_ns = start_ns;
	p->timer = evtimer_new(http->base, pending_timeout_cb, p);
	if (!p->timer || !p->conn || evtimer_add(p->timer, &tv) != 0) {
		if (p->timer)
			event_free(p->timer);
		free(p);
		return -1;
	}
	evhttp_connection_set_closecb(p->conn, pending_close_cb, p);
	{
		struct bufferevent *bev =
		    evhttp_connection_get_bufferevent(p->conn);
		evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
		if (fd >= 0 && !http->tls) {
			p->hangup = event_new(
			    http->base, fd, EV_READ | EV_PERSIST, hangup_cb, p);
			if (p->hangup)
				event_add(p->hangup, NULL);
		}
	}
	p->next = http->pending;
	if (p->next)
		p->next->prev = p;
	http->pending = p;
	http->parked[p->endpoint]++;
	return 0;
}

void http_drain(struct rdzv_http *http)
{
	http->draining = 1;
	while (http->pending) {
		struct rdzv_response resp;
		rdzv_response_init(&resp);
		resp.status = 503;
		buf_append_str(&resp.body,
			       "{\"error\":\"the rendezvous server is shutting "
			       "down; retry\"}");
		finish_pending(http->pending, &resp);
		rdzv_response_release(&resp);
	}
}

/* authorized compares the bearer token in constant time: both sides are
 * hashed first (the server's once, in http_new) so neither the content
 * nor the length leaks. */
static int authorized(const struct rdzv_http *http, struct evhttp_request *req)
{
	const char *h = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Authorization");
	unsigned char got[SHA256_DIGEST_LENGTH];
	if (!http->token)
		return 1;
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return 0;
	h += 7;
	SHA256((const unsigned char *)h, strlen(h), got);
	return CRYPTO_memcmp(http->token_hash, got, sizeof(got)) == 0;
}

static const char *method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_DELETE: return "DELETE";
	default: return "OTHER";
	}
}

static void render_metrics(struct rdzv_http *http, struct evhttp_request *req,
			   uint64_t start_ns)
{
	struct rdzv_metrics_src src = {.st = http->st,
				       .journal = http->journal,
				       .api = http->api,
				       .now_ms = clock_now_ms()};
	struct rdzv_response resp;
	rdzv_response_init(&resp);
	resp.endpoint = RDZV_EP_METRICS;
	resp.status = 200;
	resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
	memcpy(src.parked, http->parked, sizeof(src.parked));
	if (rdzv_metrics_render(http->metrics, &src, &resp.body) != 0) {
		buf_reset(&resp.body);
		resp.status = 500;
	}
	send_response(http, req, &resp, start_ns);
	rdzv_response_release(&resp);
}

/* answer_early answers the requests that never reach the api: a bad uri,
 * a wrong token, any request while draining, GET /metrics. Returns 1 when
 * it answered. */
static int answer_early(struct rdzv_http *http, struct evhttp_request *req,
			const char *path, enum rdzv_endpoint ep,
			uint64_t start_ns)
{
	if (!path || !*path) {
		send_error(http, req, RDZV_EP_OTHER, 400,
			   "malformed request uri", start_ns);
		return 1;
	}
	/* the page's files hold no data: the page asks for the token and
	 * sends it with each API call */
	if (ep != RDZV_EP_HEALTHZ && ep != RDZV_EP_PAGE &&
	    !authorized(http, req)) {
		send_error(
		    http, req, ep, 401,
		    "missing or wrong bearer token (the server's --token-file "
		    "or DLAUNCH_TOKEN; dlaunch takes it with "
		    "--rdzv-token-file)",
		    start_ns);
		return 1;
	}
	if (http->draining) {
		send_error(http, req, ep, 503,
			   "the rendezvous server is shutting down; retry",
			   start_ns);
		return 1;
	}
	if (ep == RDZV_EP_METRICS &&
	    evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
		render_metrics(http, req, start_ns);
		return 1;
	}
	return 0;
}

/* to_request describes req for the api; the strings are borrowed from
 * req and live as long as it does. */
static void to_request(struct evhttp_request *req, const char *path,
		       struct rdzv_request *rq)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	char *peer = NULL;
	ev_uint16_t peer_port = 0;
	size_t len = evbuffer_get_length(in);

	if (conn)
		evhttp_connection_get_peer(conn, &peer, &peer_port);
	memset(rq, 0, sizeof(*rq));
	rq->method = method_name(evhttp_request_get_command(req));
	rq->path = path;
	rq->query = evhttp_uri_get_query(uri);
	rq->body = len ? (const char *)evbuffer_pullup(in, -1) : NULL;
	rq->body_len = len;
	rq->peer_addr = peer;
	rq->now_ms = clock_now_ms();
	rq->wall_ms = clock_wall_ms();
}

void http_request_cb(struct evhttp_request *req, void *arg)
{
	struct rdzv_http *http = arg;
	uint64_t start_ns = clock_now_ns();
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	enum rdzv_endpoint ep =
	    path && *path ? rdzv_api_route(path) : RDZV_EP_OTHER;
	struct rdzv_request rq;
	struct rdzv_response resp;

	if (answer_early(http, req, path, ep, start_ns))
		return;
	to_request(req, path, &rq);
	rdzv_response_init(&resp);
	rdzv_api_handle(http->api, &rq, &resp);
	if (resp.poll.kind == RDZV_POLL_NONE) {
		send_response(http, req, &resp, start_ns);
	} else if (park(http, req, &resp, start_ns) != 0) {
		rdzv_api_poll_end(http->api, &resp.poll, rq.now_ms);
		rdzv_response_release(&resp);
		send_error(http, req, ep, 503, "out of memory", start_ns);
		after_event(http, HTTP_AFTER_CHANGE);
		return;
	}
	rdzv_response_release(&resp);
	after_event(http, ep == RDZV_EP_HEARTBEAT || ep == RDZV_EP_WATCH
			      ? HTTP_AFTER_SIGN_OF_LIFE
			      : HTTP_AFTER_CHANGE);
}

struct rdzv_http *http_new(const struct http_config *cfg)
{
	struct rdzv_http *http = calloc(1, sizeof(*http));
	if (!http)
		return NULL;
	http->base = cfg->base;
	http->api = cfg->api;
	http->st = cfg->st;
	http->journal = cfg->journal;
	http->tls = cfg->tls;
	http->after_event = cfg->after_event;
	http->ctx = cfg->ctx;
	http->metrics = rdzv_metrics_new();
	http->out = evbuffer_new();
	if (!http->metrics || !http->out ||
	    (cfg->token && !(http->token = strdup(cfg->token)))) {
		http_free(http);
		return NULL;
	}
	if (http->token)
		SHA256((const unsigned char *)http->token, strlen(http->token),
		       http->token_hash);
	return http;
}

void http_free(struct rdzv_http *http)
{
	if (!http)
		return;
	http_drain(http);
	rdzv_metrics_free(http->metrics);
	if (http->out)
		evbuffer_free(http->out);
	free(http->token);
	free(http);
}
