/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_client.h - etcd's v3 JSON gateway on the agent's event loop.
 *
 * Calls, watches and a lease over libcurl (../rdzv/client.c), with the
 * bodies and parsers of etcd_proto.h. The client holds every endpoint of
 * the cluster and moves to the next one when a call gets no answer or
 * etcd says it is unavailable; it logs in (POST /v3/auth/authenticate)
 * when a user name is configured and again when etcd says the token is
 * no longer good; it speaks TLS with a CA and a client certificate when
 * told to.
 *
 * Until etcd has answered this client once, a call that reaches no
 * endpoint in a few passes fails (DL_ETIMEDOUT): a wrong --rdzv-endpoint
 * must end a join in seconds. After that, etcd being away is an outage:
 * calls are retried with backoff until they are answered or cancelled,
 * and the log says so once, and once more when etcd is back.
 */
#ifndef DLAUNCH_AGENT_ETCD_CLIENT_H
#define DLAUNCH_AGENT_ETCD_CLIENT_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/agent.h"
#include "etcd_proto.h"

struct event_base;
struct etcd_client;
struct etcd_call;
struct etcd_watch;
struct etcd_lease;

/* The end of a call: struct etcd_answer (etcd_proto.h). */
typedef void (*etcd_cb)(void *arg, const struct etcd_answer *a);

/* Calls that must not wait out an outage (a leave at exit) try each
 * endpoint once. */
#define ETCD_CALL_ONCE 1u

int etcd_client_new(struct event_base *base, const struct agent_config *cfg,
		    struct etcd_client **out, char *err, size_t err_size);
/* etcd_client_free ends every call, watch and lease without a callback. */
void etcd_client_free(struct etcd_client *c);
/* the endpoint in use (a base URL); borrowed */
const char *etcd_client_endpoint(const struct etcd_client *c);
/* the comma-separated endpoints as given, for messages; borrowed */
const char *etcd_client_endpoints(const struct etcd_client *c);

/* etcd_call POSTs body (borrowed, encoded at once) to path ("/v3/kv/txn")
 * and ends in exactly one cb unless cancelled; what names it in the log.
 * NULL when out of memory. */
struct etcd_call *etcd_call(struct etcd_client *c, const char *what,
			    const char *path, json_t *body, unsigned flags,
			    etcd_cb cb, void *arg);
/* etcd_cancel: cb is not called. NULL is allowed; not from its own cb. */
void etcd_cancel(struct etcd_call *call);

/*
 * A watch of [key, range_end) (range_end NULL: the key alone) from
 * start_revision (0: from now). Its callback gets each answer with
 * events (WATCH_EVENTS, in revision order and each revision once: after
 * a dropped connection the watch resumes, on any endpoint, from the
 * revision after the last one delivered); WATCH_COMPACTED when that
 * revision is gone (the owner reads the keys again and starts a new
 * watch; this one is over); WATCH_FAILED when retrying cannot help
 * (error says why; this one is over).
 */
enum etcd_watch_what {
	ETCD_WATCH_EVENTS,
	ETCD_WATCH_COMPACTED,
	ETCD_WATCH_FAILED,
};
typedef void (*etcd_watch_cb)(void *arg, enum etcd_watch_what what,
			      const struct etcd_watch_response *w,
			      const char *error);
struct etcd_watch *etcd_watch_new(struct etcd_client *c, const char *what,
				  const void *key, size_t key_len,
				  const void *range_end, size_t range_end_len,
				  int64_t start_revision, int prev_kv,
				  etcd_watch_cb cb, void *arg);
void etcd_watch_free(struct etcd_watch *w); /* NULL is allowed */

/*
 * A lease of ttl_s seconds kept alive every third of it. cb(arg, id, 0)
 * when it is granted; cb(arg, id, 1) when etcd says it expired (this
 * node was away longer than the TTL; whatever was bound to it is gone)
 * and a new one, id, was granted in its place; cb(arg, 0, -1, error)
 * when it cannot be granted at all.
 */
typedef void (*etcd_lease_cb)(void *arg, int64_t id, int lost,
			      const char *error);
struct etcd_lease *etcd_lease_new(struct etcd_client *c, unsigned ttl_s,
				  etcd_lease_cb cb, void *arg);
/* etcd_lease_free stops keeping it alive (revoking is the owner's:
 * POST /v3/lease/revoke with its id). */
void etcd_lease_free(struct etcd_lease *l);

#endif
