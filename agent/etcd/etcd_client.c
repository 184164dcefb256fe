/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_client.c - etcd's v3 JSON gateway on the agent's event loop: calls
 * with failover and retry, outages, the login token (watches that resume:
 * etcd_watch.c; a lease kept alive: etcd_lease.c). See etcd_client.h.
 *
 * Each endpoint has its own HTTP client (../rdzv/client.c); a call or
 * a watch runs on the endpoint in use and, when that one fails, moves
 * the client on to the next. Stream bytes arrive inside curl's callbacks, where
 * nothing may start or cancel a transfer: a watch stores them and a
 * zero-delay event hands them to its owner from the loop.
 */
#include "etcd_client.h"
#include "etcd_client_int.h"

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
/* A call's first try waits at least this many times what the last
 * answer's try took: while etcd answers in seconds (a burst of joins) a
 * call is not given up before its answer, and sent again to the next
 * member, as busy, doubling the work that made it slow */
#define CALL_TIMEOUT_LATENCY 3
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
#define ETCD_REQUIRE_LEADER   "Grpc-Metadata-hasleader"

static void resume_parked(struct etcd_client *c);
static void fail_parked(struct etcd_client *c, int rc, const char *msg);

/* ------------------------------------------------------------ helpers */

void etcd_arm(struct event *ev, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	evtimer_add(ev, &tv);
}

/* next_pause: the next pause of schedule b (backoff.h), which is set up
 * with a seed of its own at its first use (a call that never pauses
 * costs nothing): agents that failed together do not come back
 * together */
uint64_t etcd_next_pause(struct backoff *b)
{
	if (!b->first_ms)
		backoff_init(b, BACKOFF_FIRST_MS, BACKOFF_MAX_MS,
			     backoff_seed());
	return backoff_next(b);
}

/* moved_on: an attempt on endpoint ep got no answer, or the member said
 * it has no leader; the client moves to the next endpoint (unless another
 * attempt already moved it), and so do the watches there. */
void etcd_moved_on(struct etcd_client *c, size_t ep, const char *what,
		   const char *why)
{
	if (c->cur != ep || c->eps.n < 2)
		return;
	c->cur = (ep + 1) % c->eps.n;
	etcd_watches_leave(c, ep);
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
void etcd_outage(struct etcd_client *c, const char *why)
{
	if (c->answered && !c->outage) {
		log_warn("etcd unreachable (%s: %s); workers keep running, "
			 "retrying",
			 c->list, why);
		c->outage = 1;
	}
}

void etcd_slow(struct etcd_client *c, const char *what, uint64_t waited_ms,
	       const char *why)
{
	if (c->answered && !c->outage && !c->slow_said) {
		log_info("etcd slow: every member at %s took %s and none "
			 "answered within %llu ms (%s); overloaded or hung, "
			 "waiting longer",
			 c->list, what, (unsigned long long)waited_ms, why);
		c->slow_said = 1;
	}
}

void etcd_answered(struct etcd_client *c)
{
	c->answered = 1;
	c->move_said = 0;
	c->slow_said = 0;
	if (c->outage) {
		log_info("etcd reachable again at %s", c->eps.url[c->cur]);
		c->outage = 0;
	}
}

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

enum verdict etcd_judge(struct etcd_client *c, const struct client_reply *r,
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
		etcd_answered(c);
		if (e.code == ETCD_GRPC_UNAUTHENTICATED ||
		    (e.code == ETCD_GRPC_INVALID_ARGUMENT &&
		     strstr(e.message, "user name is empty")))
			return c->username ? V_LOGIN : V_FAIL;
		return V_FAIL;
	}
	if (r->status == 200 && r->body_len && is_etcd_answer(r)) {
		etcd_answered(c);
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
	etcd_call_attempt(arg);
}

/* retry_call: the attempt got no answer; the next endpoint now, or a
 * pause once every endpoint failed in a row. */
static void retry_call(struct etcd_call *call, const char *why)
{
	struct etcd_client *c = call->c;
	etcd_moved_on(c, call->ep, call->what, why);
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
		etcd_arm(call->retry, 0);
	} else {
		/* unreachable only once every endpoint failed in a row: one
		 * member that timed out is a failover, not an outage; and
		 * not when every one of them took the call and was only
		 * slow to answer (an overloaded etcd answers in the end) */
		if (call->failures % c->eps.n == 0) {
			if (call->pass_busy >= c->eps.n)
				etcd_slow(c, call->what, call->timeout_ms, why);
			else
				etcd_outage(c, why);
			call->pass_busy = 0;
		}
		etcd_arm(call->retry, etcd_next_pause(&call->backoff));
	}
}

static void on_reply(void *arg, const struct client_reply *r)
{
	struct etcd_call *call = arg;
	struct etcd_client *c = call->c;
	char msg[1200];
	int rc = 0;
	enum verdict v;
	uint64_t cap =
	    call->timeout_cap_ms ? call->timeout_cap_ms : CALL_TIMEOUT_MAX_MS;
	call->hc = NULL;
	v = etcd_judge(c, r, &rc, msg, sizeof(msg));
	if (v != V_RETRY) {
		c->answer_try_ms = clock_now_ms() - call->try_started_ms;
		if (call->try_started_ms > c->took_call_ms[call->ep])
			c->took_call_ms[call->ep] = call->try_started_ms;
	}
	switch (v) {
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
		if ((r->timed_out && r->connected) || !r->transport_failed) {
			call->reached = 1;
			call->pass_busy++;
		}
		if (r->timed_out && r->connected && call->timeout_ms < cap)
			call->timeout_ms = call->timeout_ms * 2 < cap
					       ? call->timeout_ms * 2
					       : cap;
		retry_call(call, msg);
		return;
	case V_LOGIN:
		if (!call->is_auth && call->auth_retries++ < AUTH_RETRIES) {
			c->have_token = 0;
			call->parked = 1;
			etcd_login(c);
			return;
		}
		break;
	case V_FAIL: break;
	}
	call_end(call, rc ? rc : DL_EPROTO, r->body, r->body_len, msg);
}

void etcd_call_attempt(struct etcd_call *call)
{
	struct etcd_client *c = call->c;
	if (c->username && !c->have_token && !call->is_auth) {
		call->parked = 1;
		etcd_login(c);
		return;
	}
	call->parked = 0;
	call->ep = c->cur;
	call->try_started_ms = clock_now_ms();
	call->hc = client_call(c->http[call->ep], "POST", call->path,
			       call->body, call->timeout_ms, on_reply, call);
	if (!call->hc)
		retry_call(call, "out of memory");
}

struct etcd_call *etcd_call_new(struct etcd_client *c, const char *what,
				const char *path, json_t *body, unsigned flags,
				etcd_cb cb, void *arg)
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
	call->timeout_ms = CALL_TIMEOUT_LATENCY * c->answer_try_ms;
	if (call->timeout_ms < CALL_TIMEOUT_MS)
		call->timeout_ms = CALL_TIMEOUT_MS;
	if (call->timeout_ms > CALL_TIMEOUT_MAX_MS)
		call->timeout_ms = CALL_TIMEOUT_MAX_MS;
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
	struct etcd_call *call =
	    etcd_call_new(c, what, path, body, flags, cb, arg);
	if (call)
		etcd_call_attempt(call);
	return call;
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
	snprintf(c->token, sizeof(c->token), "%s", token);
	c->token_gen++;
	c->have_token = 1;
	resume_parked(c);
}

void etcd_login(struct etcd_client *c)
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
	c->auth = etcd_call_new(c, "login", "/v3/auth/authenticate", body, 0,
				on_login, c);
	json_decref(body);
	if (!c->auth) {
		fail_parked(c, DL_ENOMEM, "out of memory");
		return;
	}
	c->auth->is_auth = 1;
	etcd_call_attempt(c->auth);
}

static void resume_parked(struct etcd_client *c)
{
	struct etcd_call *call, *next;
	struct etcd_watch *w;
	for (call = c->calls; call; call = next) {
		next = call->next;
		if (call->parked)
			etcd_call_attempt(call);
	}
	for (w = c->watches; w; w = w->next)
		if (w->parked)
			etcd_watch_connect(w);
}

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
		etcd_watch_over(w, ETCD_WATCH_FAILED, msg);
	}
}

/* --------------------------------------------------------------- client */

void etcd_stream_off(struct etcd_client *c, size_t ep, const char *what,
		     const char *why)
{
	if (!c->stream_off_said)
		log_info("etcd at %s did not take %s on a gRPC stream (%s); "
			 "the agent's watches and lease keep-alives go "
			 "through its JSON gateway",
			 c->eps.url[ep], what, why);
	c->stream_off_said = 1;
	c->stream_off_until[ep] = clock_now_ms() + STREAM_OFF_MS;
}

int etcd_answered_since(const struct etcd_client *c, size_t ep,
			uint64_t since_ms)
{
	return c->took_call_ms[ep] >= since_ms;
}

struct client *etcd_grpc_client(struct etcd_client *c, size_t ep)
{
	struct client **g = &c->grpc[ep];
	char err[256];
	if (*g)
		return *g;
	if (client_new(c->base, c->eps.url[ep], NULL, c->cacert, g, err,
		       sizeof(err)) != 0)
		return NULL;
	if (c->cert && client_set_cert(*g, c->cert, c->key) != 0) {
		client_free(*g);
		*g = NULL;
	}
	return *g;
}

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
	etcd_wstream_init(c);
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
	c->cacert = cfg->etcd.cacert;
	c->cert = cfg->etcd.cert;
	c->key = cfg->etcd.key;
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
	etcd_wstream_free(c);
	while (c->watches)
		etcd_watch_free(c->watches);
	for (size_t i = 0; i < c->eps.n; i++) {
		client_free(c->http[i]);
		client_free(c->grpc[i]);
	}
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
