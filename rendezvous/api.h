/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h - the HTTP API of docs/http-api.md as plain functions, private to
 * rendezvous/.
 *
 * rdzv_api_handle takes a request already read off the wire (method, path,
 * query, body, peer address, monotonic time), validates it strictly, feeds
 * the state machine and produces the answer: status, content type, body,
 * or a long poll to park. It knows nothing of sockets, so the fuzzer and
 * the unit tests drive it directly; http.c only moves bytes and timers.
 */
#ifndef DLAUNCH_RDZV_API_H
#define DLAUNCH_RDZV_API_H

#include <stddef.h>
#include <stdint.h>

#include "dlaunch/buf.h"
#include "dlaunch/rdzv_state.h"

struct rdzv_journal;

enum rdzv_endpoint {
	RDZV_EP_JOIN = 0,
	RDZV_EP_HEARTBEAT,
	RDZV_EP_WATCH,
	RDZV_EP_REPORT,
	RDZV_EP_LEAVE,
	RDZV_EP_JOBS,
	RDZV_EP_JOB,
	RDZV_EP_KV,
	RDZV_EP_DUMP, /* POST /v1/jobs/{job}/dump: open a hang trigger */
	RDZV_EP_HANG, /* POST/GET /v1/jobs/{job}/hang: node reports */
	RDZV_EP_HEALTHZ,
	RDZV_EP_METRICS,
	RDZV_EP_PAGE, /* the status page and its script and style (page.c) */
	RDZV_EP_PREEMPT,
	RDZV_EP_OTHER,
	RDZV_EP_COUNT
};

/* wait_ms: default and ceiling of the long polls */
#define RDZV_WAIT_DEFAULT_MS 30000
#define RDZV_WAIT_MAX_MS     60000

enum rdzv_poll_kind {
	RDZV_POLL_NONE = 0,
	RDZV_POLL_JOIN,
	RDZV_POLL_WATCH,
	RDZV_POLL_KV
};

/* A parked long poll: everything needed to re-check it later. */
struct rdzv_poll {
	enum rdzv_poll_kind kind;
	char job[RDZV_NAME_MAX + 1];
	char node_id[RDZV_NAME_MAX + 1];	    /* join, watch ("" none) */
	char incarnation[RDZV_INCARNATION_MAX + 1]; /* join, watch */
	char key[RDZV_NAME_MAX + 1];		    /* kv */
	uint64_t round;				    /* watch */
	uint64_t hang_seq; /* watch: triggers the job had opened */
	uint64_t deadline_ms;
};

struct rdzv_request {
	const char *method; /* "GET", "POST", "PUT", ... */
	const char *path;   /* without the query */
	const char *query;  /* NULL or "a=1&b=2" */
	const char *body;
	size_t body_len;
	const char *peer_addr; /* the client's IP address */
	uint64_t now_ms;
	uint64_t wall_ms; /* unix ms (dates hang triggers); 0: read it */
};

struct rdzv_response {
	int status;		  /* 0 while parked */
	const char *content_type; /* static */
	struct buf body;
	enum rdzv_endpoint endpoint;
	struct rdzv_poll poll; /* kind != NONE: park until deadline */
};

struct rdzv_api;

/* rdzv_api_new: over st (borrowed), journaling into journal (borrowed,
 * NULL: none); max_body_bytes bounds KV values. */
struct rdzv_api *rdzv_api_new(struct rdzv_state *st,
			      struct rdzv_journal *journal);
void rdzv_api_free(struct rdzv_api *api);
/* rdzv_api_set_max_body: the largest body of any request (413 beyond;
 * default 64 KiB) but POST /v1/jobs/{job}/hang, whose bound is
 * RDZV_HANG_REPORT_MAX_BYTES. The HTTP layer must let both through. */
void rdzv_api_set_max_body(struct rdzv_api *api, size_t bytes);

void rdzv_response_init(struct rdzv_response *resp);
void rdzv_response_release(struct rdzv_response *resp);

/* rdzv_api_route names the endpoint of a path (for metrics and auth). */
enum rdzv_endpoint rdzv_api_route(const char *path);
const char *rdzv_endpoint_name(enum rdzv_endpoint ep);

/*
 * rdzv_api_handle answers req into resp (initialised by the caller):
 * either resp->status is set, or resp->poll.kind says to park the request
 * until rdzv_api_poll_check answers it. Journals changes before returning
 * (fsync), so the answer may be sent as soon as it returns. Afterwards
 * the caller drains rdzv_api_commit to wake other parked polls.
 */
void rdzv_api_handle(struct rdzv_api *api, const struct rdzv_request *req,
		     struct rdzv_response *resp);

/*
 * rdzv_api_poll_check: answers a parked poll into resp when it can be
 * answered now (returns 1), or at its deadline when expired is set (always
 * 1); 0 to keep waiting.
 */
int rdzv_api_poll_check(struct rdzv_api *api, const struct rdzv_poll *poll,
			uint64_t now_ms, int expired,
			struct rdzv_response *resp);
/* rdzv_api_poll_end: the parked poll is over (answered or abandoned). */
void rdzv_api_poll_end(struct rdzv_api *api, const struct rdzv_poll *poll,
		       uint64_t now_ms);

/* rdzv_api_journal_failures: journal writes (appends and rewrites)
 * that failed since the start; rdzv_api_durable: 0 while a change the
 * journal could not take is pending (healthz answers 503), else 1. */
uint64_t rdzv_api_journal_failures(const struct rdzv_api *api);
int rdzv_api_durable(const struct rdzv_api *api);

/* rdzv_api_tick runs the state machine's deadlines and journals. */
void rdzv_api_tick(struct rdzv_api *api, uint64_t now_ms);

/* rdzv_api_commit journals the jobs changed since the last call and calls
 * wake(ctx, job) for each one whose parked polls must be re-checked. */
void rdzv_api_commit(struct rdzv_api *api,
		     void (*wake)(void *ctx, const char *job), void *ctx);

#endif
