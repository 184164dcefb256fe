/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv.h - how the agent talks with a rendezvous: one interface, one
 * implementation per backend; the contract between the agent's round
 * loop and every backend, in a unit of its own below both
 * (libagent_rdzv.a: this folder).
 *
 * The round loop (../fsm.h) asks a backend to join, to keep this node
 * alive in a round and watch it, to report the round's outcome, to
 * leave, and for the job's record (status). Every request is
 * asynchronous on the agent's event loop; every answer comes back as an
 * event (event.h) posted to the loop the backend was made with (struct
 * agent_rdzv_loop: agent_fsm_rdzv_loop in the agent, a recorder in a
 * test), never as a return value:
 *
 *   join         -> JOINED (assignment) | JOIN_ENDED | JOIN_FAILED
 *   round_begin  -> RESTART / STOP about that round, whenever they happen
 *   report       -> (RESTART | STOP)? then REPORT_DONE, about its round
 *   leave        -> LEFT
 *   status       -> STATUS (the job's failures, or none)
 *
 * A backend retries what fails to reach its store (workers keep running
 * meanwhile) and says so in the log; only what retrying cannot mend ends
 * a join (JOIN_FAILED, after one clear error line). Cancelled requests
 * post nothing.
 *
 * Backends: static (../rdzv_static.c: no server; the node's place comes
 * from the command line and restarts are decided locally), the
 * dlaunch-rdzv HTTP API (../rdzv_http.c) and etcd (../etcd/rdzv_etcd.h,
 * its own folder and archive; docs/etcd.md). Each builds on this folder
 * alone (and on the public dlaunch/ headers): the helpers below, the
 * address a node announces (addr.h) and the HTTP client
 * (dlaunch/agent_client.h, client.c). Nothing here includes a header
 * from above this folder.
 */
#ifndef DLAUNCH_AGENT_RDZV_H
#define DLAUNCH_AGENT_RDZV_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/agent.h"
#include "event.h"

struct event_base;
struct agent_rdzv;

struct agent_rdzv_ops {
	const char *name;
	void (*join)(struct agent_rdzv *r);
	/* keep this node alive in round and watch it; ends what an earlier
	 * round left in flight (a success report included) */
	void (*round_begin)(struct agent_rdzv *r, uint64_t round);
	/* stop the keep-alive and the watch (a join in flight too) */
	void (*round_end)(struct agent_rdzv *r);
	/* report the round's outcome; failures (a JSON array) is borrowed
	 * and only read when failed */
	void (*report)(struct agent_rdzv *r, uint64_t round, int failed,
		       json_t *failures);
	/* drop every request in flight but a leave */
	void (*cancel)(struct agent_rdzv *r);
	void (*leave)(struct agent_rdzv *r);
	void (*status)(struct agent_rdzv *r);
	void (*free)(struct agent_rdzv *r);
	/* optional: the node's workers entered the round begun last, as
	 * the loop's recovery says (dlaunch-rdzv hears it with heartbeats) */
	void (*entered)(struct agent_rdzv *r);
	/* optional, hang diagnosis (docs/hangs.md); NULL in a backend with
	 * no job-wide store (static: the node analyses its own report).
	 * Answers go to the hang callbacks of struct agent_rdzv, never to
	 * the round loop. hang_open opens a trigger of kind (by: this node)
	 * -> opened(trigger or NULL); hang_post stores this node's report
	 * (borrowed) -> posted(ok); hang_fetch reads the reports of trigger
	 * id -> fetched({"reports": [...], "complete": bool} or NULL);
	 * hang_cancel drops what of these is in flight. */
	void (*hang_open)(struct agent_rdzv *r, const char *kind);
	void (*hang_post)(struct agent_rdzv *r, json_t *report);
	void (*hang_fetch)(struct agent_rdzv *r, const char *id);
	void (*hang_cancel)(struct agent_rdzv *r);
	/* optional: keep the summary of a finished diagnosis (borrowed:
	 * {"trigger", "complete", "reported", "asked", "analysis"}) where
	 * `dlaunch status` reads it, beyond the job's end; no answer, and
	 * hang_cancel leaves it be. NULL where the store keeps its own
	 * (dlaunch-rdzv analyses the reports it holds). */
	void (*hang_keep)(struct agent_rdzv *r, json_t *summary);
	/* optional (no preemption without it): ask for the job's stop step,
	 * this node's workers being at step, step_rate steps per second
	 * (0: unknown) -> PREEMPT with it, or PREEMPT_FAILED when refused;
	 * answers about the round then follow as usual */
	void (*preempt)(struct agent_rdzv *r, uint64_t round, uint64_t step,
			double step_rate);
};

/* Where a backend's hang answers go (agent.c sets them; hang.c). heard:
 * a trigger is open (seen in a heartbeat or watch answer, or the etcd
 * key); borrowed. */
struct agent_rdzv_hang_cb {
	void (*opened)(void *ctx, json_t *trigger);
	void (*heard)(void *ctx, json_t *trigger);
	void (*posted)(void *ctx, int ok);
	void (*fetched)(void *ctx, json_t *answer);
	void *ctx;
};

/* The round loop as a backend sees it: where its answers go and what it
 * may read of the loop. The pointers are borrowed from the loop, which
 * outlives the backend; what they point at changes as the loop moves. */
struct agent_rdzv_loop {
	/* hand the loop an answer (agent_fsm_post); takes ev->json */
	void (*post)(void *ctx, struct agent_event *ev);
	void *ctx;
	const struct agent_round *current; /* the current (or last) round */
	/* how this node's workers entered it ("started", "in_place",
	 * "restarted"; "" until known), and why */
	const char *recovery;
	const char *recovery_why;
};

/* The part every backend begins with. */
struct agent_rdzv {
	const struct agent_rdzv_ops *ops;
	struct agent_rdzv_loop loop; /* where answers go */
	/* the address this node announces to the others, known once the
	 * backend is made; NULL or "": none (static mode, or the server
	 * uses the address it sees) */
	const char *addr;
	struct agent_rdzv_hang_cb hang; /* all NULL until agent.c sets them */
};

/* What a backend is made from; everything is borrowed and outlives it. */
struct agent_rdzv_params {
	struct event_base *base;
	const struct agent_config *cfg;
	const char *node_id;
	const char *incarnation;     /* this agent process, for fencing */
	struct agent_rdzv_loop loop; /* copied into the backend's */
};

/* What each backend's constructor is (../backends.h lists them, by the
 * agent's mode: agent_rdzv_static_new, agent_rdzv_http_new and
 * agent_rdzv_etcd_new of ../etcd/rdzv_etcd.h): *out is the caller's
 * (ops->free); an error says why in err. */
typedef int (*agent_rdzv_new_fn)(const struct agent_rdzv_params *p,
				 struct agent_rdzv **out, char *err,
				 size_t err_size);

/* agent_rdzv_post hands r's loop an answer (ev->json is taken);
 * agent_rdzv_post_kind one that carries nothing but its kind and round. */
void agent_rdzv_post(struct agent_rdzv *r, struct agent_event *ev);
void agent_rdzv_post_kind(struct agent_rdzv *r, enum agent_event_kind kind,
			  uint64_t round);

/* agent_rdzv_post_action posts what an answer's action says about round:
 * "restart" -> RESTART, "stop" -> STOP with job_state; anything else
 * nothing. Returns 1 when it posted. */
int agent_rdzv_post_action(struct agent_rdzv *r, uint64_t round,
			   const char *action, const char *job_state);

/* agent_rdzv_post_joined reads an assignment (the join answer of
 * docs/http-api.md, which etcd's leader writes too), logs it and posts
 * JOINED; the heartbeat interval it asks for goes to
 * *heartbeat_interval_ms. DL_EPROTO (logged) when it is not one for a
 * node of nproc workers. */
int agent_rdzv_post_joined(struct agent_rdzv *r, json_t *assignment, int nproc,
			   uint64_t *heartbeat_interval_ms);

/* agent_rdzv_post_preempt posts PREEMPT when an answer (a JSON object,
 * borrowed) carries the job's stop step ("preempt_step"). 1 when it
 * posted. */
int agent_rdzv_post_preempt(struct agent_rdzv *r, uint64_t round,
			    json_t *answer);

/* agent_rdzv_free_port: a TCP port free on this host now (0: none) */
unsigned agent_rdzv_free_port(void);

/* agent_rdzv_safe_addr: s is a plausible host or address (letters,
 * digits, ".:-_%[]", at most 255 bytes); an answer's master address must
 * be one before it reaches a worker's environment. */
int agent_rdzv_safe_addr(const char *s);

/* agent_rdzv_route_addr writes the source address this host uses to reach
 * endpoint (as agent_rdzv_local_addr takes it) into out, "" when unknown,
 * and logs nothing. Sends nothing. */
void agent_rdzv_route_addr(const char *endpoint, uint16_t default_port,
			   char *out, size_t size);

/* agent_rdzv_local_addr writes the source address this host uses to reach
 * endpoint ("host[:port]" or an http(s):// URL) into out, or "" when
 * unknown (the server then uses the address it sees). Sends nothing. */
void agent_rdzv_local_addr(const char *endpoint, uint16_t default_port,
			   char *out, size_t size);

#endif
