/*
 * http.c - libevent evhttp glue: authentication, the request's bytes into
 * api.c and its answer back out, parked long polls with their deadlines
 * and client disconnects, metrics per answered request.
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
#include "server_int.h"

struct pending {
	struct pending *prev, *next;
	struct rdzv_server *srv;
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

/* send_response sends resp as req's one reply and counts it. */
static void send_response(struct rdzv_server *srv, struct evhttp_request *req,
			  struct rdzv_response *resp, uint64_t start_ns)
{
	struct evbuffer *out = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	if (out)
		evbuffer_add(out, resp->body.data ? resp->body.data : "",
			     resp->body.len);
	evhttp_add_header(h, "Content-Type", resp->content_type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (resp->status == 401)
		evhttp_add_header(h, "WWW-Authenticate", "Bearer");
	if (srv->draining)
		evhttp_add_header(h, "Connection", "close");
	evhttp_send_reply(req, resp->status, reason_of(resp->status), out);
	if (out)
		evbuffer_free(out);
	rdzv_metrics_observe(srv->metrics, resp->endpoint, resp->status,
			     clock_now_ns() - start_ns);
}

static void send_error(struct rdzv_server *srv, struct evhttp_request *req,
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
	send_response(srv, req, &resp, start_ns);
	rdzv_response_release(&resp);
}

/* unlink_pending takes p off the list and frees it; the request itself is
 * libevent's (answered already, or freed with its connection). */
static void unlink_pending(struct pending *p)
{
	struct rdzv_server *srv = p->srv;
	if (p->prev)
		p->prev->next = p->next;
	else
		srv->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	srv->npending--;
	if (p->timer)
		event_free(p->timer);
	if (p->hangup)
		event_free(p->hangup);
	free(p);
}

/* finish_pending answers a parked poll with resp and forgets it. */
static void finish_pending(struct pending *p, struct rdzv_response *resp)
{
	struct rdzv_server *srv = p->srv;
	/* the close callback must not fire for a request we answered */
	evhttp_connection_set_closecb(p->conn, NULL, NULL);
	resp->endpoint = p->endpoint;
	rdzv_api_poll_end(srv->api, &p->poll, clock_now_ms());
	send_response(srv, p->req, resp, p->start_ns);
	unlink_pending(p);
}

static void wake_job(void *ctx, const char *job)
{
	struct rdzv_server *srv = ctx;
	uint64_t now_ms = clock_now_ms();
	struct pending *p = srv->pending, *next;
	for (; p; p = next) {
		struct rdzv_response resp;
		next = p->next;
		if (strcmp(p->poll.job, job) != 0)
			continue;
		rdzv_response_init(&resp);
		if (rdzv_api_poll_check(srv->api, &p->poll, now_ms, 0, &resp))
			finish_pending(p, &resp);
		rdzv_response_release(&resp);
		/* answering may have freed the next poll's connection? no:
		 * each poll owns its own connection, so next is intact */
	}
}

/* after_event journals, wakes the parked polls of the jobs that changed
 * and re-arms the timer; called after every event fed to the state. */
void http_after_event(struct rdzv_server *srv)
{
	rdzv_api_commit(srv->api, wake_job, srv);
	server_schedule_tick(srv);
}

/* after_sign_of_life: a heartbeat or a watch changes no membership; it only
 * moves its node's deadline later. An armed timer therefore fires no later
 * than it must (early is harmless: the tick finds nothing and re-arms), and
 * the deadline scan over every member is skipped on the hottest path. */
static void after_sign_of_life(struct rdzv_server *srv)
{
	rdzv_api_commit(srv->api, wake_job, srv);
	if (srv->tick_at_ms == UINT64_MAX)
		server_schedule_tick(srv);
}

static void pending_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;
	struct rdzv_server *srv = p->srv;
	struct rdzv_response resp;
	(void)fd;
	(void)what;
	rdzv_response_init(&resp);
	rdzv_api_poll_check(srv->api, &p->poll, clock_now_ms(), 1, &resp);
	finish_pending(p, &resp);
	rdzv_response_release(&resp);
	http_after_event(srv);
}

static void pending_close_cb(struct evhttp_connection *conn, void *arg)
{
	struct pending *p = arg;
	struct rdzv_server *srv = p->srv;
	(void)conn;
	log_debug("job=%s event=poll_abandoned node=%s", p->poll.job,
		  p->poll.node_id[0] ? p->poll.node_id : "-");
	rdzv_api_poll_end(srv->api, &p->poll, clock_now_ms());
	rdzv_metrics_observe(srv->metrics, p->endpoint, 499,
			     clock_now_ns() - p->start_ns);
	unlink_pending(p);
	server_schedule_tick(srv);
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
	struct rdzv_server *srv = p->srv;
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
	http_after_event(srv);
}

static int park(struct rdzv_server *srv, struct evhttp_request *req,
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
	p->srv = srv;
	p->req = req;
	p->conn = evhttp_request_get_connection(req);
	p->poll = resp->poll;
	p->endpoint = resp->endpoint;
	p->start_ns = start_ns;
	p->timer = evtimer_new(srv->base, pending_timeout_cb, p);
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
		if (fd >= 0 && !srv->ssl_ctx) {
			p->hangup = event_new(
			    srv->base, fd, EV_READ | EV_PERSIST, hangup_cb, p);
			if (p->hangup)
				event_add(p->hangup, NULL);
		}
	}
	p->next = srv->pending;
	if (p->next)
		p->next->prev = p;
	srv->pending = p;
	srv->npending++;
	return 0;
}

void http_drain(struct rdzv_server *srv)
{
	srv->draining = 1;
	while (srv->pending) {
		struct rdzv_response resp;
		rdzv_response_init(&resp);
		resp.status = 503;
		buf_append_str(&resp.body,
			       "{\"error\":\"the rendezvous server is shutting "
			       "down; retry\"}");
		finish_pending(srv->pending, &resp);
		rdzv_response_release(&resp);
	}
}

/* authorized compares the bearer token in constant time: both sides are
 * hashed first so neither the content nor the length leaks. */
static int authorized(const struct rdzv_server *srv, struct evhttp_request *req)
{
	const char *h = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Authorization");
	unsigned char want[SHA256_DIGEST_LENGTH], got[SHA256_DIGEST_LENGTH];
	if (!srv->token)
		return 1;
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return 0;
	h += 7;
	SHA256((const unsigned char *)srv->token, strlen(srv->token), want);
	SHA256((const unsigned char *)h, strlen(h), got);
	return CRYPTO_memcmp(want, got, sizeof(want)) == 0;
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

static void render_metrics(struct rdzv_server *srv, struct evhttp_request *req,
			   uint64_t start_ns)
{
	struct rdzv_response resp;
	rdzv_response_init(&resp);
	resp.endpoint = RDZV_EP_METRICS;
	resp.status = 200;
	resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
	if (rdzv_metrics_render(srv->metrics, srv->st, srv->journal,
				srv->npending, &resp.body) != 0) {
		buf_reset(&resp.body);
		resp.status = 500;
	}
	send_response(srv, req, &resp, start_ns);
	rdzv_response_release(&resp);
}

void http_request_cb(struct evhttp_request *req, void *arg)
{
	struct rdzv_server *srv = arg;
	uint64_t start_ns = clock_now_ns();
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct rdzv_request rq;
	struct rdzv_response resp;
	enum rdzv_endpoint ep;
	char *peer = NULL;
	ev_uint16_t peer_port = 0;
	size_t len;

	if (!path || !*path) {
		send_error(srv, req, RDZV_EP_OTHER, 400,
			   "malformed request uri", start_ns);
		return;
	}
	ep = rdzv_api_route(path);
	if (ep != RDZV_EP_HEALTHZ && !authorized(srv, req)) {
		send_error(
		    srv, req, ep, 401,
		    "missing or wrong bearer token (the server's --token-file "
		    "or DLAUNCH_TOKEN; dlaunch takes it with "
		    "--rdzv-token-file)",
		    start_ns);
		return;
	}
	if (srv->draining) {
		send_error(srv, req, ep, 503,
			   "the rendezvous server is shutting down; retry",
			   start_ns);
		return;
	}
	if (ep == RDZV_EP_METRICS &&
	    evhttp_request_get_command(req) == EVHTTP_REQ_GET) {
		render_metrics(srv, req, start_ns);
		return;
	}
	if (conn)
		evhttp_connection_get_peer(conn, &peer, &peer_port);
	len = evbuffer_get_length(in);
	memset(&rq, 0, sizeof(rq));
	rq.method = method_name(evhttp_request_get_command(req));
	rq.path = path;
	rq.query = evhttp_uri_get_query(uri);
	rq.body = len ? (const char *)evbuffer_pullup(in, -1) : NULL;
	rq.body_len = len;
	rq.peer_addr = peer;
	rq.now_ms = clock_now_ms();
	rdzv_response_init(&resp);
	rdzv_api_handle(srv->api, &rq, &resp);
	if (resp.poll.kind != RDZV_POLL_NONE) {
		if (park(srv, req, &resp, start_ns) != 0) {
			rdzv_api_poll_end(srv->api, &resp.poll, rq.now_ms);
			rdzv_response_release(&resp);
			send_error(srv, req, ep, 503, "out of memory",
				   start_ns);
			http_after_event(srv);
			return;
		}
	} else {
		send_response(srv, req, &resp, start_ns);
	}
	rdzv_response_release(&resp);
	if (ep == RDZV_EP_HEARTBEAT || ep == RDZV_EP_WATCH)
		after_sign_of_life(srv);
	else
		http_after_event(srv);
}
