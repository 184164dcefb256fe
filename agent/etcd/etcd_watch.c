/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_watch.c - the etcd client's watches (etcd_client.h): each resumes
 * from its next revision on another endpoint when its stream breaks, and
 * hands its events to its owner from the loop.
 *
 * A client's watches share one gRPC Watch stream to the member in use
 * (etcd_grpc.h), as etcd's own clients carry them, each created there
 * with an id the client gives it. An endpoint that does not take gRPC (a
 * front before etcd that speaks HTTP/1.1 only) gets each watch as a
 * stream of POST /v3/watch through the JSON gateway for a while.
 *
 * Stream bytes arrive inside curl's callbacks, where nothing may start or
 * cancel a transfer: they are stored, and a zero-delay event hands them
 * over from the loop.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_client_int.h"

#define STREAM_MAX (4u << 20) /* unread stream bytes kept */
#define WATCH_PATH "/etcdserverpb.Watch/Watch"
/* a gRPC stream that has not answered its first create in this long (or
 * four times the last answer's time, when etcd is slow) is left for the
 * next member: this one hangs, or has no leader and holds the stream;
 * one that never answered a stream is taken for something before etcd
 * that holds gRPC without a word, and gets the gateway's watches */
#define WSTREAM_FIRST_ANSWER_MS 3000

enum ws_next {
	WS_AGAIN,     /* another member in use, or a new token: at once, on
		       * a new stream */
	WS_ELSEWHERE, /* the member is away: its watches resume elsewhere */
	WS_GATEWAY,   /* the endpoint does not take gRPC: its gateway */
	WS_LOGIN,     /* the token was refused: a new login first */
	WS_SILENT,    /* no answer: elsewhere, and the gateway's where no
		       * stream ever answered but calls are */
};

static void ws_ended(struct etcd_client *c, const char *why, enum ws_next next);

static void ws_cancel(struct etcd_watch *w)
{
	struct etcd_wstream *s = &w->c->ws;
	struct buf frame;
	if (!w->sid)
		return;
	/* etcd forgets the watcher; its answers that were on their way
	 * find no watch of that id */
	buf_init(&frame, 64);
	if (s->hc && etcd_grpc_watch_cancel_frame(w->sid, &frame) == 0)
		(void)client_duplex_send(s->hc, frame.data, frame.len);
	buf_release(&frame);
	w->sid = 0;
}

static void watch_stop_stream(struct etcd_watch *w)
{
	ws_cancel(w);
	if (w->hc)
		client_cancel(w->c->http[w->ep], w->hc);
	w->hc = NULL;
	buf_release(&w->in);
	w->in_failed = 0;
	etcd_splitter_reset(&w->sp);
}

/* watches_leave: every watch streaming from endpoint ep resumes from its
 * revision on the endpoint now in use. A member that hangs keeps its
 * streams open and silent (its kernel answers TCP), one cut off from its
 * leader sends nothing more: the calls that time out or are refused there
 * (the keep-alive, every third of the lease TTL) are what notices it. */
void etcd_watches_leave(struct etcd_client *c, size_t ep)
{
	if (c->ws.hc && c->ws.ep == ep)
		ws_ended(c, NULL, WS_AGAIN);
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (!w->hc || w->ep != ep || w->over || w->freed || w->parked)
			continue;
		watch_stop_stream(w);
		etcd_arm(w->retry, 0);
	}
}

/* watch_over: the watch ends for its owner (it stays allocated until
 * etcd_watch_free). */
void etcd_watch_over(struct etcd_watch *w, enum etcd_watch_what what,
		     const char *error)
{
	watch_stop_stream(w);
	evtimer_del(w->retry);
	w->over = 1;
	w->cb(w->arg, what, NULL, error);
}

static void watch_retry(struct etcd_watch *w, const char *why)
{
	watch_stop_stream(w);
	etcd_moved_on(w->c, w->ep, w->what, why);
	/* an outage once the pauses reached their cap */
	if (w->backoff.first_ms && w->backoff.base_ms >= BACKOFF_MAX_MS)
		etcd_outage(w->c, why);
	etcd_arm(w->retry, etcd_next_pause(&w->backoff));
}

/* watch_relogin: etcd refused w's token; w waits for a new login, then
 * resumes from next_rev */
static void watch_relogin(struct etcd_watch *w)
{
	watch_stop_stream(w);
	w->c->have_token = 0;
	w->parked = 1;
	etcd_login(w->c);
}

/* watch_answer: one answer of w's stream, from either transport: 0 to go
 * on, 1 when the watch stopped (or left that stream) */
static int watch_answer(struct etcd_watch *w, struct etcd_watch_response *r)
{
	char msg[1200];
	etcd_answered(w->c);
	backoff_reset(&w->backoff);
	if (r->canceled) {
		/* etcd forgot it: nothing to cancel there */
		w->sid = 0;
		if (r->compact_revision > 0) {
			etcd_watch_over(w, ETCD_WATCH_COMPACTED, "compacted");
			return 1;
		}
		snprintf(msg, sizeof(msg), "watch canceled by etcd%s%s",
			 r->cancel_reason[0] ? ": " : "", r->cancel_reason);
		if (strstr(msg, "invalid auth token") && w->c->username &&
		    w->auth_retries++ < AUTH_RETRIES)
			/* created with an expired token */
			watch_relogin(w);
		else if (strstr(msg, "permission denied") ||
			 strstr(msg, "auth token") ||
			 strstr(msg, "user name is empty"))
			etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
		else
			watch_retry(w, msg);
		return 1;
	}
	w->auth_retries = 0;
	if (r->n_events > 0) {
		int64_t last = r->events[r->n_events - 1].kv.mod_revision;
		if (last >= w->next_rev)
			w->next_rev = last + 1;
		w->cb(w->arg, ETCD_WATCH_EVENTS, r, NULL);
		if (w->freed)
			return 1;
	} else if (!r->created && r->header.revision >= w->next_rev) {
		/* a progress notice: nothing up to it is left to send */
		w->next_rev = r->header.revision + 1;
	}
	return 0;
}

/* ------------------------------------------------ the gateway's stream */

/* one object of w's gateway stream: 0 to go on, 1 when the watch stopped */
static int watch_object(struct etcd_watch *w, const char *obj, size_t len)
{
	struct etcd_watch_response r;
	struct etcd_error e;
	char err[256], msg[1200];
	int rc;
	if (etcd_is_error(obj, len) &&
	    etcd_parse_error(obj, len, &e, err, sizeof(err)) == 0) {
		snprintf(msg, sizeof(msg), "etcd: %s (code %d)", e.message,
			 e.code);
		if (e.code == ETCD_GRPC_UNAUTHENTICATED && w->c->username &&
		    w->auth_retries++ < AUTH_RETRIES)
			watch_relogin(w);
		else if (etcd_grpc_to_dl(e.code) == DL_EAGAIN)
			watch_retry(w, msg);
		else
			etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
		return 1;
	}
	if (etcd_parse_watch(obj, len, &r, err, sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "bad watch answer: %s", err);
		watch_retry(w, msg);
		return 1;
	}
	rc = watch_answer(w, &r);
	etcd_watch_response_release(&r);
	return rc;
}

struct feed_ctx {
	struct etcd_watch *w;
	int stopped;
};

static int feed_one(void *arg, const char *obj, size_t len)
{
	struct feed_ctx *f = arg;
	if (f->stopped)
		return 1;
	if (watch_object(f->w, obj, len))
		f->stopped = 1;
	return f->stopped;
}

static void watch_release(struct etcd_watch *w);

/* An owner may free its watch from the callback; the watch's own code
 * that called it runs between guard and unguard and frees it at the end
 * (unguard returns 1: w is gone). */
static void guard(struct etcd_watch *w)
{
	w->in_cb++;
}

static int unguard(struct etcd_watch *w)
{
	if (--w->in_cb > 0 || !w->freed)
		return w->freed;
	watch_release(w);
	return 1;
}

static void on_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_watch *w = arg;
	struct feed_ctx f = {w, 0};
	char err[256];
	struct buf in = w->in;
	(void)fd;
	(void)what;
	guard(w);
	if (w->in_failed) {
		watch_retry(w, "too much unread watch data");
		unguard(w);
		return;
	}
	/* the stream may be replaced while its bytes are handed over */
	buf_init(&w->in, STREAM_MAX);
	if (in.len &&
	    etcd_splitter_feed(&w->sp, in.data, in.len, feed_one, &f, err,
			       sizeof(err)) != 0 &&
	    !f.stopped && !w->freed)
		watch_retry(w, err);
	buf_release(&in);
	unguard(w);
}

static int on_chunk(void *arg, const char *data, size_t n)
{
	struct etcd_watch *w = arg;
	if (buf_append(&w->in, data, n) != 0) {
		w->in_failed = 1;
		event_active(w->dispatch, EV_TIMEOUT, 0);
		return -1;
	}
	event_active(w->dispatch, EV_TIMEOUT, 0);
	return 0;
}

static void on_stream_end(void *arg, const struct client_reply *r)
{
	struct etcd_watch *w = arg;
	char msg[1200];
	int rc = 0;
	w->hc = NULL;
	if (w->in.len) {
		/* bytes still to hand over: they come first */
		guard(w);
		on_dispatch(-1, 0, w);
		if (unguard(w))
			return;
		if (w->over || w->hc || evtimer_pending(w->retry, NULL) ||
		    w->parked)
			return;
	}
	if (r->status == 200 && !r->transport_failed) {
		watch_retry(w, "the stream ended");
		return;
	}
	switch (etcd_judge(w->c, r, &rc, msg, sizeof(msg))) {
	case V_OK:
	case V_RETRY: watch_retry(w, msg); return;
	case V_LOGIN:
		if (w->auth_retries++ < AUTH_RETRIES) {
			w->c->have_token = 0;
			w->parked = 1;
			etcd_login(w->c);
			return;
		}
		break;
	case V_FAIL: break;
	}
	etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
}

/* ---------------------------------------------------- the gRPC stream */

static void ws_close(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	if (s->hc)
		client_cancel(c->grpc[s->ep], s->hc);
	s->hc = NULL;
	s->gen++;
	s->answered = 0;
	s->bad[0] = '\0';
	s->last_id = 0;
	s->created_upto = 0;
	buf_release(&s->in); /* its limit stays */
	s->in_failed = 0;
	etcd_grpc_reader_reset(&s->rd);
	if (s->timeout)
		evtimer_del(s->timeout);
}

/* ws_ended: the stream is over (why; NULL for WS_AGAIN); its watches go
 * where next says, from their revisions */
static void ws_ended(struct etcd_client *c, const char *why, enum ws_next next)
{
	size_t ep = c->ws.ep;
	ws_close(c);
	/* silent: the gateway only where no stream ever answered and the
	 * member answered a call made since this stream opened (a member
	 * that answers nothing is away, hung or overloaded: not the
	 * stream's fault) */
	if (next == WS_GATEWAY || (next == WS_SILENT && !c->ws.took[ep] &&
				   etcd_answered_since(c, ep, c->ws.opened_ms)))
		etcd_stream_off(c, ep, "watches", why);
	if (next == WS_ELSEWHERE || next == WS_SILENT)
		etcd_moved_on(c, ep, "watch", why);
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (!w->sid)
			continue;
		w->sid = 0;
		if (w->over || w->freed || w->parked)
			continue;
		if (next == WS_AGAIN || next == WS_GATEWAY)
			etcd_arm(w->retry, 0);
		else if (next == WS_LOGIN)
			w->parked = 1;
		else
			watch_retry(w, why);
	}
	if (next == WS_LOGIN) {
		c->have_token = 0;
		etcd_login(c);
	}
}

/* ws_find: the watch an answer is for, or NULL (an answer on its way
 * when its watch was canceled). A create that etcd refused before it made
 * a watcher (permission, token) is answered with id -1; etcd answers a
 * stream's creates in the order they came, and the client's ids grow, so
 * it is the create after the last one answered */
static struct etcd_watch *ws_find(struct etcd_client *c,
				  const struct etcd_watch_response *r)
{
	struct etcd_wstream *s = &c->ws;
	int64_t id = r->watch_id;
	if (r->created) {
		if (id == -1)
			id = s->created_upto + 1;
		if (id > s->created_upto)
			s->created_upto = id;
	}
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		if (w->sid && w->sid == id)
			return w;
	return NULL;
}

/* ws_on_message: one message of the stream, from the loop; non-zero stops
 * the feed (a bad message, or the stream was closed meanwhile) */
static int ws_on_message(void *arg, const unsigned char *msg, size_t n)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	struct etcd_watch_response r;
	struct etcd_watch *w;
	unsigned gen = s->gen;
	char err[200];
	int rc = etcd_grpc_parse_watch(msg, n, &r, err, sizeof(err));
	if (rc) {
		snprintf(s->bad, sizeof(s->bad), "bad watch message: %s", err);
		return rc;
	}
	if (!s->answered) {
		s->answered = 1;
		s->took[s->ep] = 1;
		evtimer_del(s->timeout);
	}
	/* none: an answer on its way when its watch was freed */
	w = ws_find(c, &r);
	if (w) {
		guard(w);
		watch_answer(w, &r);
		unguard(w);
	}
	etcd_watch_response_release(&r);
	return s->gen != gen || !s->hc;
}

static void ws_on_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	struct buf in = s->in;
	unsigned gen = s->gen;
	char err[200];
	int rc;
	(void)fd;
	(void)what;
	if (!s->hc || !in.len)
		return; /* closed: its bytes are not wanted */
	buf_init(&s->in, STREAM_MAX);
	rc = etcd_grpc_reader_feed(&s->rd, in.data, in.len, ws_on_message, c,
				   err, sizeof(err));
	buf_release(&in);
	if (rc && s->gen == gen && s->hc) {
		/* not etcd's answer: the endpoint's gateway has a parser of
		 * its own */
		char why[sizeof(s->bad)];
		snprintf(why, sizeof(why), "%s", s->bad[0] ? s->bad : err);
		ws_ended(c, why, WS_GATEWAY);
	}
}

static int ws_on_chunk(void *arg, const char *data, size_t n)
{
	struct etcd_client *c = arg;
	int rc = buf_append(&c->ws.in, data, n);
	if (rc)
		c->ws.in_failed = 1;
	event_active(c->ws.dispatch, EV_TIMEOUT, 0);
	return rc ? -1 : 0;
}

/* ws_on_end: etcd, the network, or what is before etcd ended the stream;
 * the bytes not handed over are dropped: the watches resume from the
 * revision after the last they handed over */
static void ws_on_end(void *arg, const struct client_reply *r)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	char why[400];
	enum ws_next next = WS_ELSEWHERE;
	s->hc = NULL; /* the client frees it */
	if (s->in_failed)
		snprintf(why, sizeof(why), "too much unread watch data");
	else if (r->transport_failed)
		snprintf(why, sizeof(why), "%s", r->error);
	else if (r->grpc_status > 0)
		snprintf(why, sizeof(why), "gRPC status %d: %s", r->grpc_status,
			 r->grpc_message);
	else if (r->grpc_status == 0)
		snprintf(why, sizeof(why), "the stream ended");
	else
		snprintf(why, sizeof(why), "HTTP %ld, not a gRPC answer",
			 r->status);
	if (r->grpc_status == ETCD_GRPC_UNAUTHENTICATED && c->username)
		next = WS_LOGIN;
	else if (!s->answered && !s->in_failed && !r->refused &&
		 !r->timed_out &&
		 (!r->transport_failed || etcd_answered_since(c, s->ep, 1)) &&
		 r->grpc_status != ETCD_GRPC_UNAVAILABLE)
		/* not a member away: something there that does not speak
		 * gRPC, or refuses it; a stream cut without a word (an
		 * HTTP/1.1 front that closes an HTTP/2 connection: "Empty
		 * reply from server") at an endpoint that has answered
		 * calls is that too. A member away refuses the connection
		 * or answers nothing; one that dies cuts streams that had
		 * answered. Without this an agent whose calls were all
		 * answered before its stream opened (a leader waiting for
		 * joins, a node waiting for its assignment) stayed deaf,
		 * trying the stream again and again */
		next = WS_GATEWAY;
	ws_ended(c, why, next);
}

static void ws_on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	char why[80];
	int waiting = 0;
	(void)fd;
	(void)what;
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		waiting |= w->sid > c->ws.created_upto;
	if (!waiting) {
		ws_close(c); /* its watches were freed: nothing to answer */
		return;
	}
	snprintf(why, sizeof(why), "no answer to a watch within %llu ms",
		 (unsigned long long)c->ws.first_answer_ms);
	ws_ended(c, why, WS_SILENT);
}

static int ws_open(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	char token[ETCD_TOKEN_MAX + 16];
	/* require-leader: a member cut off from its peers refuses the
	 * stream, and ends it once it lost its leader; the token is
	 * gRPC metadata, checked at each create */
	const char *headers[] = {"hasleader: true", NULL, NULL};
	struct client *g;
	if (!s->dispatch) {
		s->dispatch = event_new(c->base, -1, 0, ws_on_dispatch, c);
		s->timeout = evtimer_new(c->base, ws_on_timeout, c);
		if (!s->dispatch || !s->timeout)
			return -1;
	}
	if (c->username && c->have_token) {
		snprintf(token, sizeof(token), "token: %s", c->token);
		headers[1] = token;
	}
	ws_close(c);
	g = etcd_grpc_client(c, c->cur);
	s->hc =
	    g ? client_duplex(g, WATCH_PATH, headers, ws_on_chunk, ws_on_end, c)
	      : NULL;
	if (!s->hc)
		return -1;
	s->ep = c->cur;
	s->opened_ms = clock_now_ms();
	s->token_gen = c->token_gen;
	/* an etcd that is slow to answer anything gets longer */
	s->first_answer_ms = 4 * c->answer_try_ms > WSTREAM_FIRST_ANSWER_MS
				 ? 4 * c->answer_try_ms
				 : WSTREAM_FIRST_ANSWER_MS;
	etcd_arm(s->timeout, s->first_answer_ms);
	return 0;
}

/* ws_create: w created (wc) on the stream to the member in use; 0, or -1
 * when it goes through the gateway */
static int ws_create(struct etcd_watch *w, const struct etcd_watch_create *wc)
{
	struct etcd_client *c = w->c;
	struct etcd_wstream *s = &c->ws;
	struct buf frame;
	int rc;
	if (clock_now_ms() < c->stream_off_until[c->cur])
		return -1;
	if (s->hc && (s->ep != c->cur || s->token_gen != c->token_gen))
		/* another member, or an older login's token: the stream's
		 * watches follow w to a new one */
		ws_ended(c, NULL, WS_AGAIN);
	if (!s->hc && ws_open(c) != 0)
		return -1;
	buf_init(&frame, ETCD_ANSWER_MAX);
	rc = etcd_grpc_watch_create_frame(wc, s->last_id + 1, &frame);
	if (rc == 0)
		rc = client_duplex_send(s->hc, frame.data, frame.len);
	buf_release(&frame);
	if (rc)
		return -1;
	w->sid = ++s->last_id;
	return 0;
}

void etcd_wstream_init(struct etcd_client *c)
{
	etcd_grpc_reader_init(&c->ws.rd, ETCD_ANSWER_MAX);
	buf_init(&c->ws.in, STREAM_MAX);
}

void etcd_wstream_free(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	ws_close(c); /* the watches' cancels are not sent: it is gone */
	if (s->dispatch)
		event_free(s->dispatch);
	if (s->timeout)
		event_free(s->timeout);
	s->dispatch = s->timeout = NULL;
	etcd_grpc_reader_release(&s->rd);
}

void etcd_watch_connect(struct etcd_watch *w)
{
	struct etcd_watch_create wc;
	json_t *body = NULL;
	char err[256];
	struct etcd_client *c = w->c;
	if (c->username && !c->have_token) {
		w->parked = 1;
		etcd_login(c);
		return;
	}
	w->parked = 0;
	if (w->sid || w->hc)
		watch_stop_stream(w);
	memset(&wc, 0, sizeof(wc));
	wc.key.data = w->key;
	wc.key.len = w->key_len;
	wc.range_end.data = w->end;
	wc.range_end.len = w->end_len;
	wc.start_revision = w->next_rev;
	wc.prev_kv = w->prev_kv;
	wc.progress_notify = 1;
	if (ws_create(w, &wc) == 0)
		return;
	if (etcd_build_watch_create(&wc, &body, err, sizeof(err)) != 0) {
		etcd_watch_over(w, ETCD_WATCH_FAILED, err);
		return;
	}
	w->ep = c->cur;
	w->hc = client_stream(c->http[w->ep], "/v3/watch", body, on_chunk,
			      on_stream_end, w);
	json_decref(body);
	if (!w->hc)
		watch_retry(w, "out of memory");
}

static void on_watch_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	etcd_watch_connect(arg);
}

struct etcd_watch *etcd_watch_new(struct etcd_client *c, const char *what,
				  const void *key, size_t key_len,
				  const void *range_end, size_t range_end_len,
				  int64_t start_revision, int prev_kv,
				  etcd_watch_cb cb, void *arg)
{
	struct etcd_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->c = c;
	w->what = what;
	w->key = malloc(key_len + 1);
	w->end = range_end ? malloc(range_end_len + 1) : NULL;
	w->retry = evtimer_new(c->base, on_watch_retry, w);
	w->dispatch = event_new(c->base, -1, 0, on_dispatch, w);
	if (!w->key || (range_end && !w->end) || !w->retry || !w->dispatch) {
		free(w->key);
		free(w->end);
		if (w->retry)
			event_free(w->retry);
		if (w->dispatch)
			event_free(w->dispatch);
		free(w);
		return NULL;
	}
	memcpy(w->key, key, key_len);
	w->key_len = key_len;
	if (range_end) {
		memcpy(w->end, range_end, range_end_len);
		w->end_len = range_end_len;
	}
	w->next_rev = start_revision;
	w->prev_kv = prev_kv;
	w->cb = cb;
	w->arg = arg;
	buf_init(&w->in, STREAM_MAX);
	etcd_splitter_init(&w->sp, ETCD_ANSWER_MAX);
	w->next = c->watches;
	c->watches = w;
	etcd_watch_connect(w);
	return w;
}

void etcd_watch_free(struct etcd_watch *w)
{
	struct etcd_watch **pp;
	if (!w || w->freed)
		return;
	for (pp = &w->c->watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	watch_stop_stream(w);
	evtimer_del(w->retry);
	event_del(w->dispatch);
	w->freed = 1;
	if (!w->in_cb)
		watch_release(w);
}

static void watch_release(struct etcd_watch *w)
{
	event_free(w->retry);
	event_free(w->dispatch);
	etcd_splitter_release(&w->sp);
	free(w->key);
	free(w->end);
	free(w);
}
