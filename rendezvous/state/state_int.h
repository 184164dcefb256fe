/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_int.h - the rendezvous state machine's data and the helpers its
 * files share: state.c (the job table), round.c (the rules of rounds),
 * join.c and node_events.c (the events of nodes), deadlines.c (the timer
 * side), state_json.c (views) and state_save.c (the durable form). Private to
 * the state machine; everyone else, api.c and journal.c included, goes through
 * dlaunch/rdzv_state.h.
 */
#ifndef DLAUNCH_RDZV_STATE_INT_H
#define DLAUNCH_RDZV_STATE_INT_H

#include <stdio.h>

#include "dlaunch/rdzv_state.h"
#include "kv.h"

/* ERR(code, fmt, ...): writes the message into the function's err
 * (err_size bytes) and is code; for `return ERR(DL_EINVAL, "...")`. */
#define ERR(code, ...) (snprintf(err, err_size, __VA_ARGS__), (code))

/* A member of the job's current (closed) round. */
/* How many ended runs of one job id are kept for status. */
#define RDZV_RUNS_KEPT 8

struct member {
	struct rdzv_node_info info;
	uint32_t node_rank;
	uint64_t rank_offset;
	enum rdzv_member_status status;
	uint64_t last_seen_ms;
	int gone; /* marked for removal by the round that is ending */
	/* how its workers entered the round (in memory only) */
	enum rdzv_recovery recovery;
	char recovery_why[RDZV_RECOVERY_WHY_MAX + 1];
};

/* An open-addressing index of the node ids of an array of records
 * (members, waiters, survivors): slot = index + 1, 0 empty. With cap 0 (never
 * built, or out of memory) a lookup scans the array. Rounds and the open
 * round's checks look a node up for each node: without it a round of N nodes
 * costs O(N^2) string comparisons per join (a 4096-node takeover took
 * the leader's core for half a minute). */
struct name_index {
	uint32_t *slots;
	size_t cap;
};

/* A node waiting for the next round: a joiner or a spare. */
struct waiter {
	struct rdzv_node_info info;
	uint64_t seq; /* join order */
	uint64_t last_seen_ms;
	uint32_t polls_open; /* held joins keep it alive */
};

/* A member of the previous round expected back in the open round; the
 * array is in the old node-rank order, which the next round keeps. */
struct survivor {
	char node_id[RDZV_NAME_MAX + 1];
	uint64_t last_seen_ms;
};

/* One round of a job's timeline (history.c): times are the state
 * machine's monotonic milliseconds, UINT64_MAX when it has not happened. */
struct round_rec {
	uint64_t round;
	uint64_t opened_ms, formed_ms, ended_ms;
	uint32_t nnodes;
	uint64_t world_size;
	const char *end_reason; /* static string, NULL while not ended */
	char end_node[RDZV_NAME_MAX + 1];
	int recovered; /* opened when the server restored the job */
	uint32_t entered[RDZV_RECOVERY_N]; /* members, by how they entered */
};

/* the newest rounds a job remembers for its timeline */
#define ROUND_HISTORY 32
/* incarnations of a node id replaced by a later join, kept per job */
#define REPLACED_KEPT 16

struct replaced_inc {
	char node_id[RDZV_NAME_MAX + 1];
	char incarnation[RDZV_INCARNATION_MAX + 1];
};

struct job {
	char name[RDZV_NAME_MAX + 1];
	struct rdzv_job_config cfg;
	enum rdzv_job_state state;
	uint64_t round;
	uint32_t restart_count;
	uint64_t world_size;

	struct member *members;
	size_t nmembers, members_cap;
	/* rebuilt whenever members is (job_index_members) */
	struct name_index member_index;
	struct waiter *waiters;
	size_t nwaiters, waiters_cap;
	/* rebuilt whenever waiters lose one or are reordered
	 * (job_index_waiters); a join adds its waiter (job_waiter_added) */
	struct name_index waiter_index;
	struct survivor *survivors;
	size_t nsurvivors, survivors_cap;
	/* rebuilt whenever survivors changes (job_index_survivors) */
	struct name_index survivor_index;
	int had_survivors; /* the open round followed a round with members */

	/* open-round clocks */
	int min_reached;
	uint64_t min_reached_ms;     /* when min_nodes were first there */
	uint64_t below_min_since_ms; /* join_timeout runs from here */

	uint64_t next_seq;
	uint64_t ended_seq; /* order in which jobs ended (0: running) */
	uint64_t ended_ms;  /* when it ended (or was restored ended) */
	uint32_t run;	    /* 1 + the runs of this id that ended before */
	json_t *runs;	    /* those runs' summaries, the last RDZV_RUNS_KEPT */
	json_t *failures;   /* array, at most RDZV_MAX_FAILURES */
	/* the timeline: a ring of the last ROUND_HISTORY rounds, the newest
	 * at (nrounds - 1) % ROUND_HISTORY; in memory only (not journaled) */
	struct round_rec rounds[ROUND_HISTORY];
	uint64_t nrounds;
	uint64_t changed_ms; /* last round change: opened, formed or ended */
	/* the stop step of a preemption (preempt.c); 0: none. Saved. */
	uint64_t preempt_step;
	struct rdzv_kv *kv;
	/* hang triggers and their reports (hangs.c); NULL until the first
	 * trigger; in memory only */
	struct job_hangs *hangs;
	/* the incarnations later joins replaced, a ring of REPLACED_KEPT
	 * (the newest at (nreplaced - 1) % REPLACED_KEPT): a request of one
	 * is refused with reply->replaced, so two agents given one node id
	 * do not take it from each other in turn; in memory only */
	struct replaced_inc replaced[REPLACED_KEPT];
	uint64_t nreplaced;
	unsigned changed;
};

struct rdzv_state {
	struct rdzv_limits limits;
	struct job **jobs;
	size_t njobs, jobs_cap;
	char (*deleted)[RDZV_NAME_MAX + 1]; /* deleted, not yet popped */
	size_t ndeleted, deleted_cap;
	uint64_t end_seq;
	struct rdzv_counters counters;
	size_t hang_bytes; /* node reports held over all jobs (hangs.c) */
};

/* --- state.c: the job table --- */

struct job *state_find_job(const struct rdzv_state *st, const char *name);
/* state_add_job appends a new job at round 1, WAITING; NULL when out of
 * memory. The caller checked the job limit (state_make_room). */
struct job *state_add_job(struct rdzv_state *st, const char *name,
			  const struct rdzv_job_config *cfg);
/* state_remove_job frees j; with journal set its deletion is popped by
 * rdzv_state_pop_changed. */
void state_remove_job(struct rdzv_state *st, struct job *j, int journal);
/* state_make_room forgets the job that ended first when the table is
 * full; DL_ELIMIT (message in err) when no job has ended. */
int state_make_room(struct rdzv_state *st, char *err, size_t err_size);

struct member *job_find_member(const struct job *j, const char *node_id);
void job_index_members(struct job *j);
struct waiter *job_find_waiter(const struct job *j, const char *node_id);
/* job_index_waiters: after waiters lost one, were reordered or cleared */
void job_index_waiters(struct job *j);
/* job_waiter_added: after a waiter was appended */
void job_waiter_added(struct job *j);
struct survivor *job_find_survivor(const struct job *j, const char *node_id);
/* job_index_survivors: after survivors changed */
void job_index_survivors(struct job *j);
int job_is_open(const struct job *j);
int job_is_ended(const struct job *j);
/* job_mark records RDZV_CHANGED_* flags for rdzv_state_pop_changed. */
void job_mark(struct job *j, unsigned what);
int job_reserve(void **arr, size_t *cap, size_t need, size_t elem);
/* job_master_port: the port node rank 0 offered, else torchrun's 29500 */
unsigned job_master_port(const struct job *j);

/* --- round.c: the rules, used by join.c, node_events.c, deadlines.c --- */

/* job_fill_reply fills reply (NULL: nothing) with j's round, state,
 * restart count and stop step, and action (stop once j ended). */
void job_fill_reply(const struct job *j, enum rdzv_action action,
		    struct rdzv_reply *reply);
/* job_action_for: the action for node_id right now: continue for a
 * member of a running round, stop once the job ended, restart (join
 * again) otherwise. */
enum rdzv_action job_action_for(const struct job *j, const char *node_id);

/* job_track_min keeps the open round's clocks (min_reached, since when
 * the round has been short of min_nodes). */
void job_track_min(struct job *j, uint64_t now_ms);
/* job_try_close closes the open round when it is complete. */
void job_try_close(struct rdzv_state *st, struct job *j, uint64_t now_ms);
/* job_end_round ends the running round (members marked gone do not
 * survive) and opens the next one. */
void job_end_round(struct rdzv_state *st, struct job *j, uint64_t now_ms,
		   const char *reason, const char *node_id);
/* --- preempt.c --- */

/* job_preempt_end: a failure or a lost member while j is preempted: the
 * stop step can no longer be met by every rank, so the job ends FAILED
 * (reason) instead of going on in a new round. 1 when it did (j was
 * preempted), 0 otherwise. */
int job_preempt_end(struct rdzv_state *st, struct job *j, const char *reason,
		    uint64_t now_ms);

/* --- master.c --- */

/* job_master_reachable keeps a loopback address from being the master of
 * the round just closed when a member announced another address (a node
 * on another host, for which loopback is itself): the first such member
 * becomes node rank 0, the others keep their order behind it, ranks and
 * offsets follow. A round all on loopback (one host) is left as it is. */
void job_master_reachable(struct job *j);

/* job_finish ends the job's run in state (SUCCEEDED or FAILED). */
void job_finish(struct rdzv_state *st, struct job *j, enum rdzv_job_state state,
		const char *reason, uint64_t now_ms);

/* --- hangs.c: hang triggers and node reports --- */

/* job_hangs_free drops j's triggers and reports (a job freed or starting
 * a new run), giving their bytes back to the state's total. */
void job_hangs_free(struct job *j);

/* --- history.c: the timeline of rounds --- */

/* history_open records that j's current round opened at now_ms
 * (recovered: the server restored it from its journal). */
void history_open(struct job *j, uint64_t now_ms, int recovered);
/* history_formed: the current round closed with its members. */
void history_formed(struct job *j, uint64_t now_ms);
/* history_end: the current round ended for reason (a static string),
 * node_id the node that caused it (NULL: none). */
void history_end(struct job *j, uint64_t now_ms, const char *reason,
		 const char *node_id);
/* history_recovery: a member of the current round said how it entered */
void history_recovery(struct job *j, enum rdzv_recovery how);
/* history_json: the timeline as a JSON array, oldest first, with times
 * as milliseconds before now_ms; NULL when out of memory. */
json_t *history_json(const struct job *j, uint64_t now_ms);

/* job_run_summary: what is kept of an ended run ({run, state, round,
 * restart_count, failures}); a new reference, NULL when out of memory. */
json_t *job_run_summary(const struct job *j);
/* job_new_run starts run + 1 of the ended job j with cfg (a rerun may
 * change it): the ended run's summary goes to j->runs (the last
 * RDZV_RUNS_KEPT), everything else starts afresh, the KV store too;
 * rounds go on counting, so nothing addressed to a round of the ended
 * run is taken for one of the new run. DL_ENOMEM leaves j as it was. */
/* job_note_replaced: incarnation of node_id was replaced by a later join */
void job_note_replaced(struct job *j, const char *node_id,
		       const char *incarnation);
/* job_replaced: DL_ESTALE with reply->replaced and a message in err when
 * incarnation of node_id was replaced in j, else 0 */
int job_replaced(const struct job *j, const char *node_id,
		 const char *incarnation, struct rdzv_reply *reply, char *err,
		 size_t err_size);
int job_new_run(struct job *j, const struct rdzv_job_config *cfg,
		uint64_t now_ms, char *err, size_t err_size);

#endif
