/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent_client.h - HTTP(S) calls to the rendezvous server on an event loop.
 *
 * libcurl's multi interface driven by libevent (CURLMOPT_SOCKETFUNCTION and
 * CURLMOPT_TIMERFUNCTION): any number of calls, long-polls included, run
 * at once on the caller's loop, and none blocks it. Every call ends in
 * exactly one callback unless it is cancelled first. Retrying is the
 * caller's decision (client_retryable says when it makes sense).
 */
#ifndef DLAUNCH_AGENT_CLIENT_H
#define DLAUNCH_AGENT_CLIENT_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct client;
struct client_call;

struct client_reply {
	int transport_failed; /* no HTTP answer: see error */
	int misconfigured;    /* a transport failure retrying cannot mend:
				 the server's certificate does not verify,
				 the CA file is unusable, the URL is bad */
	int refused;	      /* nobody listens there, or no such host
				 (not a timeout: an overloaded server) */
	int timed_out;	      /* no answer within the time given */
	int connected;	      /* the connection was made before it
				 failed (someone listens, if slowly) */
	const char *error;    /* transport error text, or the server's
				 {"error": ...} message, or "" */
	long status;	      /* HTTP status (0 when transport_failed) */
	json_t *json;	      /* parsed body when it is a JSON object;
				 borrowed, may be NULL */
	const char *body;     /* raw body (NUL-terminated); borrowed */
	size_t body_len;
	int grpc_status;	  /* a duplex call's gRPC status; -1: none */
	const char *grpc_message; /* ... and its message, or "" */
};

typedef void (*client_cb)(void *arg, const struct client_reply *r);
/* the bytes of a streamed 200 answer, as they come; non-zero aborts it */
typedef int (*client_chunk_cb)(void *arg, const char *data, size_t n);

/* client_new prepares calls to endpoint ("host:port", "http://host:port"
 * or "https://..."); token (bearer) and ca_file may be NULL. Copies its
 * strings. *out is owned by the caller (client_free). */
int client_new(struct event_base *base, const char *endpoint, const char *token,
	       const char *ca_file, struct client **out, char *err,
	       size_t err_size);

/* client_call starts METHOD path (e.g. "/v1/jobs/j/join") with body (JSON,
 * borrowed and encoded at once; NULL: none) bounded by timeout_ms. Returns
 * the call (owned by the client; valid until its callback returns or it is
 * cancelled) or NULL when it could not be started. */
struct client_call *client_call(struct client *c, const char *method,
				const char *path, json_t *body,
				uint64_t timeout_ms, client_cb cb, void *arg);

/* client_stream POSTs body to path and hands each piece of a 200 answer
 * to chunk as it arrives (no time limit; TCP keep-alive finds a dead
 * peer); cb ends the call as for client_call, its body empty but for a
 * non-200 answer. */
struct client_call *client_stream(struct client *c, const char *path,
				  json_t *body, client_chunk_cb chunk,
				  client_cb cb, void *arg);

/* client_duplex opens a gRPC call: an HTTP/2 POST of path (prior
 * knowledge on http://, ALPN on https://) with gRPC's headers and the
 * given ones ("Name: value", NULL-terminated; the client's own headers
 * are not sent), on a connection of its own. Its request body is what
 * client_duplex_send queues, for as long as the call lasts; each piece of
 * a 200 gRPC answer goes to chunk as it comes (no time limit; TCP
 * keep-alive finds a dead peer). cb ends it as for client_call, with the
 * gRPC status of the answer's headers or trailers, as soon as that
 * status comes (any other answer: its body). client_duplex_send queues n
 * bytes to send (0, DL_ENOMEM, or DL_ELIMIT past 4 MiB queued); it must
 * not be called from chunk. */
struct client_call *client_duplex(struct client *c, const char *path,
				  const char *const *headers,
				  client_chunk_cb chunk, client_cb cb,
				  void *arg);
int client_duplex_send(struct client_call *call, const void *data, size_t n);

/* client_set_header sets the header name: value that every later call
 * sends, in place of an earlier value of that name (value NULL: none of
 * that name); up to four such headers (DL_EINVAL past that).
 * client_set_cert gives a client certificate and key (files) for TLS.
 * Both return 0 or DL_ENOMEM. */
int client_set_header(struct client *c, const char *name, const char *value);
int client_set_cert(struct client *c, const char *cert_file,
		    const char *key_file);

/* client_cancel aborts a call; its callback is not called. NULL is
 * allowed. Must not be called for the call whose callback is running. */
void client_cancel(struct client *c, struct client_call *call);

/* client_retryable: the server could not be reached, or answered 429,
 * 502, 503 or 504; worth repeating after a pause. */
int client_retryable(const struct client_reply *r);

/* client_base_url returns e.g. "http://127.0.0.1:29400"; borrowed. */
const char *client_base_url(const struct client *c);

/* client_free cancels every call and frees the client. NULL is allowed. */
void client_free(struct client *c);

#endif
