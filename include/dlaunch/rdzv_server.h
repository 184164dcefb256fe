/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_server.h - the rendezvous server as a library.
 *
 * dlaunch-rdzv's main() and `dlaunch --standalone` both run the server
 * through this interface, on an event loop the caller owns. The HTTP API it
 * serves is docs/http-api.md.
 */
#ifndef DLAUNCH_RDZV_SERVER_H
#define DLAUNCH_RDZV_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct rdzv_server;

struct rdzv_server_config {
	const char *listen;	   /* "HOST:PORT"; port 0 picks a free one */
	const char *token;	   /* bearer token; NULL: no auth (borrowed) */
	const char *tls_cert_file; /* PEM; with tls_key_file: HTTPS only */
	const char *tls_key_file;
	const char *state_dir;	 /* journal directory; NULL: in memory only */
	size_t max_body_bytes;	 /* default 64 KiB */
	size_t max_header_bytes; /* default 16 KiB */
	unsigned max_jobs;	 /* default 1024 */
	unsigned max_nodes_per_job; /* default 65536 */
	uint64_t idle_timeout_ms;   /* slow or idle clients; default 60 s */
	/* a join this long after its job ended starts a new run of it;
	 * sooner it is refused (late for the run that ended); 0: never,
	 * every join of an ended job is refused. Default 30 s. */
	uint64_t rerun_after_ms;
};

/* rdzv_server_config_init fills cfg with the defaults (listen
 * "127.0.0.1:29400", no token, no TLS, no state dir). */
void rdzv_server_config_init(struct rdzv_server_config *cfg);

/* rdzv_server_new binds, recovers jobs from cfg->state_dir and starts
 * serving on base. cfg's strings are copied. *out is owned by the caller.
 * On failure a message for the user is in err. */
int rdzv_server_new(struct event_base *base,
		    const struct rdzv_server_config *cfg,
		    struct rdzv_server **out, char *err, size_t err_size);

/* The bound address (after port 0 was resolved); borrowed / by value. */
const char *rdzv_server_host(const struct rdzv_server *srv);
uint16_t rdzv_server_port(const struct rdzv_server *srv);

/* rdzv_server_drain starts a graceful stop: parked long polls are answered
 * 503 at once and new requests get 503 ("Connection: close"); the caller
 * keeps the loop running a moment so the answers go out, then frees. */
void rdzv_server_drain(struct rdzv_server *srv);

/* rdzv_server_free stops listening, answers pending long-polls (503),
 * flushes the journal and frees everything. NULL is allowed. */
void rdzv_server_free(struct rdzv_server *srv);

#endif
