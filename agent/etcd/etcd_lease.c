/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_lease.c - the etcd client's lease (etcd_client.h): granted with an
 * id of its own (a retried grant is one grant), kept alive every third of
 * its TTL, each keep-alive's try bounded so that a member that hangs does
 * not cost it, and long enough that an etcd that is only slow does.
 *
 * The keep-alives go on a LeaseKeepAlive stream of gRPC (etcd_grpc.h) to
 * the member in use, as etcd's own clients send them: through the JSON
 * gateway each one costs etcd a gRPC stream of its own, two to three
 * times the CPU (docs/etcd.md). A keep-alive the stream does not answer
 * in its try goes through the gateway, whose call moves on to the next
 * member as every call does; an endpoint that does not take gRPC (a proxy
 * in front of etcd that speaks HTTP/1.1 only) gets the gateway's calls
 * for a while.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/backoff.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_client_int.h"
#include "etcd_grpc.h"

/* the least a keep-alive's try waits for its answer */
#define KEEPALIVE_TRY_MIN_MS 250
#define KEEPALIVE_PATH	     "/etcdserverpb.Lease/LeaseKeepAlive"

struct etcd_lease {
	struct etcd_client *c;
	unsigned ttl_s;
	int64_t id;
	int64_t want; /* the id asked for: a retried grant is one grant */
	int lost;
	etcd_lease_cb cb;
	void *arg;
	struct etcd_call *call;
	uint64_t sent_ms; /* when the call in flight was made */
	/* how long a keep-alive's first try waits: a quarter of the TTL
	 * while etcd answers quickly, twice the last answer's time while
	 * it is slow (up to the TTL) */
	uint64_t try_ms;
	struct event *timer;
	/* the keep-alive stream, open on endpoint ka_ep */
	struct client_call *ka;
	size_t ka_ep;
	int ka_waiting;	   /* a keep-alive sent on it, unanswered */
	size_t ka_answers; /* answers it gave */
	int ka_got;	   /* an answer read (ka_ans), not handed over */
	struct etcd_grpc_keepalive ka_ans;
	char ka_bad[160]; /* what was wrong with what it sent */
	struct etcd_grpc_reader rd;
	struct event *ka_timeout; /* the try of the keep-alive sent on it */
	struct event *ka_dispatch;
};

/* try_base_ms: a keep-alive's first try when etcd answers quickly */
static uint64_t try_base_ms(const struct etcd_lease *l)
{
	uint64_t t = l->ttl_s * 1000 / 4;
	return t < KEEPALIVE_TRY_MIN_MS ? KEEPALIVE_TRY_MIN_MS : t;
}

static void lease_send(struct etcd_lease *l);
static void expired(struct etcd_lease *l);
static void renewed(struct etcd_lease *l);
static void gateway_keepalive(struct etcd_lease *l, uint64_t try_ms);

static void on_lease_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	lease_send(arg);
}

static void on_lease(void *arg, const struct etcd_answer *a)
{
	struct etcd_lease *l = arg;
	struct etcd_lease_response r;
	char err[256];
	int rc;
	int64_t was = l->id;
	l->call = NULL;
	if (!was && a->rc == DL_ECONFLICT &&
	    strstr(a->error, "already exists")) {
		/* a retried grant whose first copy etcd had granted */
		int lost = l->lost;
		l->id = l->want;
		l->lost = 0;
		etcd_arm(l->timer, l->ttl_s * 1000 / 3);
		l->cb(l->arg, l->id, lost, NULL);
		return;
	}
	if (a->rc != 0) {
		/* no usable answer (retries are the call's own): say so,
		 * and keep trying while there is a lease to keep */
		if (!was) {
			l->cb(l->arg, 0, -1, a->error);
			return;
		}
		log_error("etcd lease keep-alive failed: %s", a->error);
		etcd_arm(l->timer, 1000);
		return;
	}
	rc =
	    was ? etcd_parse_lease_keepalive(a->body, a->len, &r, err,
					     sizeof(err))
		: etcd_parse_lease_grant(a->body, a->len, &r, err, sizeof(err));
	if (rc == DL_ENOTFOUND && was) {
		expired(l);
		return;
	}
	if (rc != 0) {
		log_error("bad etcd lease answer: %s", err);
		etcd_arm(l->timer, 1000);
		return;
	}
	if (!was) {
		int lost = l->lost;
		l->id = r.id;
		l->lost = 0;
		etcd_arm(l->timer, l->ttl_s * 1000 / 3);
		l->cb(l->arg, l->id, lost, NULL);
		return;
	}
	renewed(l);
}

/* expired: etcd has no lease of that id any more */
static void expired(struct etcd_lease *l)
{
	log_warn("etcd lease %llx expired: this node was away from "
		 "etcd longer than its TTL (%u s); taking a new one",
		 (unsigned long long)l->id, l->ttl_s);
	l->id = 0;
	l->lost = 1;
	lease_send(l);
}

/* try_now: how long the next keep-alive's first try waits: twice what
 * etcd's last answer took (a keep-alive's, a grant's, a write's),
 * between a quarter of the TTL and the TTL. A member that hangs while
 * etcd is quick costs a quarter of the TTL; an overloaded etcd whose
 * answers take longer than that gets the time it needs, instead of each
 * keep-alive given up before its answer and sent to the next member,
 * just as busy, until the lease expires. Taken at each keep-alive, the
 * first one after a slow grant included */
static uint64_t try_now(const struct etcd_lease *l)
{
	uint64_t lat = l->c->answer_try_ms, ttl_ms = l->ttl_s * 1000ull;
	return 2 * lat < try_base_ms(l) ? try_base_ms(l)
	       : 2 * lat > ttl_ms	? ttl_ms
					: 2 * lat;
}

/* renewed: a keep-alive was answered */
static void renewed(struct etcd_lease *l)
{
	/* every third of the TTL from when this keep-alive was sent: an
	 * answer that was slow to come does not push the next one back */
	uint64_t due = l->sent_ms + l->ttl_s * 1000 / 3, now = clock_now_ms();
	etcd_arm(l->timer, due > now ? due - now : 0);
}

/* ------------------------------------------------- the gateway's call */

/* gateway_keepalive: the keep-alive as a call of the JSON gateway, its
 * first try waiting try_ms */
static void gateway_keepalive(struct etcd_lease *l, uint64_t try_ms)
{
	json_t *body = NULL;
	char err[128];
	if (etcd_build_lease_keepalive(l->id, &body, err, sizeof(err)) == 0)
		l->call =
		    etcd_call_new(l->c, "lease keep-alive",
				  "/v3/lease/keepalive", body, 0, on_lease, l);
	json_decref(body);
	if (!l->call) {
		etcd_arm(l->timer, 1000);
		return;
	}
	/* a member that hangs must not cost the lease: the first try waits
	 * a quarter of the TTL (while etcd is quick, see renewed), then the
	 * next member is asked, in time whatever the TTL (the next
	 * keep-alive is due a third of the TTL after this one). A try that
	 * took the connection and got no answer makes the next one wait
	 * twice as long, up to the TTL: when every member is slow, the
	 * answer gets the time it takes */
	l->call->timeout_ms = try_ms;
	l->call->timeout_cap_ms =
	    l->ttl_s * 1000ull > try_ms ? l->ttl_s * 1000ull : try_ms;
	etcd_call_attempt(l->call);
}

/* ------------------------------------------------------------- the stream */

static void stream_close(struct etcd_lease *l)
{
	if (l->ka)
		client_cancel(l->c->grpc[l->ka_ep], l->ka);
	l->ka = NULL;
	l->ka_waiting = 0;
	l->ka_answers = 0;
	l->ka_got = 0;
	l->ka_bad[0] = '\0';
	etcd_grpc_reader_reset(&l->rd);
	evtimer_del(l->ka_timeout);
}

/* on_ka_message: one message of the stream, inside curl's callback:
 * kept for the loop (ka_dispatch) */
static int on_ka_message(void *arg, const unsigned char *msg, size_t n)
{
	struct etcd_lease *l = arg;
	char err[128];
	if (etcd_grpc_parse_keepalive(msg, n, &l->ka_ans, err, sizeof(err))) {
		snprintf(l->ka_bad, sizeof(l->ka_bad), "%s", err);
		return DL_EPROTO;
	}
	l->ka_got = 1;
	event_active(l->ka_dispatch, EV_TIMEOUT, 0);
	return 0;
}

static int on_ka_chunk(void *arg, const char *data, size_t n)
{
	struct etcd_lease *l = arg;
	char err[128];
	int rc = etcd_grpc_reader_feed(&l->rd, data, n, on_ka_message, l, err,
				       sizeof(err));
	if (rc && !l->ka_bad[0])
		snprintf(l->ka_bad, sizeof(l->ka_bad), "%s", err);
	return rc;
}

/* on_ka_answer: the loop's turn of a stream's answer */
static void on_ka_answer(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_lease *l = arg;
	struct etcd_client *c = l->c;
	(void)fd;
	(void)what;
	if (!l->ka_got || !l->ka_waiting)
		return;
	l->ka_got = 0;
	l->ka_waiting = 0;
	l->ka_answers++;
	evtimer_del(l->ka_timeout);
	c->answer_try_ms = clock_now_ms() - l->sent_ms;
	etcd_answered(c);
	if (l->ka_ans.ttl == 0) {
		expired(l);
		return;
	}
	if (l->ka_ans.id != l->id) {
		log_error("bad etcd lease answer: lease %llx renewed, %llx "
			  "asked",
			  (unsigned long long)l->ka_ans.id,
			  (unsigned long long)l->id);
		etcd_arm(l->timer, 1000);
		return;
	}
	renewed(l);
}

/* on_ka_end: the stream ended (by etcd, the network, or a bad message);
 * a keep-alive it did not answer goes through the gateway */
static void on_ka_end(void *arg, const struct client_reply *r)
{
	struct etcd_lease *l = arg;
	struct etcd_client *c = l->c;
	size_t ep = l->ka_ep, answers = l->ka_answers;
	int waiting = l->ka_waiting;
	char why[400];
	l->ka = NULL; /* the client frees it */
	if (l->ka_bad[0])
		snprintf(why, sizeof(why), "%s", l->ka_bad);
	else if (r->transport_failed)
		snprintf(why, sizeof(why), "%s", r->error);
	else if (r->grpc_status > 0)
		snprintf(why, sizeof(why), "gRPC status %d: %s", r->grpc_status,
			 r->grpc_message);
	else
		snprintf(why, sizeof(why), "HTTP %ld, not a gRPC answer",
			 r->status);
	int bad = l->ka_bad[0] != 0;
	stream_close(l);
	if (!waiting)
		return; /* an idle stream: the next keep-alive opens one */
	if (bad || (!answers && !r->refused && !r->timed_out &&
		    r->grpc_status != ETCD_GRPC_UNAVAILABLE))
		/* not a member away: something that does not speak gRPC
		 * there, or refuses it */
		etcd_stream_off(l->c, ep, "lease keep-alives", why);
	else
		/* the member is away, or has no leader: the gateway's call
		 * is the next member's */
		etcd_moved_on(c, ep, "lease keep-alive", why);
	gateway_keepalive(l, l->try_ms);
}

/* on_ka_timeout: the keep-alive sent on the stream got no answer in its
 * try: the member hangs, or etcd is slow; the next member is asked, with
 * twice the time */
static void on_ka_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_lease *l = arg;
	char why[80];
	uint64_t ttl_ms = l->ttl_s * 1000ull;
	size_t ep = l->ka_ep;
	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "no answer within %llu ms",
		 (unsigned long long)l->try_ms);
	if (!l->ka_answers && etcd_answered_since(l->c, ep, l->sent_ms))
		/* a stream that never answered at a member that answers
		 * calls: something before it holds gRPC without a word.
		 * Where nothing answered, the member hangs or is
		 * overloaded, and the stream stays its keep-alives' way
		 * (the gateway's is two to three times etcd's work) */
		etcd_stream_off(l->c, ep, "lease keep-alives", why);
	stream_close(l);
	etcd_moved_on(l->c, ep, "lease keep-alive", why);
	gateway_keepalive(l, 2 * l->try_ms < ttl_ms ? 2 * l->try_ms : ttl_ms);
}

/* stream_keepalive: the keep-alive on the stream to the member in use
 * (opened, or opened again there); 0, or -1 when it cannot go there */
static int stream_keepalive(struct etcd_lease *l)
{
	static const char *const headers[] = {
	    /* etcd's require-leader: a member cut off from its peers
	     * refuses the stream, and ends it once it lost its leader */
	    "hasleader: true", NULL};
	struct etcd_client *c = l->c;
	unsigned char frame[ETCD_GRPC_KEEPALIVE_FRAME_MAX];
	size_t n;
	if (clock_now_ms() < c->stream_off_until[c->cur])
		return -1;
	if (l->ka && l->ka_ep != c->cur)
		stream_close(l);
	if (!l->ka) {
		struct client *g = etcd_grpc_client(c, c->cur);
		l->ka_ep = c->cur;
		l->ka = g ? client_duplex(g, KEEPALIVE_PATH, headers,
					  on_ka_chunk, on_ka_end, l)
			  : NULL;
		if (!l->ka)
			return -1;
	}
	n = etcd_grpc_keepalive_frame(l->id, frame);
	if (client_duplex_send(l->ka, frame, n) != 0) {
		stream_close(l);
		return -1;
	}
	l->ka_waiting = 1;
	etcd_arm(l->ka_timeout, l->try_ms);
	return 0;
}

static void lease_send(struct etcd_lease *l)
{
	json_t *body = NULL;
	char err[128];
	l->sent_ms = clock_now_ms();
	if (l->id) {
		l->try_ms = try_now(l);
		if (stream_keepalive(l) != 0)
			gateway_keepalive(l, l->try_ms);
		return;
	}
	/* a random id, positive and not 0 */
	l->want = (int64_t)(backoff_seed() >> 1) | 1;
	if (etcd_build_lease_grant(l->ttl_s, l->want, &body, err,
				   sizeof(err)) == 0)
		l->call = etcd_call(l->c, "lease grant", "/v3/lease/grant",
				    body, 0, on_lease, l);
	json_decref(body);
	if (!l->call)
		etcd_arm(l->timer, 1000);
}

struct etcd_lease *etcd_lease_new(struct etcd_client *c, unsigned ttl_s,
				  etcd_lease_cb cb, void *arg)
{
	struct etcd_lease *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->c = c;
	l->ttl_s = ttl_s;
	l->cb = cb;
	l->arg = arg;
	l->try_ms = try_base_ms(l);
	etcd_grpc_reader_init(&l->rd, ETCD_GRPC_MESSAGE_MAX);
	l->timer = evtimer_new(c->base, on_lease_timer, l);
	l->ka_timeout = evtimer_new(c->base, on_ka_timeout, l);
	l->ka_dispatch = event_new(c->base, -1, 0, on_ka_answer, l);
	if (!l->timer || !l->ka_timeout || !l->ka_dispatch) {
		if (l->timer)
			event_free(l->timer);
		if (l->ka_timeout)
			event_free(l->ka_timeout);
		if (l->ka_dispatch)
			event_free(l->ka_dispatch);
		free(l);
		return NULL;
	}
	lease_send(l);
	return l;
}

void etcd_lease_free(struct etcd_lease *l)
{
	if (!l)
		return;
	etcd_cancel(l->call);
	stream_close(l);
	etcd_grpc_reader_release(&l->rd);
	event_free(l->timer);
	event_free(l->ka_timeout);
	event_free(l->ka_dispatch);
	free(l);
}
