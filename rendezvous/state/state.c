/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state.c - the rendezvous state machine's job table: creating, finding,
 * forgetting and deleting jobs, the member index, the change marks the
 * host drains, the KV store's entry points and the counters. The rules of
 * rounds live in round.c, the deadlines in deadlines.c.
 *
 * No I/O: every entry point changes the jobs in memory and marks what
 * changed; the host journals and answers.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

void rdzv_limits_init(struct rdzv_limits *limits)
{
	limits->max_jobs = 1024;
	limits->max_nodes_per_job = 65536;
	limits->max_keys_per_job = 1024;
	limits->max_value_bytes = 64 * 1024;
}

void rdzv_job_config_init(struct rdzv_job_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->min_nodes = 1;
	cfg->max_nodes = 1;
	cfg->join_timeout_ms = 600000;
	cfg->last_call_timeout_ms = 5000;
	cfg->heartbeat_interval_ms = 1000;
	cfg->heartbeat_timeout_ms = 5000;
}

const char *rdzv_job_state_name(enum rdzv_job_state s)
{
	static const char *const names[] = {"WAITING",	  "RUNNING",
					    "RESTARTING", "SUCCEEDED",
					    "FAILED",	  "PREEMPTED"};
	return (unsigned)s < RDZV_JOB_NSTATES ? names[s] : "UNKNOWN";
}

const char *rdzv_action_name(enum rdzv_action a)
{
	switch (a) {
	case RDZV_ACTION_CONTINUE: return "continue";
	case RDZV_ACTION_RESTART: return "restart";
	case RDZV_ACTION_STOP: return "stop";
	}
	return "continue";
}

const char *rdzv_member_status_name(enum rdzv_member_status s)
{
	switch (s) {
	case RDZV_MEMBER_RUNNING: return "running";
	case RDZV_MEMBER_SUCCEEDED: return "succeeded";
	case RDZV_MEMBER_FAILED: return "failed";
	}
	return "running";
}

struct rdzv_state *rdzv_state_new(const struct rdzv_limits *limits)
{
	struct rdzv_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	if (limits)
		st->limits = *limits;
	else
		rdzv_limits_init(&st->limits);
	return st;
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	job_hangs_free(j);
	free(j->members);
	free(j->member_index.slots);
	free(j->waiters);
	free(j->waiter_index.slots);
	free(j->survivors);
	free(j->survivor_index.slots);
	json_decref(j->failures);
	json_decref(j->runs);
	rdzv_kv_free(j->kv);
	free(j);
}

void rdzv_state_free(struct rdzv_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->njobs; i++)
		job_free(st->jobs[i]);
	free(st->jobs);
	free(st->deleted);
	free(st);
}

int job_reserve(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;
	void *p;
	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 4;
	while (ncap < need)
		ncap *= 2;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return DL_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

struct job *state_find_job(const struct rdzv_state *st, const char *name)
{
	for (size_t i = 0; i < st->njobs; i++)
		if (strcmp(st->jobs[i]->name, name) == 0)
			return st->jobs[i];
	return NULL;
}

/* FNV-1a: node ids are short and chosen by clients; the index only has to
 * spread them, a collision costs a probe */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* the node id of record i of an array whose records are stride bytes,
 * each with its node id off bytes in */
#define NAME_AT(arr, stride, off, i)                                           \
	((const char *)(arr) + (size_t)(i) * (stride) + (off))

static void name_index_put(struct name_index *x, const char *name, size_t i)
{
	size_t h = name_hash(name) & (x->cap - 1);
	while (x->slots[h])
		h = (h + 1) & (x->cap - 1);
	x->slots[h] = (uint32_t)i + 1;
}

/* name_index_build indexes the n records of arr, in at least twice as
 * many slots */
static void name_index_build(struct name_index *x, const void *arr,
			     size_t stride, size_t off, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	if (cap > x->cap) {
		uint32_t *slots = realloc(x->slots, cap * sizeof(*slots));
		if (!slots) {
			/* lookups fall back to scanning */
			free(x->slots);
			x->slots = NULL;
			x->cap = 0;
			return;
		}
		x->slots = slots;
		x->cap = cap;
	}
	memset(x->slots, 0, x->cap * sizeof(x->slots[0]));
	for (size_t i = 0; i < n; i++)
		name_index_put(x, NAME_AT(arr, stride, off, i), i);
}

/* name_index_find: the index of the record named name among the n of
 * arr, or n when there is none */
static size_t name_index_find(const struct name_index *x, const void *arr,
			      size_t stride, size_t off, size_t n,
			      const char *name)
{
	if (!n)
		return n;
	if (!x->cap) {
		for (size_t i = 0; i < n; i++)
			if (strcmp(NAME_AT(arr, stride, off, i), name) == 0)
				return i;
		return n;
	}
	for (size_t h = name_hash(name) & (x->cap - 1); x->slots[h];
	     h = (h + 1) & (x->cap - 1)) {
		size_t i = x->slots[h] - 1;
		if (i < n && strcmp(NAME_AT(arr, stride, off, i), name) == 0)
			return i;
	}
	return n;
}

#define MEMBER_NAME sizeof(struct member), offsetof(struct member, info.node_id)
#define WAITER_NAME sizeof(struct waiter), offsetof(struct waiter, info.node_id)
#define SURVIVOR_NAME                                                          \
	sizeof(struct survivor), offsetof(struct survivor, node_id)

void job_index_members(struct job *j)
{
	name_index_build(&j->member_index, j->members, MEMBER_NAME,
			 j->nmembers);
}

/* job_find_member is on every heartbeat's path: hashed, so one server core
 * keeps up with heartbeats of a job of many thousand nodes */
struct member *job_find_member(const struct job *j, const char *node_id)
{
	size_t i = name_index_find(&j->member_index, j->members, MEMBER_NAME,
				   j->nmembers, node_id);
	return i < j->nmembers ? &j->members[i] : NULL;
}

void job_index_waiters(struct job *j)
{
	name_index_build(&j->waiter_index, j->waiters, WAITER_NAME,
			 j->nwaiters);
}

void job_waiter_added(struct job *j)
{
	struct name_index *x = &j->waiter_index;
	if (!x->cap || 2 * j->nwaiters > x->cap) {
		job_index_waiters(j); /* grown (or tried again) */
		return;
	}
	name_index_put(x, j->waiters[j->nwaiters - 1].info.node_id,
		       j->nwaiters - 1);
}

struct waiter *job_find_waiter(const struct job *j, const char *node_id)
{
	size_t i = name_index_find(&j->waiter_index, j->waiters, WAITER_NAME,
				   j->nwaiters, node_id);
	return i < j->nwaiters ? &j->waiters[i] : NULL;
}

void job_index_survivors(struct job *j)
{
	name_index_build(&j->survivor_index, j->survivors, SURVIVOR_NAME,
			 j->nsurvivors);
}

struct survivor *job_find_survivor(const struct job *j, const char *node_id)
{
	size_t i = name_index_find(&j->survivor_index, j->survivors,
				   SURVIVOR_NAME, j->nsurvivors, node_id);
	return i < j->nsurvivors ? &j->survivors[i] : NULL;
}

int job_is_open(const struct job *j)
{
	return j->state == RDZV_JOB_WAITING || j->state == RDZV_JOB_RESTARTING;
}

unsigned job_master_port(const struct job *j)
{
	if (!j->nmembers || !j->members[0].info.master_port)
		return 29500;
	return j->members[0].info.master_port;
}

int job_is_ended(const struct job *j)
{
	return j->state == RDZV_JOB_SUCCEEDED || j->state == RDZV_JOB_FAILED ||
	       j->state == RDZV_JOB_PREEMPTED;
}

void job_mark(struct job *j, unsigned what)
{
	j->changed |= what;
}

struct job *state_add_job(struct rdzv_state *st, const char *name,
			  const struct rdzv_job_config *cfg)
{
	struct job *j;
	if (job_reserve((void **)&st->jobs, &st->jobs_cap, st->njobs + 1,
			sizeof(st->jobs[0])))
		return NULL;
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->failures = json_array();
	j->runs = json_array();
	j->kv = rdzv_kv_new();
	if (!j->failures || !j->runs || !j->kv) {
		job_free(j);
		return NULL;
	}
	snprintf(j->name, sizeof(j->name), "%s", name);
	j->cfg = *cfg;
	j->round = 1;
	j->run = 1;
	j->state = RDZV_JOB_WAITING;
	st->jobs[st->njobs++] = j;
	/* a job deleted and re-created before the marks were popped must
	 * not be journaled as deleted */
	for (size_t i = 0; i < st->ndeleted; i++) {
		if (strcmp(st->deleted[i], name) == 0) {
			memmove(&st->deleted[i], &st->deleted[i + 1],
				(st->ndeleted - i - 1) *
				    sizeof(st->deleted[0]));
			st->ndeleted--;
			break;
		}
	}
	return j;
}

void state_remove_job(struct rdzv_state *st, struct job *j, int journal)
{
	for (size_t i = 0; i < st->njobs; i++) {
		if (st->jobs[i] != j)
			continue;
		if (journal &&
		    job_reserve((void **)&st->deleted, &st->deleted_cap,
				st->ndeleted + 1, sizeof(st->deleted[0])) == 0)
			memcpy(st->deleted[st->ndeleted++], j->name,
			       sizeof(st->deleted[0]));
		memmove(&st->jobs[i], &st->jobs[i + 1],
			(st->njobs - i - 1) * sizeof(st->jobs[0]));
		st->njobs--;
		job_free(j);
		return;
	}
}

void rdzv_job_delete(struct rdzv_state *st, const char *job)
{
	struct job *j = state_find_job(st, job);
	if (j)
		state_remove_job(st, j, 0);
}

/* make_room drops the job that ended first when the job table is full. */
int state_make_room(struct rdzv_state *st, char *err, size_t err_size)
{
	struct job *oldest = NULL;
	if (st->njobs < st->limits.max_jobs)
		return 0;
	for (size_t i = 0; i < st->njobs; i++) {
		struct job *j = st->jobs[i];
		if (j->ended_seq &&
		    (!oldest || j->ended_seq < oldest->ended_seq))
			oldest = j;
	}
	if (!oldest)
		return ERR(DL_ELIMIT,
			   "too many jobs (the server's limit is %" PRIu32 ")",
			   st->limits.max_jobs);
	log_info("job=%s round=%" PRIu64 " event=job_forgotten reason=max_jobs",
		 oldest->name, oldest->round);
	state_remove_job(st, oldest, 1);
	return 0;
}

int rdzv_kv_put(struct rdzv_state *st, const char *job, const char *key,
		const void *data, size_t len, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	int rc;
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (!parse_name_valid(key, RDZV_NAME_MAX))
		return ERR(DL_EINVAL, "invalid key name");
	if (len > st->limits.max_value_bytes)
		return ERR(DL_ELIMIT, "value of key %s is over %zu bytes", key,
			   st->limits.max_value_bytes);
	rc = rdzv_kv_set(j->kv, key, data, len, st->limits.max_keys_per_job);
	if (rc == DL_ELIMIT)
		return ERR(DL_ELIMIT,
			   "too many keys in job %s (at most %" PRIu32 ")", job,
			   st->limits.max_keys_per_job);
	if (rc)
		return ERR(rc, "cannot store key %s: %s", key, dl_strerror(rc));
	job_mark(j, RDZV_CHANGED_WAKE);
	return 0;
}

int rdzv_kv_get(const struct rdzv_state *st, const char *job, const char *key,
		const void **data, size_t *len)
{
	const struct job *j = state_find_job(st, job);
	if (!j)
		return DL_ENOTFOUND;
	return rdzv_kv_lookup(j->kv, key, data, len);
}

int rdzv_kv_each(const struct rdzv_state *st, const char *job,
		 int (*fn)(void *ctx, const char *key, const void *data,
			   size_t len),
		 void *ctx)
{
	const struct job *j = state_find_job(st, job);
	if (!j)
		return DL_ENOTFOUND;
	return rdzv_kv_foreach(j->kv, fn, ctx);
}

unsigned rdzv_state_pop_changed(struct rdzv_state *st, char *name)
{
	if (st->ndeleted) {
		st->ndeleted--;
		memcpy(name, st->deleted[st->ndeleted], RDZV_NAME_MAX + 1);
		return RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE;
	}
	for (size_t i = 0; i < st->njobs; i++) {
		unsigned what = st->jobs[i]->changed;
		if (what) {
			st->jobs[i]->changed = 0;
			memcpy(name, st->jobs[i]->name, RDZV_NAME_MAX + 1);
			return what;
		}
	}
	return 0;
}

int rdzv_job_exists(const struct rdzv_state *st, const char *job)
{
	return state_find_job(st, job) != NULL;
}

size_t rdzv_job_count(const struct rdzv_state *st)
{
	return st->njobs;
}

const char *rdzv_job_name_at(const struct rdzv_state *st, size_t i)
{
	return i < st->njobs ? st->jobs[i]->name : NULL;
}

void rdzv_state_stats(const struct rdzv_state *st,
		      uint64_t jobs_by_state[RDZV_JOB_NSTATES],
		      uint64_t *members, struct rdzv_counters *counters)
{
	memset(jobs_by_state, 0, RDZV_JOB_NSTATES * sizeof(uint64_t));
	*members = 0;
	for (size_t i = 0; i < st->njobs; i++) {
		jobs_by_state[st->jobs[i]->state]++;
		if (!job_is_ended(st->jobs[i]))
			*members += st->jobs[i]->nmembers;
	}
	*counters = st->counters;
}

int rdzv_job_stats_at(const struct rdzv_state *st, size_t i, uint64_t now_ms,
		      struct rdzv_job_stats *out)
{
	const struct job *j;
	if (i >= st->njobs)
		return DL_ENOTFOUND;
	j = st->jobs[i];
	out->job = j->name;
	out->state = j->state;
	out->round = j->round;
	out->members = j->nmembers;
	out->waiting = j->nwaiters;
	out->restart_count = j->restart_count;
	out->max_restarts = j->cfg.max_restarts;
	out->since_change_ms =
	    now_ms > j->changed_ms ? now_ms - j->changed_ms : 0;
	return 0;
}
