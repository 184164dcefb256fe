/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_client_int.h - the insides of the etcd client (etcd_client.h),
 * shared by its three files: etcd_client.c (calls, failover, outages, the
 * login), etcd_watch.c (watches that resume) and etcd_lease.c (a lease
 * kept alive). Private to those three.
 */
#ifndef DLAUNCH_AGENT_ETCD_CLIENT_INT_H
#define DLAUNCH_AGENT_ETCD_CLIENT_INT_H
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/backoff.h"
#include "dlaunch/buf.h"
#include "etcd_client.h"
#include "etcd_grpc.h"

struct event;
struct client;
struct client_call;
struct client_reply;

/* the pause before a try once every endpoint failed in a row
 * (backoff.h): a base of 100 ms doubling to 2 s, each pause drawn from
 * [base/2, base] */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS	 2000
/* an endpoint that did not take a gRPC stream is asked again after this
 * long (etcd_stream_off) */
#define STREAM_OFF_MS 60000
/* logins tried again for one call or watch whose token was refused */
#define AUTH_RETRIES 2

/* The client's gRPC Watch stream (etcd_watch.c): every watch of the
 * client on one stream to the member in use, told apart by the ids the
 * client gives them. Through the JSON gateway each watch is a request
 * and a gRPC stream of its own inside etcd, its HTTP/1.1 connection held
 * while it lasts (docs/etcd.md, "Keep-alives and watches on streams"). */
struct etcd_wstream {
	struct client_call *hc; /* open on endpoint ep, or NULL */
	size_t ep;
	unsigned gen;		  /* counts the streams opened */
	unsigned token_gen;	  /* the login whose token it carries */
	int64_t last_id;	  /* the last watch id given on it */
	int64_t created_upto;	  /* the last id whose create was answered */
	int answered;		  /* it sent a message */
	uint64_t first_answer_ms; /* how long its first answer may take */
	uint64_t opened_ms;	  /* when it was opened */
	/* a stream to that endpoint answered once */
	unsigned char took[AGENT_ETCD_MAX_ENDPOINTS];
	char bad[240]; /* what was wrong with what it sent */
	struct etcd_grpc_reader rd;
	struct buf in; /* bytes not yet handed over */
	int in_failed;
	struct event *dispatch, *timeout;
};

struct etcd_client {
	struct event_base *base;
	struct agent_etcd_endpoints eps;
	struct client *http[AGENT_ETCD_MAX_ENDPOINTS];
	/* the gRPC streams' clients (etcd_grpc_client): a connection cache
	 * of their own, so that no HTTP/1.1 call is sent on a stream's
	 * HTTP/2 connection, nor a stream on a call's connection (each
	 * stream has a connection of its own: client_duplex) */
	struct client *grpc[AGENT_ETCD_MAX_ENDPOINTS];
	const char *cacert, *cert, *key; /* TLS files, for those clients */
	char list[AGENT_ETCD_MAX_ENDPOINTS * AGENT_ETCD_URL_MAX];
	size_t cur;
	int answered;  /* etcd answered this client once */
	int outage;    /* an outage was logged and not its end */
	int slow_said; /* "etcd slow" was logged since the last answer */
	/* how long the try that got the last answer took (etcd_lease.c
	 * reads it in its callback to size its next keep-alive's try) */
	uint64_t answer_try_ms;
	int move_said; /* a failover was logged since the last answer */
	/* until when an endpoint's lease keep-alives go through the gateway
	 * (it did not take a gRPC stream: etcd_lease.c), and whether that
	 * was said */
	uint64_t stream_off_until[AGENT_ETCD_MAX_ENDPOINTS];
	int stream_off_said;
	/* the latest start of a call's try that the member at an endpoint
	 * answered (etcd_answered_since) */
	uint64_t took_call_ms[AGENT_ETCD_MAX_ENDPOINTS];
	const char *username, *password;
	int has_cert;
	int have_token;
	/* the token of the login (for the watch stream's metadata), and
	 * how many logins got one */
	char token[ETCD_TOKEN_MAX + 1];
	unsigned token_gen;
	struct etcd_call *auth; /* the login in flight */
	struct etcd_call *calls;
	struct etcd_watch *watches;
	struct etcd_wstream ws;
};

struct etcd_call {
	struct etcd_client *c;
	const char *what;
	char path[64];
	json_t *body;
	unsigned flags;
	int is_auth;
	etcd_cb cb;
	void *arg;
	struct client_call *hc;
	size_t ep;	 /* endpoint of the attempt in flight */
	size_t failures; /* attempts without an answer, in a row */
	int slow;	 /* one of them was not refused at once */
	int last_slow;	 /* ... the last one */
	int reached;	 /* one of them got a connection */
	uint64_t started_ms;
	uint64_t try_started_ms; /* of the attempt in flight */
	uint64_t timeout_ms;	 /* of the next try */
	/* the most a try may wait after tries that took the connection
	 * and got no answer doubled it (0: CALL_TIMEOUT_MAX_MS) */
	uint64_t timeout_cap_ms;
	/* tries of the current pass over the endpoints that reached etcd
	 * and got no answer in time, or its "try later" */
	size_t pass_busy;
	int auth_retries;
	int parked;		/* waits for the login */
	struct backoff backoff; /* set up at its first pause */
	struct event *retry;
	struct etcd_call *next;
};

struct etcd_watch {
	struct etcd_client *c;
	const char *what;
	char *key, *end;
	size_t key_len, end_len;
	int64_t next_rev;
	int prev_kv;
	etcd_watch_cb cb;
	void *arg;
	struct client_call *hc; /* its stream through the gateway */
	/* its id on the client's gRPC stream (0: not there); its create is
	 * unanswered while sid > the stream's created_upto */
	int64_t sid;
	size_t ep;
	int parked, auth_retries, over;
	int in_cb, freed;	/* freed inside its own callback: later */
	struct backoff backoff; /* set up at its first pause */
	struct event *retry, *dispatch;
	struct buf in; /* stream bytes not yet handed over */
	int in_failed;
	struct etcd_splitter sp;
	struct etcd_watch *next;
};

/* What an answer of etcd (HTTP status, body) amounts to. */
enum verdict {
	V_OK,	 /* an answer */
	V_RETRY, /* no answer or unavailable: the next endpoint */
	V_LOGIN, /* the token is missing or no longer good */
	V_FAIL,	 /* an error answer; rc and msg say which */
};

/* etcd_arm: ev fires in ms milliseconds */
void etcd_arm(struct event *ev, uint64_t ms);
/* etcd_next_pause: the next pause of schedule b, set up at its first use */
uint64_t etcd_next_pause(struct backoff *b);
/* etcd_moved_on: an attempt on endpoint ep got no answer (why): the
 * client, and its watches there, move to the next endpoint */
void etcd_moved_on(struct etcd_client *c, size_t ep, const char *what,
		   const char *why);
/* etcd_outage: every endpoint failed in a row (logged once) */
void etcd_outage(struct etcd_client *c, const char *why);
/* etcd_slow: every endpoint took the call and none answered in time, or
 * each said to try later: etcd is busy (or hung), not away (logged once
 * until an answer; no outage is said, nor its end) */
void etcd_slow(struct etcd_client *c, const char *what, uint64_t waited_ms,
	       const char *why);
/* etcd_answered: etcd answered (ends an outage) */
void etcd_answered(struct etcd_client *c);
/* etcd_judge: what reply r amounts to; rc and msg for V_FAIL, msg for
 * V_RETRY */
enum verdict etcd_judge(struct etcd_client *c, const struct client_reply *r,
			int *rc, char *msg, size_t size);
/* etcd_grpc_client: endpoint ep's client for gRPC streams, made at its
 * first use; NULL when out of memory */
struct client *etcd_grpc_client(struct etcd_client *c, size_t ep);
/* etcd_stream_off: endpoint ep did not take a gRPC stream (why): what
 * would go on one goes through its JSON gateway for a while (logged once) */
void etcd_stream_off(struct etcd_client *c, size_t ep, const char *what,
		     const char *why);
/* etcd_answered_since: the member at ep answered a call tried at or
 * after since_ms. A stream there silent since then does not take gRPC
 * (something before etcd holds it); a member that answered nothing is
 * away, hung or overloaded, and its streams are not to blame */
int etcd_answered_since(const struct etcd_client *c, size_t ep,
			uint64_t since_ms);
/* etcd_login: log in (once at a time); what waits for it is parked */
void etcd_login(struct etcd_client *c);
/* etcd_call_new: a call not yet tried (etcd_call_attempt tries it) */
struct etcd_call *etcd_call_new(struct etcd_client *c, const char *what,
				const char *path, json_t *body, unsigned flags,
				etcd_cb cb, void *arg);
void etcd_call_attempt(struct etcd_call *call);

/* etcd_watch.c */
/* etcd_watches_leave: every watch streaming from endpoint ep resumes on
 * the endpoint now in use */
void etcd_watches_leave(struct etcd_client *c, size_t ep);
/* etcd_watch_connect: (re)start w's stream from its next revision */
void etcd_watch_connect(struct etcd_watch *w);
/* etcd_wstream_init: the watch stream's parts, none open */
void etcd_wstream_init(struct etcd_client *c);
/* etcd_wstream_free: the watch stream closed and its storage freed (the
 * client's end) */
void etcd_wstream_free(struct etcd_client *c);
/* etcd_watch_over: w ends for its owner (what, error) */
void etcd_watch_over(struct etcd_watch *w, enum etcd_watch_what what,
		     const char *error);

#endif
