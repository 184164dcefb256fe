/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_watch.c - the etcd client's watches (etcd_client.h): a stream of
 * POST /v3/watch that resumes from its next revision on another endpoint
 * when it breaks, and hands its events to its owner from the loop.
 *
 * Stream bytes arrive inside curl's callbacks, where nothing may start or
 * cancel a transfer: a watch stores them and a zero-delay event hands
 * them to its owner from the loop.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_client_int.h"

#define STREAM_MAX (4u << 20) /* unread stream bytes kept */

static void watch_stop_stream(struct etcd_watch *w);

static void watch_stop_stream(struct etcd_watch *w)
{
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

/* one object of the stream: 0 to go on, 1 when the watch stopped */
static int watch_object(struct etcd_watch *w, const char *obj, size_t len)
{
	struct etcd_watch_response r;
	struct etcd_error e;
	char err[256], msg[1200];
	if (etcd_is_error(obj, len) &&
	    etcd_parse_error(obj, len, &e, err, sizeof(err)) == 0) {
		snprintf(msg, sizeof(msg), "etcd: %s (code %d)", e.message,
			 e.code);
		if (e.code == ETCD_GRPC_UNAUTHENTICATED && w->c->username &&
		    w->auth_retries++ < AUTH_RETRIES) {
			watch_stop_stream(w);
			w->c->have_token = 0;
			w->parked = 1;
			etcd_login(w->c);
		} else if (etcd_grpc_to_dl(e.code) == DL_EAGAIN) {
			watch_retry(w, msg);
		} else {
			etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
		}
		return 1;
	}
	if (etcd_parse_watch(obj, len, &r, err, sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "bad watch answer: %s", err);
		watch_retry(w, msg);
		return 1;
	}
	etcd_answered(w->c);
	backoff_reset(&w->backoff);
	if (r.canceled) {
		if (r.compact_revision > 0) {
			etcd_watch_response_release(&r);
			etcd_watch_over(w, ETCD_WATCH_COMPACTED, "compacted");
		} else {
			snprintf(msg, sizeof(msg), "watch canceled by etcd%s%s",
				 r.cancel_reason[0] ? ": " : "",
				 r.cancel_reason);
			etcd_watch_response_release(&r);
			if (strstr(msg, "invalid auth token") &&
			    w->c->username &&
			    w->auth_retries++ < AUTH_RETRIES) {
				/* created with an expired token: log in
				 * again, then resume from next_rev */
				watch_stop_stream(w);
				w->parked = 1;
				etcd_login(w->c);
			} else if (strstr(msg, "permission denied") ||
				   strstr(msg, "auth token")) {
				etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
			} else {
				watch_retry(w, msg);
			}
		}
		return 1;
	}
	w->auth_retries = 0;
	if (r.n_events > 0) {
		int64_t last = r.events[r.n_events - 1].kv.mod_revision;
		if (last >= w->next_rev)
			w->next_rev = last + 1;
		w->cb(w->arg, ETCD_WATCH_EVENTS, &r, NULL);
		if (w->freed) {
			etcd_watch_response_release(&r);
			return 1;
		}
	} else if (!r.created && r.header.revision >= w->next_rev) {
		/* a progress notice: nothing up to it is left to send */
		w->next_rev = r.header.revision + 1;
	}
	etcd_watch_response_release(&r);
	return 0;
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
	memset(&wc, 0, sizeof(wc));
	wc.key.data = w->key;
	wc.key.len = w->key_len;
	wc.range_end.data = w->end;
	wc.range_end.len = w->end_len;
	wc.start_revision = w->next_rev;
	wc.prev_kv = w->prev_kv;
	wc.progress_notify = 1;
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
