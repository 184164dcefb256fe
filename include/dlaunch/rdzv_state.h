/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_state.h - the rendezvous state machine, with no I/O.
 *
 * It holds every job: its configuration, the current round, the members of
 * a closed round with their node ranks and rank offsets, the nodes waiting
 * for the next round (joiners and spares), the restart budget, the failures
 * reported and a small key-value store. Callers feed it events (join,
 * heartbeat, watch, report, leave, timer tick, KV put) together with the
 * current monotonic time in milliseconds and get back answers; it never
 * reads a clock, a socket or a file. Semantics: docs/http-api.md.
 *
 * This header is the whole of the rules' public face, and the rules have
 * one implementation: dlaunch-rdzv drives it from its HTTP layer, and any
 * other host (an agent leading a job over another store) links
 * librdzv_state.a (libdlcommon and jansson are all it needs) and drives
 * the same functions. A host's loop is:
 *
 *   1. feed an event: rdzv_join, rdzv_heartbeat, rdzv_watch, rdzv_report,
 *      rdzv_leave, rdzv_kv_put, or rdzv_state_tick when the deadline from
 *      rdzv_state_next_deadline has passed; the return value and struct
 *      rdzv_reply are the decision for the node that sent it;
 *   2. drain rdzv_state_pop_changed: RDZV_CHANGED_JOB says to persist the
 *      job (rdzv_job_save, or its deletion when rdzv_job_exists says it is
 *      gone), RDZV_CHANGED_WAKE says to re-check the long polls parked on
 *      it (rdzv_join_check, rdzv_watch, rdzv_kv_get); a KV put marks
 *      only WAKE, the host persists the key it put itself;
 *   3. re-arm the timer for rdzv_state_next_deadline.
 *
 * A host that takes over a job restores it with rdzv_job_restore (and its
 * keys with rdzv_kv_put); timers restart then, since heartbeats are not
 * part of the durable form.
 *
 * Functions return 0 / a positive RDZV_* outcome, or a negative DL_E* code
 * (dlaunch/error.h) with a lowercase message naming the object in err:
 * DL_EINVAL (bad field), DL_ENOTFOUND (no such job/key), DL_ECONFLICT
 * (configuration mismatch), DL_ESTALE (stale round or incarnation),
 * DL_EGONE (the job has ended), DL_ELIMIT (too many jobs/nodes/keys).
 * The state is not thread-safe: one host thread drives it.
 */
#ifndef DLAUNCH_RDZV_STATE_H
#define DLAUNCH_RDZV_STATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/parse.h"

#define RDZV_NAME_MAX	     PARSE_NAME_MAX /* job, node_id and KV key names */
#define RDZV_INCARNATION_MAX 64
#define RDZV_ADDR_MAX	     64 /* an IP address literal */
#define RDZV_MAX_FAILURES    64 /* failures kept per job */
#define RDZV_MAX_NPROC	     4096
#define RDZV_MAX_RESTARTS    1000000

enum rdzv_job_state {
	RDZV_JOB_WAITING = 0,	 /* the first round is open */
	RDZV_JOB_RUNNING = 1,	 /* the current round is closed */
	RDZV_JOB_RESTARTING = 2, /* a round ended, the next one is open */
	RDZV_JOB_SUCCEEDED = 3,
	RDZV_JOB_FAILED = 4,
	/* every member stopped at the job's preemption step (rdzv_preempt)
	 * and saved there: an end, not a failure */
	RDZV_JOB_PREEMPTED = 5,
};
#define RDZV_JOB_NSTATES 6

enum rdzv_action {
	RDZV_ACTION_CONTINUE = 0,
	RDZV_ACTION_RESTART = 1,
	RDZV_ACTION_STOP = 2,
};

enum rdzv_member_status {
	RDZV_MEMBER_RUNNING = 0,
	RDZV_MEMBER_SUCCEEDED = 1,
	RDZV_MEMBER_FAILED = 2,
};

/* Outcomes of the long-poll events (join, watch): answer now or park. */
#define RDZV_DONE 0
#define RDZV_WAIT 1

struct rdzv_job_config {
	uint32_t min_nodes;
	uint32_t max_nodes;
	uint32_t max_restarts;
	uint64_t join_timeout_ms;	/* default 600 s */
	uint64_t last_call_timeout_ms;	/* default 5 s */
	uint64_t heartbeat_interval_ms; /* default 1 s */
	uint64_t heartbeat_timeout_ms;	/* default 5 s */
};

/* A node as it describes itself when joining. */
struct rdzv_node_info {
	char node_id[RDZV_NAME_MAX + 1];
	char incarnation[RDZV_INCARNATION_MAX + 1];
	char addr[RDZV_ADDR_MAX + 1];
	uint32_t nproc;
	uint16_t master_port; /* 0: none offered */
	/* the run of the job this node took part in (the "run" of an
	 * assignment it got), 0: none yet. A node of a run that has ended
	 * is refused even once a join would start a new run: a node back
	 * from a partition must not start a run alone. Not saved. */
	uint32_t run;
};

struct rdzv_limits {
	uint32_t max_jobs;	    /* default 1024 */
	uint32_t max_nodes_per_job; /* members + waiting; default 65536 */
	uint32_t max_keys_per_job;  /* default 1024 */
	size_t max_value_bytes;	    /* default 64 KiB */
	/* a join this long after its job ended starts a new run of the job
	 * (the ended run kept in its "runs"); sooner, the join is refused
	 * as late for the run that ended (DL_EGONE). 0 (the default): never,
	 * every join of an ended job is refused. */
	uint64_t rerun_after_ms;
};

/* What a node is told: the answer of heartbeat, watch, report, leave. */
struct rdzv_reply {
	uint64_t round;
	enum rdzv_job_state state;
	enum rdzv_action action;
	uint32_t restart_count;
	/* the job's preemption step (rdzv_preempt): every worker stops after
	 * completing it and saves it; 0 while the job is not preempted */
	uint64_t preempt_step;
	/* the asking node's incarnation was replaced: a later join took its
	 * node id (another agent of that id, or the agent restarted), and
	 * this one must stop, not join again (409 with "replaced") */
	int replaced;
};

/* How a member's workers entered its round (docs/worker-protocol.md):
 * the node's first round, kept and re-formed in place, or stopped and
 * started again. */
enum rdzv_recovery {
	RDZV_RECOVERY_NONE, /* not said (yet) */
	RDZV_RECOVERY_STARTED,
	RDZV_RECOVERY_IN_PLACE,
	RDZV_RECOVERY_RESTARTED,
	RDZV_RECOVERY_N
};
#define RDZV_RECOVERY_WHY_MAX 160 /* bytes of the reason */

/* What set off a hang diagnosis (see rdzv_hang_trigger). */
enum rdzv_hang_kind {
	RDZV_HANG_DUMP = 0,
	RDZV_HANG_PROGRESS_TIMEOUT,
	RDZV_HANG_STALL,
	RDZV_HANG_EXIT,
};
#define RDZV_HANG_NKINDS 4

/* Counters for /metrics, monotonically increasing. */
struct rdzv_counters {
	uint64_t rounds_total;	 /* rounds closed */
	uint64_t restarts_total; /* restarts charged */
	uint64_t heartbeats_total;
	uint64_t evictions_total;
	/* members' entries into rounds, by rdzv_recovery (each member and
	 * round counted once, when it first says) */
	uint64_t recoveries_total[RDZV_RECOVERY_N];
	/* hang diagnosis: triggers opened, by enum rdzv_hang_kind; node
	 * reports stored; and (a gauge) the stuck ranks the latest analysis
	 * named */
	uint64_t hang_triggers_total[RDZV_HANG_NKINDS];
	uint64_t hang_reports_total;
	uint64_t hang_stuck_ranks;
};

struct rdzv_state;

void rdzv_limits_init(struct rdzv_limits *limits);
void rdzv_job_config_init(struct rdzv_job_config *cfg);

/* A configuration's JSON form (the "config" of a saved job, of an etcd
 * node's key): {"min_nodes", "max_nodes", "max_restarts",
 * "join_timeout_ms", "last_call_timeout_ms", "heartbeat_interval_ms",
 * "heartbeat_timeout_ms"}. rdzv_job_config_json returns a new reference
 * (NULL when out of memory); rdzv_job_config_from_json reads one, every
 * field required and in range (DL_EINVAL naming the field). */
json_t *rdzv_job_config_json(const struct rdzv_job_config *c);
int rdzv_job_config_from_json(json_t *o, struct rdzv_job_config *cfg, char *err,
			      size_t err_size);

/* rdzv_state_new: an empty state; limits copied (NULL: defaults). */
struct rdzv_state *rdzv_state_new(const struct rdzv_limits *limits);
void rdzv_state_free(struct rdzv_state *st); /* NULL is allowed */

const char *rdzv_job_state_name(enum rdzv_job_state s);
const char *rdzv_action_name(enum rdzv_action a);
const char *rdzv_member_status_name(enum rdzv_member_status s);

/*
 * rdzv_join: node asks to take part in job's next round; the first join
 * creates the job with cfg, later ones must agree with it (DL_ECONFLICT
 * names the field). Returns RDZV_DONE when the node is a member of the
 * current closed round (the answer is rdzv_assignment_json), RDZV_WAIT when
 * it must wait for the round to close. With hold set the caller keeps the
 * request open on RDZV_WAIT and must call rdzv_join_poll_end when it ends;
 * a held join keeps the waiting node alive. On error reply (when non-NULL)
 * is filled for 409/410 answers.
 */
int rdzv_join(struct rdzv_state *st, const char *job,
	      const struct rdzv_node_info *node,
	      const struct rdzv_job_config *cfg, int hold, uint64_t now_ms,
	      struct rdzv_reply *reply, char *err, size_t err_size);

/* rdzv_join_check: re-evaluates a held join: RDZV_DONE, RDZV_WAIT or an
 * error (DL_EGONE: the job ended; DL_ESTALE: a newer incarnation took the
 * node's place; DL_ENOTFOUND: the node was dropped). */
int rdzv_join_check(struct rdzv_state *st, const char *job, const char *node_id,
		    const char *incarnation, struct rdzv_reply *reply,
		    char *err, size_t err_size);

/* rdzv_join_poll_end: a held join was answered or its client went away;
 * the node's liveness clock restarts at now_ms. */
void rdzv_join_poll_end(struct rdzv_state *st, const char *job,
			const char *node_id, const char *incarnation,
			uint64_t now_ms);

/* rdzv_heartbeat: 0 with reply (continue, or stop for members of an ended
 * job), DL_ESTALE with reply (409), DL_EGONE with reply (410). */
int rdzv_heartbeat(struct rdzv_state *st, const char *job, const char *node_id,
		   const char *incarnation, uint64_t round, uint64_t now_ms,
		   struct rdzv_reply *reply, char *err, size_t err_size);

/* rdzv_recovery_parse maps "started", "in_place", "restarted" to a
 * value (DL_EINVAL for anything else); rdzv_recovery_name the other way
 * ("" for NONE). */
int rdzv_recovery_parse(const char *s, enum rdzv_recovery *out);
const char *rdzv_recovery_name(enum rdzv_recovery r);

/* rdzv_member_recovery: member node_id says how its workers entered round
 * (why: a short reason, at most RDZV_RECOVERY_WHY_MAX bytes, checked by
 * the caller). Kept on the member (GET /v1/jobs/{job}), counted in the
 * round's timeline and the counters. 0; errors as for heartbeats (an
 * ended job: 0, nothing kept). */
int rdzv_member_recovery(struct rdzv_state *st, const char *job,
			 const char *node_id, const char *incarnation,
			 uint64_t round, enum rdzv_recovery how,
			 const char *why, char *err, size_t err_size);

/* rdzv_watch: RDZV_DONE with reply when the job is no longer at round or
 * has ended, else RDZV_WAIT. node_id/incarnation may be NULL; when given
 * they count as a sign of life. */
int rdzv_watch(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t round, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size);

/*
 * rdzv_report: a member's workers succeeded or failed in round. failures
 * (a JSON array of objects already validated by the caller, borrowed) is
 * recorded job-wide with "round" and "node_id" added. Returns 0 with reply,
 * or DL_ESTALE/DL_EGONE with reply as for heartbeats.
 */
int rdzv_report(struct rdzv_state *st, const char *job, const char *node_id,
		const char *incarnation, uint64_t round, int succeeded,
		json_t *failures, uint64_t now_ms, struct rdzv_reply *reply,
		char *err, size_t err_size);

/* rdzv_leave: the node leaves at once; unknown nodes and ended jobs are
 * fine (0). DL_ESTALE when the node is known with another incarnation. */
int rdzv_leave(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size);

/* rdzv_evict: the host knows node_id (incarnation) is dead, e.g. its
 * lease in a store expired: a member of the running round is evicted as
 * by a heartbeat timeout (the round ends with reason, no restart is
 * charged), a waiter or survivor is dropped. Unknown nodes and ended jobs
 * are fine (0); DL_ESTALE when the node is known with another
 * incarnation. */
int rdzv_evict(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, const char *reason, uint64_t now_ms,
	       char *err, size_t err_size);

/*
 * rdzv_preempt: member node_id of the running round was told to stop (a
 * SIGTERM from Slurm or Kubernetes) and its workers can stop at a step
 * (docs/worker-protocol.md, "preempt"): step is the highest step they
 * completed, step_rate their steps per second (0: unknown). The first
 * such request of a run picks the job's stop step for every node (see
 * rdzv_preempt_pick_step) and keeps it; later ones are answered with it.
 * Watches of members wake to carry it (reply->preempt_step). From then
 * on the job ends PREEMPTED when every member has reported success, and
 * FAILED when a member fails or is lost (the stop step cannot be met by
 * all), never in a new round. Returns 0 with reply, or as a heartbeat
 * does (DL_ESTALE, DL_EGONE with reply; DL_EINVAL for a rate out of
 * range).
 */
int rdzv_preempt(struct rdzv_state *st, const char *job, const char *node_id,
		 const char *incarnation, uint64_t round, uint64_t step,
		 double step_rate, uint64_t now_ms, struct rdzv_reply *reply,
		 char *err, size_t err_size);

/* The largest step rate rdzv_preempt takes (steps per second). */
#define RDZV_PREEMPT_RATE_MAX 1e6

/*
 * rdzv_preempt_pick_step: the stop step for a job whose announcing
 * member reported step at step_rate, heartbeats every
 * heartbeat_interval_ms. The ranks of a data-parallel job are within one
 * step of each other (a rank completes step k only once every rank
 * contributed to it), so when the member sent step no rank had completed
 * more than step + 1; until the decision reaches every worker (through
 * the rendezvous, a watch or at worst a heartbeat, and the agent's
 * channel: bounded by RDZV_PREEMPT_LATENCY_MS + 2 heartbeat intervals)
 * they complete at most rate x that latency more, and a worker that
 * hears it mid-step completes that step before it looks: so
 * step + 2 + ceil(rate x latency), and at least 2 steps of margin when
 * the rate is unknown.
 */
#define RDZV_PREEMPT_LATENCY_MS 2000
uint64_t rdzv_preempt_pick_step(uint64_t step, double step_rate,
				uint64_t heartbeat_interval_ms);

/* rdzv_state_tick: applies every deadline that has passed at now_ms. */
void rdzv_state_tick(struct rdzv_state *st, uint64_t now_ms);

/* rdzv_state_next_deadline: the earliest time rdzv_state_tick has work;
 * UINT64_MAX when none. */
uint64_t rdzv_state_next_deadline(const struct rdzv_state *st);

/* KV: rdzv_kv_put copies len bytes under key in job (DL_ENOTFOUND when the
 * job does not exist, DL_ELIMIT past the key count or value size).
 * rdzv_kv_get borrows the value (valid until the next change). */
int rdzv_kv_put(struct rdzv_state *st, const char *job, const char *key,
		const void *data, size_t len, char *err, size_t err_size);
int rdzv_kv_get(const struct rdzv_state *st, const char *job, const char *key,
		const void **data, size_t *len);

/* Change marks. RDZV_CHANGED_JOB: the job's durable state changed (journal
 * it; the job may also have been deleted); RDZV_CHANGED_WAKE: re-check the
 * long polls parked on it. */
#define RDZV_CHANGED_JOB  1u
#define RDZV_CHANGED_WAKE 2u

/* rdzv_state_pop_changed copies the name of one changed job into name
 * (RDZV_NAME_MAX + 1 bytes), returns its RDZV_CHANGED_* flags, or 0 when
 * nothing is left. */
unsigned rdzv_state_pop_changed(struct rdzv_state *st, char *name);

/* Views, each a new JSON reference (json_decref it), NULL when the job
 * (or node) is unknown: the join answer for node_id, the job detail of
 * GET /v1/jobs/{job}, the job list of GET /v1/jobs. */
json_t *rdzv_assignment_json(const struct rdzv_state *st, const char *job,
			     const char *node_id);
json_t *rdzv_job_detail_json(const struct rdzv_state *st, const char *job,
			     uint64_t now_ms);
json_t *rdzv_jobs_json(const struct rdzv_state *st);
/* rdzv_waiting_json: the 202 answer of a join still waiting. */
json_t *rdzv_waiting_json(const struct rdzv_state *st, const char *job);

/* Durability: rdzv_job_save returns the job's durable state (without its
 * KV), rdzv_job_restore replaces/creates a job from it (timers restart at
 * now_ms), rdzv_job_delete drops one. rdzv_kv_each calls fn for every key.
 * None of them marks the job changed. */
json_t *rdzv_job_save(const struct rdzv_state *st, const char *job);
int rdzv_job_restore(struct rdzv_state *st, json_t *saved, uint64_t now_ms,
		     char *err, size_t err_size);
void rdzv_job_delete(struct rdzv_state *st, const char *job);
/* rdzv_job_ended_ago: a restored ended job ended ago_ms before now_ms
 * (a restore counts the wait before a rerun from now_ms; a host that
 * knows when the job ended says so). DL_ENOTFOUND when job is not
 * there or has not ended. */
int rdzv_job_ended_ago(struct rdzv_state *st, const char *job, uint64_t ago_ms,
		       uint64_t now_ms);
size_t rdzv_job_count(const struct rdzv_state *st);
int rdzv_job_exists(const struct rdzv_state *st, const char *job);
/* rdzv_job_name_at: the i-th job's name (0 <= i < count), borrowed. */
const char *rdzv_job_name_at(const struct rdzv_state *st, size_t i);
int rdzv_kv_each(const struct rdzv_state *st, const char *job,
		 int (*fn)(void *ctx, const char *key, const void *data,
			   size_t len),
		 void *ctx);

/*
 * Hang diagnosis (docs/http-api.md, "Hang diagnosis"). A trigger asks
 * every member node of the job's running round for a report of its
 * workers (stacks, flight records, states); it stays open until each of
 * those nodes posted one, or RDZV_HANG_OPEN_MS. A job keeps its last
 * RDZV_HANG_KEPT triggers with their reports, at most
 * RDZV_HANG_JOB_MAX_BYTES of reports (older triggers dropped first) and
 * the server RDZV_HANG_ALL_MAX_BYTES over all jobs; none of it is
 * journaled. wall_ms is the caller's unix time (the state reads no
 * clock); it dates triggers and is the analysis's "now".
 */
#define RDZV_HANG_ID_MAX	   64
#define RDZV_HANG_OPEN_MS	   30000
#define RDZV_HANG_KEPT		   4
#define RDZV_HANG_REPORT_MAX_BYTES (512u * 1024)
#define RDZV_HANG_JOB_MAX_BYTES	   (8u * 1024 * 1024)
#define RDZV_HANG_ALL_MAX_BYTES	   (256u * 1024 * 1024)
#define RDZV_HANG_TEXT_MAX_BYTES   (1024u * 1024)

/* rdzv_hang_kind_parse: "dump", "progress-timeout", "stall", "exit";
 * DL_EINVAL otherwise. rdzv_hang_kind_name the other way. */
int rdzv_hang_kind_parse(const char *s, enum rdzv_hang_kind *out);
const char *rdzv_hang_kind_name(enum rdzv_hang_kind k);

/*
 * rdzv_hang_trigger opens a trigger in job for by (a node id or "cli"),
 * or, while one is open, answers that one. node_id (NULL: none) must be
 * a member of the running round, with incarnation when given. *out: a new
 * {"id", "kind", "by", "time_ms", "round", "opened"} ("opened": a new
 * trigger). Opening marks the job RDZV_CHANGED_WAKE, so that parked
 * watches answer with it. Errors: DL_ENOTFOUND (no job), DL_EGONE (the
 * job ended), DL_ESTALE (node_id not a member, or another incarnation),
 * DL_ECONFLICT (no running round), DL_ENOMEM.
 */
int rdzv_hang_trigger(struct rdzv_state *st, const char *job,
		      const char *node_id, const char *incarnation,
		      enum rdzv_hang_kind kind, const char *by, uint64_t now_ms,
		      uint64_t wall_ms, json_t **out, char *err,
		      size_t err_size);

/*
 * rdzv_hang_report stores report (a node report, borrowed; kept by
 * reference, the caller must not change it afterwards), bytes long on
 * the wire, for the trigger it names (report.trigger.id), replacing the
 * node's earlier report for it. The node (report.node, incarnation) must
 * have been a member of the round when the trigger opened; an ended job
 * still takes reports for its kept triggers. Errors: DL_EINVAL (not a
 * node report), DL_ENOTFOUND (no job, or no such trigger kept),
 * DL_ESTALE (not a member then, or another incarnation), DL_ELIMIT (over
 * a size bound), DL_ENOMEM. *complete: every node asked has reported.
 */
int rdzv_hang_report(struct rdzv_state *st, const char *job,
		     const char *incarnation, json_t *report, size_t bytes,
		     uint64_t now_ms, uint64_t wall_ms, int *complete,
		     char *err, size_t err_size);

/*
 * rdzv_hang_json: the trigger id (NULL: the latest) of job as GET
 * /v1/jobs/{job}/hang answers it: {"trigger": {..., "open"} | null,
 * "complete", "reported", "asked", "reports", "analysis" | null,
 * "text"}. The analysis is
 * brought up to date first (hence st is not const). A new reference;
 * NULL when there is no such job or trigger (or memory ran out).
 */
json_t *rdzv_hang_json(struct rdzv_state *st, const char *job, const char *id,
		       uint64_t now_ms, uint64_t wall_ms);
/* rdzv_hang_summary_json: {"trigger", "complete", "reported", "asked",
 * "analysis"} of the latest trigger (no reports, no stacks), NULL when
 * the job has none. */
json_t *rdzv_hang_summary_json(struct rdzv_state *st, const char *job,
			       uint64_t now_ms, uint64_t wall_ms);
/* rdzv_hang_open_json: {"id", "kind", "by", "time_ms"} of job's open
 * trigger, NULL when none is open. */
json_t *rdzv_hang_open_json(const struct rdzv_state *st, const char *job,
			    uint64_t now_ms);
/* rdzv_hang_seq: how many triggers job has opened (0: none, or no job);
 * a watch parked at seq n answers once a trigger n + 1 is open. */
uint64_t rdzv_hang_seq(const struct rdzv_state *st, const char *job);

/* Metrics: jobs per state (RDZV_JOB_NSTATES entries), members of current
 * rounds, and the counters. */
void rdzv_state_stats(const struct rdzv_state *st,
		      uint64_t jobs_by_state[RDZV_JOB_NSTATES],
		      uint64_t *members, struct rdzv_counters *counters);

/* One job's figures for /metrics: its name (borrowed, valid until the
 * next event), state, round, members of its round, waiting nodes
 * (joiners and spares), restarts charged and allowed, and the
 * milliseconds since its round last changed (opened, formed or ended). */
struct rdzv_job_stats {
	const char *job;
	enum rdzv_job_state state;
	uint64_t round;
	uint64_t members;
	uint64_t waiting;
	uint32_t restart_count;
	uint32_t max_restarts;
	uint64_t since_change_ms;
};

/* rdzv_job_stats_at fills out for the i-th job (0 <= i <
 * rdzv_job_count); DL_ENOTFOUND past the end. */
int rdzv_job_stats_at(const struct rdzv_state *st, size_t i, uint64_t now_ms,
		      struct rdzv_job_stats *out);

#endif
