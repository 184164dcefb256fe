/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_client.c - etcd's v3 JSON gateway on the agent's event loop: calls
 * with failover and retry, the login token, watches that resume, a lease
 * kept alive. See etcd_client.h.
 *
 * Each endpoint has its own HTTP client (client.c); a call or a watch
 * runs on the endpoint in use and, when that one fails, moves the client
 * on to the next. Stream bytes arrive inside curl's callbacks, where
 * nothing may start or cancel a transfer: a watch stores them and a
 * zero-delay event hands them to its owner from the loop.
 */
#include "etcd_client.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/backoff.h"
#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define CALL_TIMEOUT_MS 5000
/* A try that reached etcd and got no answer in time waits twice as long
 * the next time, up to this: an etcd that is alive but overloaded (a few
 * thousand agents starting at once) must get time to answer, not the
 * same request again every few seconds on top of the first */
#define CALL_TIMEOUT_MAX_MS 60000
/* the pause before a try once every endpoint failed in a row
 * (backoff.h): a base of 100 ms doubling to 2 s, each pause drawn from
 * [base/2, base] */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS	 2000
/* A client etcd never answered gives up after FIRST_PASSES passes over
 * every endpoint when each attempt failed at once (nobody listens, a TLS
 * handshake refused: a wrong endpoint or credential, said in well under a
 * second); after FIRST_CONTACT_MS when some timed out without a
 * connection (an address nobody answers from); and after
 * FIRST_CONTACT_SLOW_MS when a connection was made but the answer came
 * late, or etcd said to try later (an etcd overloaded by thousands of
 * agents starting at once). */
#define FIRST_PASSES	      3
#define FIRST_CONTACT_MS      20000
#define FIRST_CONTACT_SLOW_MS 180000
#define AUTH_RETRIES	      2
/* the least a keep-alive's try waits for its answer */
#define KEEPALIVE_TRY_MIN_MS 250
#define STREAM_MAX	     (4u << 20) /* unread stream bytes kept */
#define ETCD_REQUIRE_LEADER  "Grpc-Metadata-hasleader"

struct etcd_client {
	struct event_base *base;
	struct agent_etcd_endpoints eps;
	struct client *http[AGENT_ETCD_MAX_ENDPOINTS];
	char list[AGENT_ETCD_MAX_ENDPOINTS * AGENT_ETCD_URL_MAX];
	size_t cur;
	int answered;  /* etcd answered this client once */
	int outage;    /* an outage was logged and not its end */
	int move_said; /* a failover was logged since the last answer */
	const char *username, *password;
	int has_cert;
	int have_token;
	struct etcd_call *auth; /* the login in flight */
	struct etcd_call *calls;
	struct etcd_watch *watches;
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
	uint64_t timeout_ms; /* of the next try */
	int fixed_timeout;   /* a keep-alive: never waits longer */
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
	struct client_call *hc;
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
	struct event *timer;
};

static void call_attempt(struct etcd_call *call);
static void watch_connect(struct etcd_watch *w);
static void login(struct etcd_client *c);

/* ------------------------------------------------------------ helpers */

static void arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(ev, &tv);
}

/* next_pause: the next pause of schedule b (backoff.h), which is set up
 * with a seed of its own at its first use (a call that never pauses
 * costs nothing): agents that failed together do not come back
 * together */
static uint64_t next_pause(struct backoff *b)
{
	if (!b->first_ms)
		backoff_init(b, BACKOFF_FIRST_MS, BACKOFF_MAX_MS,
			     backoff_seed());
	return backoff_next(b);
}

static void watch_stop_stream(struct etcd_watch *w);

/* watches_leave: every watch streaming from endpoint ep resumes from its
 * revision on the endpoint now in use. A member that hangs keeps its
 * streams open and silent (its kernel answers TCP), one cut off from its
 * leader sends nothing more: the calls that time out or are refused there
 * (the keep-alive, every third of the lease TTL) are what notices it. */
static void watches_leave(struct etcd_client *c, size_t ep)
{
	for (struct etcd_watch *w = c->watches; w; w = w->next) {
		if (!w->hc || w->ep != ep || w->over || w->freed || w->parked)
			continue;
		watch_stop_stream(w);
		arm(w->retry, 0);
	}
}

/* moved_on: an attempt on endpoint ep got no answer, or the member said
 * it has no leader; the client moves to the next endpoint (unless another
 * attempt already moved it), and so do the watches there. */
static void moved_on(struct etcd_client *c, size_t ep, const char *what,
		     const char *why)
{
	if (c->cur != ep || c->eps.n < 2)
		return;
	c->cur = (ep + 1) % c->eps.n;
	watches_leave(c, ep);
	/* said when a working endpoint fails, not on every retry */
	if (c->answered && !c->outage && !c->move_said) {
		c->move_said = 1;
		if (strstr(why, "no leader"))
			log_info("etcd at %s has no leader (cut off from its "
				 "peers?); trying %s",
				 c->eps.url[ep], c->eps.url[c->cur]);
		else
			log_info("etcd at %s did not answer %s (%s); trying %s",
				 c->eps.url[ep], what, why, c->eps.url[c->cur]);
	}
}

/* outage: every endpoint failed in a row; said once until etcd is back */
static void outage(struct etcd_client *c, const char *why)
{
	if (c->answered && !c->outage) {
		log_warn("etcd unreachable (%s: %s); workers keep running, "
			 "retrying",
			 c->list, why);
		c->outage = 1;
	}
}

static void answered(struct etcd_client *c)
{
	c->answered = 1;
	c->move_said = 0;
	if (c->outage) {
		log_info("etcd reachable again at %s", c->eps.url[c->cur]);
		c->outage = 0;
	}
}

/* What an answer of etcd (HTTP status, body) amounts to. */
enum verdict {
	V_OK,	 /* an answer */
	V_RETRY, /* no answer or unavailable: the next endpoint */
	V_LOGIN, /* the token is missing or no longer good */
	V_FAIL,	 /* an error answer; rc and msg say which */
};

/* is_etcd_answer: a 200's body is a JSON object with etcd's "header"
 * (or a stream's "result"); anything else (a load balancer's page, some
 * other service's JSON) is not etcd's gateway. Where the client did not
 * parse it (an answer over its limits), an object is taken as etcd's:
 * the parsers judge it. */
static int is_etcd_answer(const struct client_reply *r)
{
	size_t i = strspn(r->body, " \t\r\n");
	if (r->json)
		return json_object_get(r->json, "header") ||
		       json_object_get(r->json, "result");
	return i < r->body_len && r->body[i] == '{';
}

static enum verdict judge(struct etcd_client *c, const struct client_reply *r,
			  int *rc, char *msg, size_t size)
{
	struct etcd_error e;
	char perr[128];
	if (r->misconfigured) {
		snprintf(msg, size,
			 "%s (check --rdzv-endpoint and "
			 "--rdzv-conf protocol, cacert, cert, key)",
			 r->error);
		*rc = DL_EINVAL;
		return V_FAIL;
	}
	if (r->transport_failed) {
		snprintf(msg, size, "%s", r->error);
		return V_RETRY;
	}
	if (r->body_len && etcd_is_error(r->body, r->body_len) &&
	    etcd_parse_error(r->body, r->body_len, &e, perr, sizeof(perr)) ==
		0) {
		snprintf(msg, size, "etcd: %s (code %d)", e.message, e.code);
		*rc = etcd_grpc_to_dl(e.code);
		/* etcd 3.4 says some of "try later" with code 2 (unknown):
		 * a member without a leader answers a write "context
		 * deadline exceeded" after its request timeout; an
		 * unavailable member does not end an outage */
		if (*rc == DL_EAGAIN ||
		    (e.code == ETCD_GRPC_UNKNOWN &&
		     (strstr(e.message, "too many requests") ||
		      strstr(e.message, "timed out") ||
		      strstr(e.message, "deadline exceeded") ||
		      strstr(e.message, "leader changed") ||
		      strstr(e.message, "no leader"))))
			return V_RETRY;
		answered(c);
		if (e.code == ETCD_GRPC_UNAUTHENTICATED ||
		    (e.code == ETCD_GRPC_INVALID_ARGUMENT &&
		     strstr(e.message, "user name is empty")))
			return c->username ? V_LOGIN : V_FAIL;
		return V_FAIL;
	}
	if (r->status == 200 && r->body_len && is_etcd_answer(r)) {
		answered(c);
		return V_OK;
	}
	if (r->status == 502 || r->status == 503 || r->status == 504) {
		snprintf(msg, size, "HTTP %ld", r->status);
		return V_RETRY;
	}
	snprintf(msg, size,
		 "HTTP %ld from %s is not an answer of etcd's v3 gateway (is "
		 "it an etcd 3.4+ client URL?)",
		 r->status, c->eps.url[c->cur]);
	*rc = DL_EPROTO;
	return V_FAIL;
}

/* ---------------------------------------------------------------- calls */

static void call_free(struct etcd_call *call)
{
	struct etcd_call **pp;
	struct etcd_client *c = call->c;
	for (pp = &c->calls; *pp; pp = &(*pp)->next)
		if (*pp == call) {
			*pp = call->next;
			break;
		}
	if (c->auth == call)
		c->auth = NULL;
	if (call->hc)
		client_cancel(c->http[call->ep], call->hc);
	if (call->retry)
		event_free(call->retry);
	json_decref(call->body);
	free(call);
}

static void call_end(struct etcd_call *call, int rc, const char *body,
		     size_t len, const char *error)
{
	struct etcd_answer a = {rc, body ? body : "", len, error ? error : ""};
	etcd_cb cb = call->cb;
	void *arg = call->arg;
	call_free(call);
	cb(arg, &a);
}

/* hint: what to check when no endpoint answered for why. A TLS hello
 * answered in plain HTTP ("wrong version number"), or cut by a reset
 * (what etcd's plain listener does with it), is an etcd serving http,
 * not one that wants client certificates. */
static const char *hint(const struct etcd_client *c, const char *why)
{
	if (strncmp(c->list, "https:", 6) != 0)
		return "";
	if (strstr(why, "wrong version number") ||
	    strstr(why, "packet length too long") ||
	    strstr(why, "http request") || strstr(why, "reset by peer") ||
	    strstr(why, "SSL_ERROR_SYSCALL"))
		return " (is etcd serving plain HTTP there? give http:// "
		       "endpoints or --rdzv-conf protocol=http)";
	if (!c->has_cert)
		return " (if etcd asks for client certificates, give "
		       "--rdzv-conf cert=FILE,key=FILE)";
	return "";
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	call_attempt(arg);
}

/* retry_call: the attempt got no answer; the next endpoint now, or a
 * pause once every endpoint failed in a row. */
static void retry_call(struct etcd_call *call, const char *why)
{
	struct etcd_client *c = call->c;
	moved_on(c, call->ep, call->what, why);
	call->failures++;
	if (!c->answered || (call->flags & ETCD_CALL_ONCE)) {
		size_t limit = (call->flags & ETCD_CALL_ONCE)
				   ? c->eps.n
				   : c->eps.n * FIRST_PASSES;
		int give_up = call->failures >= limit;
		if (give_up && !(call->flags & ETCD_CALL_ONCE) && call->slow)
			give_up = clock_now_ms() >=
				  call->started_ms +
				      (call->reached ? FIRST_CONTACT_SLOW_MS
						     : FIRST_CONTACT_MS);
		if (give_up) {
			char msg[6400];
			snprintf(msg, sizeof(msg),
				 "no etcd answered at %s: %s%s", c->list, why,
				 hint(c, why));
			call_end(call, DL_ETIMEDOUT, NULL, 0, msg);
			return;
		}
	}
	if (call->failures % c->eps.n != 0 && !call->last_slow) {
		arm(call->retry, 0);
	} else {
		/* unreachable only once every endpoint failed in a row: one
		 * member that timed out is a failover, not an outage */
		if (call->failures % c->eps.n == 0)
			outage(c, why);
		arm(call->retry, next_pause(&call->backoff));
	}
}

static void resume_parked(struct etcd_client *c);
static void fail_parked(struct etcd_client *c, int rc, const char *msg);

static void on_reply(void *arg, const struct client_reply *r)
{
	struct etcd_call *call = arg;
	struct etcd_client *c = call->c;
	char msg[1200];
	int rc = 0;
	call->hc = NULL;
	switch (judge(c, r, &rc, msg, sizeof(msg))) {
	case V_OK: call_end(call, 0, r->body, r->body_len, NULL); return;
	case V_RETRY:
		/* etcd busy or slow: the next try waits (an overloaded etcd
		 * must not get every request twice at once) */
		/* slow: no answer in time, or etcd's own "try later"; any
		 * other failure (refused, a TLS handshake cut short) is
		 * as quick the next time */
		call->last_slow = r->timed_out || !r->transport_failed;
		if (call->last_slow)
			call->slow = 1;
		if ((r->timed_out && r->connected) || !r->transport_failed)
			call->reached = 1;
		if (r->timed_out && r->connected && !call->fixed_timeout)
			call->timeout_ms =
			    call->timeout_ms * 2 > CALL_TIMEOUT_MAX_MS
				? CALL_TIMEOUT_MAX_MS
				: call->timeout_ms * 2;
		retry_call(call, msg);
		return;
	case V_LOGIN:
		if (!call->is_auth && call->auth_retries++ < AUTH_RETRIES) {
			c->have_token = 0;
			call->parked = 1;
			login(c);
			return;
		}
		break;
	case V_FAIL: break;
	}
	call_end(call, rc ? rc : DL_EPROTO, r->body, r->body_len, msg);
}

static void call_attempt(struct etcd_call *call)
{
	struct etcd_client *c = call->c;
	if (c->username && !c->have_token && !call->is_auth) {
		call->parked = 1;
		login(c);
		return;
	}
	call->parked = 0;
	call->ep = c->cur;
	call->hc = client_call(c->http[call->ep], "POST", call->path,
			       call->body, call->timeout_ms, on_reply, call);
	if (!call->hc)
		retry_call(call, "out of memory");
}

static struct etcd_call *call_new(struct etcd_client *c, const char *what,
				  const char *path, json_t *body,
				  unsigned flags, etcd_cb cb, void *arg)
{
	struct etcd_call *call = calloc(1, sizeof(*call));
	if (!call)
		return NULL;
	call->c = c;
	call->what = what;
	snprintf(call->path, sizeof(call->path), "%s", path);
	call->body = json_incref(body);
	call->flags = flags;
	call->started_ms = clock_now_ms();
	call->timeout_ms = CALL_TIMEOUT_MS;
	call->cb = cb;
	call->arg = arg;
	call->retry = evtimer_new(c->base, on_retry, call);
	if (!call->retry) {
		json_decref(call->body);
		free(call);
		return NULL;
	}
	call->next = c->calls;
	c->calls = call;
	return call;
}

struct etcd_call *etcd_call(struct etcd_client *c, const char *what,
			    const char *path, json_t *body, unsigned flags,
			    etcd_cb cb, void *arg)
{
	struct etcd_call *call = call_new(c, what, path, body, flags, cb, arg);
	if (call)
		call_attempt(call);
	return call;
}

int etcd_answer_range(const struct etcd_answer *a,
		      struct etcd_range_response *r, char *err, size_t err_size)
{
	if (a->rc != 0)
		return dl_errorf(err, err_size, a->rc, "%s", a->error);
	return etcd_parse_range(a->body, a->len, r, err, err_size);
}

int etcd_answer_txn(const struct etcd_answer *a, struct etcd_txn_response *t,
		    char *err, size_t err_size)
{
	if (a->rc != 0)
		return dl_errorf(err, err_size, a->rc, "%s", a->error);
	return etcd_parse_txn(a->body, a->len, t, err, err_size);
}

void etcd_cancel(struct etcd_call *call)
{
	if (call)
		call_free(call);
}

/* ---------------------------------------------------------------- login */

static void on_login(void *arg, const struct etcd_answer *a)
{
	struct etcd_client *c = arg;
	char token[ETCD_TOKEN_MAX + 1], err[256], msg[1200];
	size_t i;
	if (a->rc == 0 &&
	    etcd_parse_authenticate(a->body, a->len, token, sizeof(token), err,
				    sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "bad login answer from etcd: %s",
			 err);
		fail_parked(c, DL_EPROTO, msg);
		return;
	}
	if (a->rc == DL_ECONFLICT && strstr(a->error, "not enabled")) {
		/* etcd without authentication: go on without a token */
		log_warn("etcd at %s has authentication off; the username "
			 "is not used",
			 c->list);
		c->username = NULL;
		resume_parked(c);
		return;
	}
	if ((a->rc == DL_EINVAL || a->rc == DL_EAUTH) &&
	    strncmp(a->error, "etcd: ", 6) == 0) {
		snprintf(msg, sizeof(msg),
			 "etcd refused the login of user %s: %s", c->username,
			 a->error);
		fail_parked(c, DL_EAUTH, msg);
		return;
	}
	if (a->rc != 0) {
		fail_parked(c, a->rc, a->error);
		return;
	}
	for (i = 0; i < c->eps.n; i++)
		if (client_set_header(c->http[i], "Authorization", token)) {
			fail_parked(c, DL_ENOMEM, "out of memory");
			return;
		}
	c->have_token = 1;
	resume_parked(c);
}

static void login(struct etcd_client *c)
{
	json_t *body = NULL;
	char err[128];
	if (c->auth)
		return;
	/* etcd 3.4 refuses an Authenticate that carries an invalid token
	 * ("invalid auth token"): the expired one goes before the login;
	 * calls started meanwhile go without one and wait for the new */
	for (size_t i = 0; i < c->eps.n; i++)
		client_set_header(c->http[i], "Authorization", NULL);
	c->have_token = 0;
	if (etcd_build_authenticate(c->username, c->password, &body, err,
				    sizeof(err)) != 0) {
		fail_parked(c, DL_EINVAL, err);
		return;
	}
	c->auth =
	    call_new(c, "login", "/v3/auth/authenticate", body, 0, on_login, c);
	json_decref(body);
	if (!c->auth) {
		fail_parked(c, DL_ENOMEM, "out of memory");
		return;
	}
	c->auth->is_auth = 1;
	call_attempt(c->auth);
}

static void resume_parked(struct etcd_client *c)
{
	struct etcd_call *call, *next;
	struct etcd_watch *w;
	for (call = c->calls; call; call = next) {
		next = call->next;
		if (call->parked)
			call_attempt(call);
	}
	for (w = c->watches; w; w = w->next)
		if (w->parked)
			watch_connect(w);
}

static void watch_over(struct etcd_watch *w, enum etcd_watch_what what,
		       const char *error);

/* fail_parked ends whatever waited for a login that cannot succeed;
 * each callback may free anything, so the lists are walked again */
static void fail_parked(struct etcd_client *c, int rc, const char *msg)
{
	for (;;) {
		struct etcd_call *call;
		struct etcd_watch *w;
		for (call = c->calls; call && !call->parked; call = call->next)
			;
		if (call) {
			call_end(call, rc, NULL, 0, msg);
			continue;
		}
		for (w = c->watches; w && !w->parked; w = w->next)
			;
		if (!w)
			return;
		w->parked = 0;
		watch_over(w, ETCD_WATCH_FAILED, msg);
	}
}

/* -------------------------------------------------------------- watches */

static void watch_stop_stream(struct etcd_watch *w)
{
	if (w->hc)
		client_cancel(w->c->http[w->ep], w->hc);
	w->hc = NULL;
	buf_release(&w->in);
	w->in_failed = 0;
	etcd_splitter_reset(&w->sp);
}

/* watch_over: the watch ends for its owner (it stays allocated until
 * etcd_watch_free). */
static void watch_over(struct etcd_watch *w, enum etcd_watch_what what,
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
	moved_on(w->c, w->ep, w->what, why);
	/* an outage once the pauses reached their cap */
	if (w->backoff.first_ms && w->backoff.base_ms >= BACKOFF_MAX_MS)
		outage(w->c, why);
	arm(w->retry, next_pause(&w->backoff));
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
			login(w->c);
		} else if (etcd_grpc_to_dl(e.code) == DL_EAGAIN) {
			watch_retry(w, msg);
		} else {
			watch_over(w, ETCD_WATCH_FAILED, msg);
		}
		return 1;
	}
	if (etcd_parse_watch(obj, len, &r, err, sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "bad watch answer: %s", err);
		watch_retry(w, msg);
		return 1;
	}
	answered(w->c);
	backoff_reset(&w->backoff);
	if (r.canceled) {
		if (r.compact_revision > 0) {
			etcd_watch_response_release(&r);
			watch_over(w, ETCD_WATCH_COMPACTED, "compacted");
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
				login(w->c);
			} else if (strstr(msg, "permission denied") ||
				   strstr(msg, "auth token")) {
				watch_over(w, ETCD_WATCH_FAILED, msg);
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
	switch (judge(w->c, r, &rc, msg, sizeof(msg))) {
	case V_OK:
	case V_RETRY: watch_retry(w, msg); return;
	case V_LOGIN:
		if (w->auth_retries++ < AUTH_RETRIES) {
			w->c->have_token = 0;
			w->parked = 1;
			login(w->c);
			return;
		}
		break;
	case V_FAIL: break;
	}
	watch_over(w, ETCD_WATCH_FAILED, msg);
}

static void watch_connect(struct etcd_watch *w)
{
	struct etcd_watch_create wc;
	json_t *body = NULL;
	char err[256];
	struct etcd_client *c = w->c;
	if (c->username && !c->have_token) {
		w->parked = 1;
		login(c);
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
		watch_over(w, ETCD_WATCH_FAILED, err);
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
	watch_connect(arg);
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
	watch_connect(w);
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

/* ---------------------------------------------------------------- lease */

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
		arm(l->timer, l->ttl_s * 1000 / 3);
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
		arm(l->timer, 1000);
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
		arm(l->timer, 1000);
		return;
	}
	if (!was) {
		int lost = l->lost;
		l->id = r.id;
		l->lost = 0;
		arm(l->timer, l->ttl_s * 1000 / 3);
		l->cb(l->arg, l->id, lost, NULL);
		return;
	}
	/* every third of the TTL from when this keep-alive was sent: an
	 * answer that was slow to come does not push the next one back */
	uint64_t due = l->sent_ms + l->ttl_s * 1000 / 3, now = clock_now_ms();
	arm(l->timer, due > now ? due - now : 0);
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
		/* a member that hangs must not cost the lease: each try
		 * waits a quarter of the TTL, then the next member is
		 * asked, in time whatever the TTL (the next keep-alive is
		 * due a third of the TTL after this one) */
		l->call = call_new(l->c, "lease keep-alive",
				   "/v3/lease/keepalive", body, 0, on_lease, l);
		if (l->call) {
			uint64_t t = l->ttl_s * 1000 / 4;
			l->call->timeout_ms =
			    t < KEEPALIVE_TRY_MIN_MS ? KEEPALIVE_TRY_MIN_MS : t;
			l->call->fixed_timeout = 1;
			call_attempt(l->call);
		}
	}
	json_decref(body);
	if (!l->call)
		arm(l->timer, 1000);
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

/* --------------------------------------------------------------- client */

int etcd_client_new(struct event_base *base, const struct agent_config *cfg,
		    struct etcd_client **out, char *err, size_t err_size)
{
	struct etcd_client *c = calloc(1, sizeof(*c));
	int rc;
	if (!c) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	c->base = base;
	rc = agent_etcd_endpoints_parse(cfg->endpoint, cfg->etcd.protocol,
					&c->eps, err, err_size);
	if (rc) {
		free(c);
		return rc;
	}
	for (size_t i = 0; i < c->eps.n; i++) {
		size_t k = strlen(c->list);
		snprintf(c->list + k, sizeof(c->list) - k, "%s%s", i ? "," : "",
			 c->eps.url[i]);
		rc = client_new(base, c->eps.url[i], NULL, cfg->etcd.cacert,
				&c->http[i], err, err_size);
		if (!rc && cfg->etcd.cert &&
		    client_set_cert(c->http[i], cfg->etcd.cert, cfg->etcd.key))
			rc = DL_ENOMEM;
		/* etcd's require-leader metadata, passed on by its gateway:
		 * a member without a leader (cut off from its peers) refuses
		 * calls and new watches at once ("no leader", code 14)
		 * instead of serving stale reads or waiting out its request
		 * timeout, and ends the watches it streams three election
		 * timeouts after it lost its leader: they resume elsewhere */
		if (!rc &&
		    client_set_header(c->http[i], ETCD_REQUIRE_LEADER, "true"))
			rc = DL_ENOMEM;
		if (rc) {
			etcd_client_free(c);
			if (rc == DL_ENOMEM)
				snprintf(err, err_size, "out of memory");
			return rc;
		}
	}
	c->has_cert = cfg->etcd.cert != NULL;
	c->username = cfg->etcd.username;
	c->password = cfg->etcd.password ? cfg->etcd.password : "";
	*out = c;
	return 0;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	while (c->calls)
		call_free(c->calls);
	while (c->watches)
		etcd_watch_free(c->watches);
	for (size_t i = 0; i < c->eps.n; i++)
		client_free(c->http[i]);
	free(c);
}

const char *etcd_client_endpoint(const struct etcd_client *c)
{
	return c->eps.url[c->cur];
}

const char *etcd_client_endpoints(const struct etcd_client *c)
{
	return c->list;
}
