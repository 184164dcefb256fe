/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_watch.c - the etcd client's watches (etcd_client.h), all carried
 * by one stream of POST /v3/watch per client, as etcd's own client
 * carries them on one gRPC stream: a node holds one connection for its
 * watches, not one per watch, and a join costs one request for all the
 * watches it sets up together.
 *
 * The stream's request body is one create request per watch, each from
 * its watch's next revision; etcd answers each with a "created", in that
 * order, whose watch_id tags every later answer of that watch. A new
 * watch restarts the stream (from the loop, so that the watches set up
 * in one pass share the restart); a freed one is dropped from the next
 * body and its answers meanwhile are ignored. When the stream breaks, or
 * its member is left, it starts again on the endpoint in use, every
 * watch resuming from the revision after the last one it delivered.
 *
 * Stream bytes arrive inside curl's callbacks, where nothing may start or
 * cancel a transfer: they are stored and a zero-delay event hands them
 * over from the loop. An owner may free any watch, or the client, from
 * its callback: what is freed then is released when the handing over
 * ends.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_client_int.h"

#define STREAM_MAX (4u << 20) /* unread stream bytes kept */

static void stream_connect(struct etcd_client *c);

static int live(const struct etcd_watch *w)
{
	return w && !w->over && !w->freed;
}

static void release(struct etcd_watch *w)
{
	free(w->key);
	free(w->end);
	free(w);
}

static void stream_stop(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	if (s->hc)
		client_cancel(c->http[s->ep], s->hc);
	s->hc = NULL;
	buf_release(&s->in);
	s->in_failed = 0;
	etcd_splitter_reset(&s->sp);
	s->n_sent = 0;
	s->n_created = 0;
	s->gen++;
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		w->created = 0;
}

/* stream_again: the stream starts again from the loop after ms (every
 * watch from its next revision) */
static void stream_again(struct etcd_client *c, uint64_t ms)
{
	stream_stop(c);
	etcd_arm(c->ws.retry, ms);
}

/* watches_leave: the stream, when it is on endpoint ep, resumes from each
 * watch's revision on the endpoint now in use. A member that hangs keeps
 * its streams open and silent (its kernel answers TCP), one cut off from
 * its leader sends nothing more: calls that time out there while another
 * member answers, or its "no leader", are what notices it. */
void etcd_watches_leave(struct etcd_client *c, size_t ep)
{
	struct etcd_wstream *s = &c->ws;
	if (s->hc && s->ep == ep && !s->parked) {
		log_debug("etcd watch stream leaves %s", c->eps.url[ep]);
		stream_again(c, 0);
	}
}

/* watch_over: w ends for its owner (it stays allocated until
 * etcd_watch_free); 1 when the client was freed in the callback */
static int watch_over(struct etcd_watch *w, enum etcd_watch_what what,
		      const char *error)
{
	struct etcd_client *c = w->c;
	w->over = 1;
	w->cb(w->arg, what, NULL, error);
	return c->ws.client_freed;
}

/* hand_over_begin / hand_over_end bracket every callback to owners:
 * whatever they free meanwhile is released at the end, the client last;
 * 1 when the client is gone */
static void hand_over_begin(struct etcd_client *c)
{
	c->ws.dispatching++;
}

static int hand_over_end(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	if (--s->dispatching > 0)
		return 0;
	while (s->graveyard) {
		struct etcd_watch *w = s->graveyard;
		s->graveyard = w->next;
		release(w);
	}
	if (s->client_freed) {
		etcd_client_free(c);
		return 1;
	}
	return 0;
}

/* fail_all: every live watch ends (the stream cannot be made again);
 * each callback may free anything, so the list is walked again */
static void fail_all(struct etcd_client *c, const char *msg)
{
	struct etcd_watch *w;
	stream_stop(c);
	evtimer_del(c->ws.retry);
	c->ws.parked = 0;
	hand_over_begin(c);
	while (!c->ws.client_freed) {
		for (w = c->watches; w && !live(w); w = w->next)
			;
		if (!w)
			break;
		watch_over(w, ETCD_WATCH_FAILED, msg);
	}
	hand_over_end(c);
}

static void stream_retry(struct etcd_client *c, const char *why)
{
	struct etcd_wstream *s = &c->ws;
	size_t ep = s->ep;
	log_debug("etcd watch stream from %s ends: %s", c->eps.url[ep], why);
	stream_stop(c);
	/* the stream's own end says the member is away or has no leader:
	 * no doubt about it to wait for */
	etcd_moved_on(c, ep, "watch", why, 0);
	/* an outage once the pauses reached their cap */
	if (s->backoff.first_ms && s->backoff.base_ms >= BACKOFF_MAX_MS)
		etcd_outage(c, why);
	etcd_arm(s->retry, etcd_next_pause(&s->backoff));
}

/* relogin: etcd refused the stream's token; log in, then the stream
 * starts again. 0, or -1 when logins were tried enough */
static int relogin(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	if (!c->username || s->auth_retries++ >= AUTH_RETRIES)
		return -1;
	stream_stop(c);
	c->have_token = 0;
	s->parked = 1;
	etcd_login(c);
	return 0;
}

static struct etcd_watch *by_id(const struct etcd_wstream *s, int64_t id)
{
	for (size_t i = 0; i < s->n_created && i < s->n_sent; i++)
		if (s->sent[i] && s->sent[i]->created && s->sent[i]->id == id)
			return s->sent[i];
	return NULL;
}

/* canceled: etcd ended watch w on the stream (r says why); 1 when the
 * stream stopped */
static int canceled(struct etcd_client *c, struct etcd_watch *w,
		    const struct etcd_watch_response *r)
{
	char msg[1200];
	if (r->compact_revision > 0)
		return watch_over(w, ETCD_WATCH_COMPACTED, "compacted");
	snprintf(msg, sizeof(msg), "watch canceled by etcd%s%s",
		 r->cancel_reason[0] ? ": " : "", r->cancel_reason);
	/* created with an expired token: log in again, then every watch
	 * resumes from its next revision */
	if (strstr(msg, "invalid auth token") && relogin(c) == 0)
		return 1;
	if (strstr(msg, "permission denied") || strstr(msg, "auth token"))
		return watch_over(w, ETCD_WATCH_FAILED, msg);
	stream_retry(c, msg);
	return 1;
}

/* one object of the stream: 0 to go on, 1 when the stream stopped or the
 * client is gone */
static int stream_object(struct etcd_client *c, const char *obj, size_t len)
{
	unsigned gen = c->ws.gen;
	struct etcd_wstream *s = &c->ws;
	struct etcd_watch_response r;
	struct etcd_watch *w;
	struct etcd_error e;
	char err[256], msg[1200];
	int stop = 0;
	if (etcd_is_error(obj, len) &&
	    etcd_parse_error(obj, len, &e, err, sizeof(err)) == 0) {
		snprintf(msg, sizeof(msg), "etcd: %s (code %d)", e.message,
			 e.code);
		if (e.code == ETCD_GRPC_UNAUTHENTICATED && relogin(c) == 0)
			return 1;
		if (etcd_grpc_to_dl(e.code) == DL_EAGAIN)
			stream_retry(c, msg);
		else
			fail_all(c, msg);
		return 1;
	}
	if (etcd_parse_watch(obj, len, &r, err, sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "bad watch answer: %s", err);
		stream_retry(c, msg);
		return 1;
	}
	etcd_answered(c);
	if (c->suspect == s->ep + 1)
		c->suspect = 0; /* it answers */
	backoff_reset(&s->backoff);
	if (r.created) {
		/* the answer to the next create request of the body */
		w = s->n_created < s->n_sent ? s->sent[s->n_created] : NULL;
		s->n_created++;
		if (w && !r.canceled) {
			s->auth_retries = 0;
			w->id = r.watch_id;
			w->created = 1;
			log_debug("etcd watch stream: %s created as %lld from "
				  "revision %lld",
				  w->what, (long long)w->id,
				  (long long)w->next_rev);
			/* "from now on" is from this revision on, wherever
			 * the watch resumes */
			if (w->next_rev == 0)
				w->next_rev = r.header.revision + 1;
		}
	} else {
		w = by_id(s, r.watch_id);
	}
	if (!live(w)) {
		/* a freed or ended watch's */
		if (r.n_events)
			log_debug("etcd watch stream: %zu event(s) of watch "
				  "%lld dropped (%s)",
				  r.n_events, (long long)r.watch_id,
				  w ? "ended" : "freed or unknown");
	} else if (r.canceled) {
		stop = canceled(c, w, &r);
	} else if (r.n_events > 0) {
		int64_t last = r.events[r.n_events - 1].kv.mod_revision;
		s->auth_retries = 0;
		if (last >= w->next_rev)
			w->next_rev = last + 1;
		w->cb(w->arg, ETCD_WATCH_EVENTS, &r, NULL);
		stop = s->client_freed;
	} else if (!r.created && r.header.revision >= w->next_rev) {
		/* a progress notice: nothing up to it is left to send */
		w->next_rev = r.header.revision + 1;
	}
	etcd_watch_response_release(&r);
	return stop || s->client_freed || s->gen != gen;
}

static int feed_one(void *arg, const char *obj, size_t len)
{
	return stream_object(arg, obj, len);
}

static void on_dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	struct buf in = s->in;
	unsigned gen = s->gen;
	char err[256];
	int rc;
	(void)fd;
	(void)what;
	if (s->in_failed) {
		stream_retry(c, "too much unread watch data");
		return;
	}
	/* the stream may be replaced while its bytes are handed over */
	buf_init(&s->in, STREAM_MAX);
	hand_over_begin(c);
	rc = in.len ? etcd_splitter_feed(&s->sp, in.data, in.len, feed_one, c,
					 err, sizeof(err))
		    : 0;
	/* below 0: the splitter's own error; above: the stream stopped (the
	 * next one resets the splitter) */
	if (rc < 0 && !s->client_freed && s->gen == gen)
		stream_retry(c, err);
	buf_release(&in);
	hand_over_end(c);
}

static int on_chunk(void *arg, const char *data, size_t n)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	if (buf_append(&s->in, data, n) != 0) {
		s->in_failed = 1;
		event_active(s->dispatch, EV_TIMEOUT, 0);
		return -1;
	}
	event_active(s->dispatch, EV_TIMEOUT, 0);
	return 0;
}

static void on_stream_end(void *arg, const struct client_reply *r)
{
	struct etcd_client *c = arg;
	struct etcd_wstream *s = &c->ws;
	char msg[1200];
	int rc = 0;
	s->hc = NULL;
	if (s->in.len) {
		/* bytes still to hand over come first; what they started
		 * (another stream, a login) or ended (the client) wins */
		unsigned gen = s->gen;
		hand_over_begin(c);
		on_dispatch(-1, 0, c);
		if (hand_over_end(c) || s->gen != gen)
			return;
	}
	if (r->status == 200 && !r->transport_failed) {
		stream_retry(c, "the stream ended");
		return;
	}
	switch (etcd_judge(c, r, &rc, msg, sizeof(msg))) {
	case V_OK:
	case V_RETRY: stream_retry(c, msg); return;
	case V_LOGIN:
		if (relogin(c) == 0)
			return;
		break;
	case V_FAIL: break;
	}
	fail_all(c, msg);
}

/* add_create: appends w's create request to body */
static int add_create(struct etcd_watch *w, struct buf *body, char *err,
		      size_t err_size)
{
	struct etcd_watch_create wc;
	json_t *req = NULL;
	int rc;
	memset(&wc, 0, sizeof(wc));
	wc.key.data = w->key;
	wc.key.len = w->key_len;
	wc.range_end.data = w->end;
	wc.range_end.len = w->end_len;
	wc.start_revision = w->next_rev;
	wc.prev_kv = w->prev_kv;
	wc.progress_notify = 1;
	rc = etcd_build_watch_create(&wc, &req, err, err_size);
	if (rc == 0)
		rc = jsonh_dump(req, body);
	json_decref(req);
	return rc;
}

/* stream_connect: a stream with every live watch, from its next revision,
 * on the endpoint in use; none when no watch is left */
static void stream_connect(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	struct buf body;
	char err[256];
	size_t n = 0;
	stream_stop(c);
	if (c->username && !c->have_token) {
		s->parked = 1;
		etcd_login(c);
		return;
	}
	s->parked = 0;
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		n += live(w);
	if (n == 0)
		return;
	if (n > s->cap_sent) {
		struct etcd_watch **ns = realloc(s->sent, n * sizeof(*ns));
		if (!ns) {
			stream_retry(c, "out of memory");
			return;
		}
		s->sent = ns;
		s->cap_sent = n;
	}
	buf_init(&body, 1u << 20);
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (!live(w))
			continue;
		if (add_create(w, &body, err, sizeof(err)) != 0) {
			/* a key the request cannot carry: that watch only */
			buf_release(&body);
			hand_over_begin(c);
			watch_over(w, ETCD_WATCH_FAILED, err);
			if (!hand_over_end(c))
				etcd_arm(s->retry, 0);
			return;
		}
		s->sent[s->n_sent++] = w;
	}
	s->ep = c->cur;
	log_debug("etcd watch stream: %zu watch(es) from %s", s->n_sent,
		  c->eps.url[s->ep]);
	s->hc = client_stream_raw(c->http[s->ep], "/v3/watch", &body, on_chunk,
				  on_stream_end, c);
	buf_release(&body);
	if (!s->hc)
		stream_retry(c, "out of memory");
}

static void on_stream_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	stream_connect(arg);
}

void etcd_watches_resume(struct etcd_client *c)
{
	if (c->ws.parked)
		stream_connect(c);
}

void etcd_watches_fail(struct etcd_client *c, const char *msg)
{
	if (c->ws.parked)
		fail_all(c, msg);
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
	if (!w->key || (range_end && !w->end)) {
		release(w);
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
	w->next = c->watches;
	c->watches = w;
	/* the stream starts again with it from the loop (the watches set
	 * up in this pass share that start), unless it waits already: for
	 * a pause after a failure, or for a login */
	if (!c->ws.parked && !evtimer_pending(c->ws.retry, NULL))
		stream_again(c, 0);
	return w;
}

void etcd_watch_free(struct etcd_watch *w)
{
	struct etcd_watch **pp;
	struct etcd_wstream *s;
	if (!w || w->freed)
		return;
	s = &w->c->ws;
	for (pp = &w->c->watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	/* its answers still on the stream are not its any more */
	for (size_t i = 0; i < s->n_sent; i++)
		if (s->sent[i] == w)
			s->sent[i] = NULL;
	w->freed = 1;
	/* the last live watch gone: no stream to hold */
	struct etcd_watch *o;
	for (o = w->c->watches; o && !live(o); o = o->next)
		;
	if (!o) {
		stream_stop(w->c);
		evtimer_del(s->retry);
	}
	if (s->dispatching) {
		w->next = s->graveyard;
		s->graveyard = w;
	} else {
		release(w);
	}
}

int etcd_wstream_init(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	s->retry = evtimer_new(c->base, on_stream_retry, c);
	s->dispatch = event_new(c->base, -1, 0, on_dispatch, c);
	buf_init(&s->in, STREAM_MAX);
	etcd_splitter_init(&s->sp, ETCD_ANSWER_MAX);
	return s->retry && s->dispatch ? 0 : DL_ENOMEM;
}

int etcd_wstream_release(struct etcd_client *c)
{
	struct etcd_wstream *s = &c->ws;
	stream_stop(c);
	if (s->dispatching) {
		s->client_freed = 1;
		if (s->retry)
			evtimer_del(s->retry);
		if (s->dispatch)
			event_del(s->dispatch);
		return 1;
	}
	if (s->retry)
		event_free(s->retry);
	if (s->dispatch)
		event_free(s->dispatch);
	s->retry = s->dispatch = NULL;
	etcd_splitter_release(&s->sp);
	free(s->sent);
	s->sent = NULL;
	return 0;
}
