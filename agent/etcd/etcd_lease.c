/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_lease.c - the etcd client's lease (etcd_client.h): granted with an
 * id of its own (a retried grant is one grant), kept alive every third of
 * its TTL, each keep-alive's try bounded so that a member that hangs does
 * not cost it, and long enough that an etcd that is only slow does.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/backoff.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "etcd_client.h"
#include "etcd_client_int.h"

/* the least a keep-alive's try waits for its answer */
#define KEEPALIVE_TRY_MIN_MS 250

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
};

/* try_base_ms: a keep-alive's first try when etcd answers quickly */
static uint64_t try_base_ms(const struct etcd_lease *l)
{
	uint64_t t = l->ttl_s * 1000 / 4;
	return t < KEEPALIVE_TRY_MIN_MS ? KEEPALIVE_TRY_MIN_MS : t;
}

static void lease_send(struct etcd_lease *l);

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
		log_warn("etcd lease %llx expired: this node was away from "
			 "etcd longer than its TTL (%u s); taking a new one",
			 (unsigned long long)was, l->ttl_s);
		l->id = 0;
		l->lost = 1;
		lease_send(l);
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
	/* the next keep-alive's first try: twice what this answer took,
	 * between a quarter of the TTL and the TTL. A member that hangs
	 * while etcd is quick costs a quarter of the TTL; an overloaded
	 * etcd whose answers take longer than that gets the time it needs,
	 * instead of each keep-alive given up before its answer and sent
	 * to the next member, just as busy, until the lease expires */
	uint64_t lat = l->c->answer_try_ms, ttl_ms = l->ttl_s * 1000ull;
	l->try_ms = 2 * lat < try_base_ms(l) ? try_base_ms(l)
		    : 2 * lat > ttl_ms	     ? ttl_ms
					     : 2 * lat;
	/* every third of the TTL from when this keep-alive was sent: an
	 * answer that was slow to come does not push the next one back */
	uint64_t due = l->sent_ms + l->ttl_s * 1000 / 3, now = clock_now_ms();
	etcd_arm(l->timer, due > now ? due - now : 0);
}

static void lease_send(struct etcd_lease *l)
{
	json_t *body = NULL;
	char err[128];
	if (!l->id)
		/* a random id, positive and not 0 */
		l->want = (int64_t)(backoff_seed() >> 1) | 1;
	int rc =
	    l->id ? etcd_build_lease_keepalive(l->id, &body, err, sizeof(err))
		  : etcd_build_lease_grant(l->ttl_s, l->want, &body, err,
					   sizeof(err));
	l->sent_ms = clock_now_ms();
	if (rc == 0 && !l->id)
		l->call = etcd_call(l->c, "lease grant", "/v3/lease/grant",
				    body, 0, on_lease, l);
	if (rc == 0 && l->id) {
		/* a member that hangs must not cost the lease: the first
		 * try waits a quarter of the TTL (while etcd is quick, see
		 * on_lease), then the next member is asked, in time
		 * whatever the TTL (the next keep-alive is due a third of
		 * the TTL after this one). A try that took the connection
		 * and got no answer makes the next one wait twice as long,
		 * up to the TTL: when every member is slow, the answer
		 * gets the time it takes */
		l->call =
		    etcd_call_new(l->c, "lease keep-alive",
				  "/v3/lease/keepalive", body, 0, on_lease, l);
		if (l->call) {
			l->call->timeout_ms = l->try_ms;
			l->call->timeout_cap_ms = l->ttl_s * 1000ull > l->try_ms
						      ? l->ttl_s * 1000ull
						      : l->try_ms;
			etcd_call_attempt(l->call);
		}
	}
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
	l->timer = evtimer_new(c->base, on_lease_timer, l);
	if (!l->timer) {
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
	event_free(l->timer);
	free(l);
}
