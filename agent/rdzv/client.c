/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c - rendezvous HTTP calls: libcurl multi on a libevent loop.
 *
 * curl tells us which sockets to watch (socket_cb) and when to wake it
 * (timer_cb); libevent calls back into curl_multi_socket_action; finished
 * transfers are collected in check_done, which is the only place user
 * callbacks run, outside every curl callback, so they may start or cancel
 * calls freely.
 */
#include "dlaunch/agent_client.h"

#include <curl/curl.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dlaunch/buf.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"

/* the most a request or an answer may hold: etcd's layer takes answers
 * up to ETCD_ANSWER_MAX (agent/etcd/etcd_proto.h), and a new leader's
 * read of a 4096-node job's node keys and inboxes was 4.85 MB */
#define CLIENT_MAX_BODY_BYTES	  (16u << 20)
#define CLIENT_CONNECT_TIMEOUT_MS 5000
/* extra headers a client sends (the Authorization, etcd's require-leader) */
#define CLIENT_MAX_HEADERS 4

struct client_call {
	struct client *c;
	CURL *easy;
	struct curl_slist *headers;
	struct buf req_body;
	struct buf resp;
	char errbuf[CURL_ERROR_SIZE];
	client_cb cb;
	client_chunk_cb chunk; /* a stream: bytes of a 200 answer go here */
	void *arg;
	/* a duplex call (client_duplex): what is queued to send; paused:
	 * curl was told there is nothing more for now */
	int duplex, paused;
	/* the answer's gRPC status came: the call is over (check_done) */
	int grpc_ended;
	/* a duplex call's nudge after each piece of its answer (on_nudge) */
	struct event *nudge;
	struct buf out;
	int grpc_status; /* -1 until a grpc-status header or trailer */
	char grpc_message[256];
	struct client_call *next;
};

struct client {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	char *base_url;
	char *headers[CLIENT_MAX_HEADERS]; /* "Name: value" */
	char *ca_file;
	char *cert_file, *key_file;
	struct client_call *calls;
};

struct sock_ctx {
	struct event *ev;
};

static int curl_global_done;

static void check_done(struct client *c);

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	int running, flags = 0;
	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(c->multi, fd, flags, &running);
	check_done(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	int running;
	(void)fd;
	(void)what;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(c);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp,
		     void *socketp)
{
	struct client *c = userp;
	struct sock_ctx *sc = socketp;
	short kind = EV_PERSIST;
	(void)easy;

	if (what == CURL_POLL_REMOVE) {
		if (sc) {
			event_free(sc->ev);
			free(sc);
			curl_multi_assign(c->multi, s, NULL);
		}
		return 0;
	}
	if (what & CURL_POLL_IN)
		kind |= EV_READ;
	if (what & CURL_POLL_OUT)
		kind |= EV_WRITE;
	if (!sc) {
		sc = calloc(1, sizeof(*sc));
		if (!sc)
			return -1;
		curl_multi_assign(c->multi, s, sc);
	} else {
		event_free(sc->ev);
	}
	sc->ev = event_new(c->base, s, kind, on_socket_event, c);
	if (!sc->ev)
		return -1;
	event_add(sc->ev, NULL);
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct client *c = userp;
	(void)multi;
	if (timeout_ms < 0) {
		evtimer_del(c->timer);
	} else {
		struct timeval tv = {timeout_ms / 1000,
				     (timeout_ms % 1000) * 1000};
		evtimer_add(c->timer, &tv);
	}
	return 0;
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct client_call *call = arg;
	size_t n = size * nmemb;
	if (call->nudge)
		event_active(call->nudge, EV_TIMEOUT, 0);
	if (call->chunk) {
		long status = 0;
		const char *type = NULL;
		curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
		if (call->duplex)
			curl_easy_getinfo(call->easy, CURLINFO_CONTENT_TYPE,
					  &type);
		if (status == 200 &&
		    (!call->duplex ||
		     (type && strncasecmp(type, "application/grpc", 16) == 0)))
			return call->chunk(call->arg, data, n) == 0 ? n : 0;
	}
	if (buf_append(&call->resp, data, n) != 0)
		return 0; /* over the limit: curl aborts the transfer */
	return n;
}

/* header_cb keeps a duplex call's gRPC status, which comes in the
 * answer's headers (an answer of headers alone) or in its trailers */
static size_t header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct client_call *call = arg;
	size_t n = size * nmemb, k;
	if (n > 12 && strncasecmp(data, "grpc-status:", 12) == 0) {
		call->grpc_status = atoi(data + 12);
		call->grpc_ended = call->duplex;
	} else if (n > 13 && strncasecmp(data, "grpc-message:", 13) == 0) {
		data += 13;
		n -= 13;
		while (n && (*data == ' ' || *data == '\t'))
			data++, n--;
		while (n && (data[n - 1] == '\r' || data[n - 1] == '\n'))
			n--;
		k = n < sizeof(call->grpc_message) - 1
			? n
			: sizeof(call->grpc_message) - 1;
		memcpy(call->grpc_message, data, k);
		call->grpc_message[k] = '\0';
	}
	return size * nmemb;
}

/* read_cb gives curl what a duplex call has queued, or pauses the upload
 * until client_duplex_send queues more */
static size_t read_cb(char *data, size_t size, size_t nmemb, void *arg)
{
	struct client_call *call = arg;
	size_t room = size * nmemb, k = call->out.len;
	if (k == 0) {
		call->paused = 1;
		return CURL_READFUNC_PAUSE;
	}
	if (k > room)
		k = room;
	memcpy(data, call->out.data, k);
	buf_consume(&call->out, k);
	return k;
}

static void call_free(struct client_call *call)
{
	struct client_call **pp;
	for (pp = &call->c->calls; *pp; pp = &(*pp)->next)
		if (*pp == call) {
			*pp = call->next;
			break;
		}
	if (call->easy) {
		curl_multi_remove_handle(call->c->multi, call->easy);
		curl_easy_cleanup(call->easy);
	}
	if (call->nudge)
		event_free(call->nudge);
	curl_slist_free_all(call->headers);
	buf_release(&call->req_body);
	buf_release(&call->resp);
	buf_release(&call->out);
	free(call);
}

static void finish(struct client_call *call, CURLcode code)
{
	struct client_reply r;
	json_t *json = NULL;
	char msg[512];
	memset(&r, 0, sizeof(r));
	r.error = "";
	r.grpc_status = call->grpc_status;
	r.grpc_message = call->grpc_message;
	r.body = buf_cstr(&call->resp);
	r.body_len = call->resp.len;
	if (code != CURLE_OK) {
		r.transport_failed = 1;
		r.misconfigured = code == CURLE_PEER_FAILED_VERIFICATION ||
				  code == CURLE_SSL_CACERT_BADFILE ||
				  code == CURLE_SSL_CERTPROBLEM ||
				  code == CURLE_SSL_CACERT ||
				  code == CURLE_UNSUPPORTED_PROTOCOL ||
				  code == CURLE_URL_MALFORMAT;
		r.refused = code == CURLE_COULDNT_CONNECT ||
			    code == CURLE_COULDNT_RESOLVE_HOST;
		r.timed_out = code == CURLE_OPERATION_TIMEDOUT;
		{
			/* a connection made for it, or one reused (whose
			 * connect time is 0): the request went out */
			curl_off_t t = 0;
			long sent = 0;
			curl_easy_getinfo(call->easy, CURLINFO_CONNECT_TIME_T,
					  &t);
			curl_easy_getinfo(call->easy, CURLINFO_REQUEST_SIZE,
					  &sent);
			r.connected = t > 0 || sent > 0;
		}
		snprintf(msg, sizeof(msg), "%s",
			 call->errbuf[0] ? call->errbuf
					 : curl_easy_strerror(code));
		r.error = msg;
	} else {
		curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE,
				  &r.status);
		if (call->resp.len &&
		    jsonh_parse(call->resp.data, call->resp.len, 64, &json,
				NULL, 0) == 0) {
			const char *e = NULL;
			r.json = json;
			if (jsonh_get_str(json, "error", 0, 4096, &e, NULL,
					  0) == 0 &&
			    e)
				r.error = e;
		}
	}
	call->cb(call->arg, &r);
	if (json)
		json_decref(json);
}

/* on_nudge: libcurl 7.88 may keep part of what an HTTP/2 stream received
 * in its buffers until the transfer runs again, which a transfer whose
 * upload is paused (a duplex call with nothing to send) does only on its
 * socket's next event: on a stream of its own, maybe never (a burst of
 * watch events whose end stayed unread). After each piece delivered, the
 * paused upload is resumed once: the transfer runs, delivers what it
 * holds, and pauses again */
static void on_nudge(evutil_socket_t fd, short what, void *arg)
{
	struct client_call *call = arg;
	struct client *c = call->c;
	(void)fd;
	(void)what;
	if (!call->paused)
		return;
	call->paused = 0;
	curl_easy_pause(call->easy, CURLPAUSE_CONT);
	check_done(c);
}

static void check_done(struct client *c)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(c->multi, &left))) {
		struct client_call *call = NULL;
		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
				  (char **)&call);
		if (!call)
			continue;
		CURLcode code = m->data.result;
		/* detach first: the callback may start new calls */
		curl_multi_remove_handle(c->multi, call->easy);
		finish(call, code);
		call_free(call);
	}
	/* libcurl 7.88 does not finish an HTTP/2 transfer whose answer ended
	 * while its upload is paused: a duplex call that etcd ended (a watch
	 * stream on a member that lost its leader) is over when its gRPC
	 * status came, all its answer read before it (trailers come last).
	 * Each callback may end or start calls: the list is walked again */
	for (;;) {
		struct client_call *call = c->calls;
		while (call && !call->grpc_ended)
			call = call->next;
		if (!call)
			break;
		curl_multi_remove_handle(c->multi, call->easy);
		finish(call, CURLE_OK);
		call_free(call);
	}
}

int client_new(struct event_base *base, const char *endpoint, const char *token,
	       const char *ca_file, struct client **out, char *err,
	       size_t err_size)
{
	struct client *c;
	const char *scheme = ca_file ? "https://" : "http://";
	size_t len;

	if (!curl_global_done) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			snprintf(err, err_size, "cannot initialise libcurl");
			return DL_ESYS;
		}
		curl_global_done = 1;
	}
	if (!endpoint || !*endpoint) {
		snprintf(err, err_size, "no rendezvous endpoint given");
		return DL_EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return DL_ENOMEM;
	c->base = base;
	if (strncmp(endpoint, "http://", 7) == 0 ||
	    strncmp(endpoint, "https://", 8) == 0)
		scheme = "";
	len = strlen(scheme) + strlen(endpoint) + 1;
	c->base_url = malloc(len);
	if (!c->base_url)
		goto nomem;
	snprintf(c->base_url, len, "%s%s", scheme, endpoint);
	len = strlen(c->base_url);
	while (len && c->base_url[len - 1] == '/')
		c->base_url[--len] = '\0';
	if (token) {
		len = strlen(token) + 32;
		c->headers[0] = malloc(len);
		if (!c->headers[0])
			goto nomem;
		snprintf(c->headers[0], len, "Authorization: Bearer %s", token);
	}
	if (ca_file && !(c->ca_file = strdup(ca_file)))
		goto nomem;
	c->multi = curl_multi_init();
	c->timer = evtimer_new(base, on_timer, c);
	if (!c->multi || !c->timer)
		goto nomem;
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	*out = c;
	return 0;
nomem:
	client_free(c);
	return DL_ENOMEM;
}

/* start: a call of method path; a stream's bytes go to chunk; with
 * duplex_headers (NULL-terminated, maybe empty), a gRPC call
 * (client_duplex) */
static struct client_call *start(struct client *c, const char *method,
				 const char *path, json_t *body,
				 uint64_t timeout_ms, client_cb cb,
				 client_chunk_cb chunk,
				 const char *const *duplex_headers, void *arg)
{
	struct client_call *call = calloc(1, sizeof(*call));
	struct buf url;
	int ok = 1;
	if (!call)
		return NULL;
	call->c = c;
	call->cb = cb;
	call->chunk = chunk;
	call->arg = arg;
	call->duplex = duplex_headers != NULL;
	if (call->duplex) {
		call->nudge = event_new(c->base, -1, 0, on_nudge, call);
		if (!call->nudge) {
			free(call);
			return NULL;
		}
	}
	call->grpc_status = -1;
	buf_init(&call->req_body, CLIENT_MAX_BODY_BYTES);
	buf_init(&call->resp, CLIENT_MAX_BODY_BYTES);
	buf_init(&call->out, CLIENT_MAX_BODY_BYTES);
	buf_init(&url, 8192);
	if (buf_printf(&url, "%s%s", c->base_url, path) != 0)
		ok = 0;
	if (ok && body && jsonh_dump(body, &call->req_body) != 0)
		ok = 0;
	call->easy = curl_easy_init();
	if (!ok || !call->easy)
		goto fail;
	if (call->duplex) {
		/* gRPC's own headers; the client's (a gateway's token, its
		 * require-leader) are not gRPC metadata */
		call->headers =
		    curl_slist_append(NULL, "Content-Type: application/grpc");
		call->headers =
		    curl_slist_append(call->headers, "TE: trailers");
		for (size_t i = 0; duplex_headers[i]; i++)
			call->headers =
			    curl_slist_append(call->headers, duplex_headers[i]);
	} else {
		call->headers =
		    curl_slist_append(NULL, "Accept: application/json");
		if (body)
			call->headers = curl_slist_append(
			    call->headers, "Content-Type: application/json");
		for (size_t i = 0; i < CLIENT_MAX_HEADERS; i++)
			if (c->headers[i])
				call->headers = curl_slist_append(
				    call->headers, c->headers[i]);
	}
	/* no "Expect: 100-continue" round trip for small bodies */
	call->headers = curl_slist_append(call->headers, "Expect:");
	curl_easy_setopt(call->easy, CURLOPT_URL, buf_cstr(&url));
	curl_easy_setopt(call->easy, CURLOPT_CUSTOMREQUEST, method);
	if (call->duplex) {
		/* HTTP/2 on a connection of its own: with prior knowledge on
		 * http (etcd takes HTTP/2 there as gRPC), by ALPN on https;
		 * the body is what client_duplex_send queues, for as long as
		 * the call lasts */
		curl_easy_setopt(
		    call->easy, CURLOPT_HTTP_VERSION,
		    strncmp(c->base_url, "https:", 6) == 0
			? (long)CURL_HTTP_VERSION_2TLS
			: (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
		curl_easy_setopt(call->easy, CURLOPT_POST, 1L);
		/* a connection of its own, closed with it: with libcurl 7.88,
		 * two such streams on one HTTP/2 connection break it, and so
		 * does a stream removed while its upload is paused: every later
		 * stream on that connection fails at once ("Error in the HTTP2
		 * framing layer") */
		curl_easy_setopt(call->easy, CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(call->easy, CURLOPT_FORBID_REUSE, 1L);
		curl_easy_setopt(call->easy, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(call->easy, CURLOPT_READDATA, call);
		curl_easy_setopt(call->easy, CURLOPT_HEADERFUNCTION, header_cb);
		curl_easy_setopt(call->easy, CURLOPT_HEADERDATA, call);
	} else if (body || strcmp(method, "POST") == 0 ||
		   strcmp(method, "PUT") == 0) {
		curl_easy_setopt(call->easy, CURLOPT_POSTFIELDS,
				 buf_cstr(&call->req_body));
		curl_easy_setopt(call->easy, CURLOPT_POSTFIELDSIZE,
				 (long)call->req_body.len);
	}
	curl_easy_setopt(call->easy, CURLOPT_HTTPHEADER, call->headers);
	curl_easy_setopt(call->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(call->easy, CURLOPT_WRITEDATA, call);
	curl_easy_setopt(call->easy, CURLOPT_PRIVATE, call);
	curl_easy_setopt(call->easy, CURLOPT_ERRORBUFFER, call->errbuf);
	curl_easy_setopt(call->easy, CURLOPT_NOSIGNAL, 1L);
	if (timeout_ms)
		curl_easy_setopt(call->easy, CURLOPT_TIMEOUT_MS,
				 (long)timeout_ms);
	if (chunk) {
		/* a stream may be quiet for long: find a dead peer by TCP
		 * keep-alive instead of a timeout */
		curl_easy_setopt(call->easy, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(call->easy, CURLOPT_TCP_KEEPIDLE, 2L);
		curl_easy_setopt(call->easy, CURLOPT_TCP_KEEPINTVL, 1L);
	}
	curl_easy_setopt(call->easy, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)CLIENT_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(call->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->ca_file)
		curl_easy_setopt(call->easy, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file)
		curl_easy_setopt(call->easy, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file)
		curl_easy_setopt(call->easy, CURLOPT_SSLKEY, c->key_file);
	if (curl_multi_add_handle(c->multi, call->easy) != CURLM_OK)
		goto fail;
	buf_release(&url);
	call->next = c->calls;
	c->calls = call;
	return call;
fail:
	buf_release(&url);
	if (call->easy)
		curl_easy_cleanup(call->easy);
	curl_slist_free_all(call->headers);
	buf_release(&call->req_body);
	buf_release(&call->resp);
	free(call);
	return NULL;
}

struct client_call *client_call(struct client *c, const char *method,
				const char *path, json_t *body,
				uint64_t timeout_ms, client_cb cb, void *arg)
{
	return start(c, method, path, body, timeout_ms, cb, NULL, NULL, arg);
}

struct client_call *client_stream(struct client *c, const char *path,
				  json_t *body, client_chunk_cb chunk,
				  client_cb cb, void *arg)
{
	return start(c, "POST", path, body, 0, cb, chunk, NULL, arg);
}

struct client_call *client_duplex(struct client *c, const char *path,
				  const char *const *headers,
				  client_chunk_cb chunk, client_cb cb,
				  void *arg)
{
	static const char *const none[] = {NULL};
	return start(c, "POST", path, NULL, 0, cb, chunk,
		     headers ? headers : none, arg);
}

int client_duplex_send(struct client_call *call, const void *data, size_t n)
{
	int rc;
	if (!call->duplex)
		return DL_EINVAL;
	rc = buf_append(&call->out, data, n);
	if (rc == 0 && call->paused) {
		call->paused = 0;
		curl_easy_pause(call->easy, CURLPAUSE_CONT);
	}
	return rc;
}

/* set_str replaces *at with "a" or "a: b" (a NULL: nothing). */
static int set_str(char **at, const char *a, const char *b)
{
	char *v = NULL;
	if (a) {
		size_t len = strlen(a) + (b ? strlen(b) + 2 : 0) + 1;
		v = malloc(len);
		if (!v)
			return DL_ENOMEM;
		snprintf(v, len, "%s%s%s", a, b ? ": " : "", b ? b : "");
	}
	free(*at);
	*at = v;
	return 0;
}

int client_set_header(struct client *c, const char *name, const char *value)
{
	size_t i, n = strlen(name), free_slot = CLIENT_MAX_HEADERS;
	for (i = 0; i < CLIENT_MAX_HEADERS; i++) {
		if (!c->headers[i]) {
			if (free_slot == CLIENT_MAX_HEADERS)
				free_slot = i;
		} else if (strncasecmp(c->headers[i], name, n) == 0 &&
			   c->headers[i][n] == ':') {
			return set_str(&c->headers[i], value ? name : NULL,
				       value);
		}
	}
	if (!value)
		return 0;
	if (free_slot == CLIENT_MAX_HEADERS)
		return DL_EINVAL;
	return set_str(&c->headers[free_slot], name, value);
}

int client_set_cert(struct client *c, const char *cert_file,
		    const char *key_file)
{
	if (set_str(&c->cert_file, cert_file, NULL) ||
	    set_str(&c->key_file, key_file, NULL))
		return DL_ENOMEM;
	return 0;
}

void client_cancel(struct client *c, struct client_call *call)
{
	(void)c;
	if (call)
		call_free(call);
}

int client_retryable(const struct client_reply *r)
{
	return r->transport_failed || r->status == 429 || r->status == 502 ||
	       r->status == 503 || r->status == 504;
}

const char *client_base_url(const struct client *c)
{
	return c->base_url;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	while (c->calls)
		call_free(c->calls);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	if (c->timer)
		event_free(c->timer);
	free(c->base_url);
	for (size_t i = 0; i < CLIENT_MAX_HEADERS; i++)
		free(c->headers[i]);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c);
}
