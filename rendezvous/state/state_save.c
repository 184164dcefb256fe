/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_save.c - a job's durable form: rdzv_job_save turns a job (without
 * its KV store, which is saved key by key) into JSON, rdzv_job_restore
 * rebuilds it, checking every field as strictly as a request, since the
 * JSON comes back from a disk (or, later, another store). Timers are not
 * saved: a restored job's clocks start again at the time of the restore.
 * No I/O.
 */
#include "state_int.h"

#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"

static json_t *node_save(const struct rdzv_node_info *n)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:I}", "node_id", n->node_id,
			 "incarnation", n->incarnation, "addr", n->addr,
			 "nproc", (json_int_t)n->nproc, "master_port",
			 (json_int_t)n->master_port);
}

json_t *rdzv_job_save(const struct rdzv_state *st, const char *job)
{
	const struct job *j = state_find_job(st, job);
	json_t *members, *waiters, *survivors, *cfg, *out;
	if (!j)
		return NULL;
	members = json_array();
	waiters = json_array();
	survivors = json_array();
	for (size_t i = 0; members && i < j->nmembers; i++) {
		json_t *o = node_save(&j->members[i].info);
		json_object_set_new(o, "status",
				    json_integer(j->members[i].status));
		/* how it entered the round, where it said (an etcd job's
		 * record is what `dlaunch status` shows) */
		if (j->members[i].recovery != RDZV_RECOVERY_NONE) {
			json_object_set_new(o, "recovery",
					    json_string(rdzv_recovery_name(
						j->members[i].recovery)));
			json_object_set_new(
			    o, "recovery_why",
			    json_string(j->members[i].recovery_why));
		}
		json_array_append_new(members, o);
	}
	for (size_t i = 0; waiters && i < j->nwaiters; i++)
		json_array_append_new(waiters, node_save(&j->waiters[i].info));
	for (size_t i = 0; survivors && i < j->nsurvivors; i++)
		json_array_append_new(survivors,
				      json_string(j->survivors[i].node_id));
	cfg = rdzv_job_config_json(&j->cfg);
	out = json_pack(
	    "{s:s, s:o, s:I, s:O, s:I, s:I, s:I, s:I, s:I, s:o, "
	    "s:o, s:o, s:O}",
	    "job", j->name, "config", cfg, "run", (json_int_t)j->run, "runs",
	    j->runs, "state", (json_int_t)j->state, "round",
	    (json_int_t)j->round, "restart_count", (json_int_t)j->restart_count,
	    "next_seq", (json_int_t)j->next_seq, "had_survivors",
	    (json_int_t)j->had_survivors, "members", members, "waiters",
	    waiters, "survivors", survivors, "failures", j->failures);
	if (out && j->preempt_step)
		json_object_set_new(out, "preempt_step",
				    json_integer((json_int_t)j->preempt_step));
	return out;
}

/* get_u64 reads the required integer field key of o, in [min, max]. */
static int get_u64(json_t *o, const char *key, uint64_t min, uint64_t max,
		   uint64_t *out, char *err, size_t err_size)
{
	return jsonh_get_u64(o, key, 1, min, max, out, err, err_size);
}

json_t *rdzv_job_config_json(const struct rdzv_job_config *c)
{
	return json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "min_nodes",
	    (json_int_t)c->min_nodes, "max_nodes", (json_int_t)c->max_nodes,
	    "max_restarts", (json_int_t)c->max_restarts, "join_timeout_ms",
	    (json_int_t)c->join_timeout_ms, "last_call_timeout_ms",
	    (json_int_t)c->last_call_timeout_ms, "heartbeat_interval_ms",
	    (json_int_t)c->heartbeat_interval_ms, "heartbeat_timeout_ms",
	    (json_int_t)c->heartbeat_timeout_ms);
}

int rdzv_job_config_from_json(json_t *c, struct rdzv_job_config *cfg, char *err,
			      size_t err_size)
{
	uint64_t v[7];
	int rc;

	if (!json_is_object(c)) {
		snprintf(err, err_size, "config is not an object");
		return DL_EINVAL;
	}
	if ((rc = get_u64(c, "min_nodes", 1, UINT32_MAX, &v[0], err,
			  err_size)) ||
	    (rc = get_u64(c, "max_nodes", 1, UINT32_MAX, &v[1], err,
			  err_size)) ||
	    (rc = get_u64(c, "max_restarts", 0, RDZV_MAX_RESTARTS, &v[2], err,
			  err_size)) ||
	    (rc = get_u64(c, "join_timeout_ms", 1, UINT32_MAX, &v[3], err,
			  err_size)) ||
	    (rc = get_u64(c, "last_call_timeout_ms", 0, UINT32_MAX, &v[4], err,
			  err_size)) ||
	    (rc = get_u64(c, "heartbeat_interval_ms", 1, UINT32_MAX, &v[5], err,
			  err_size)) ||
	    (rc = get_u64(c, "heartbeat_timeout_ms", 1, UINT32_MAX, &v[6], err,
			  err_size)))
		return rc;
	cfg->min_nodes = (uint32_t)v[0];
	cfg->max_nodes = (uint32_t)v[1];
	cfg->max_restarts = (uint32_t)v[2];
	cfg->join_timeout_ms = v[3];
	cfg->last_call_timeout_ms = v[4];
	cfg->heartbeat_interval_ms = v[5];
	cfg->heartbeat_timeout_ms = v[6];
	if (cfg->max_nodes < cfg->min_nodes) {
		snprintf(err, err_size, "min_nodes above max_nodes");
		return DL_EINVAL;
	}
	return 0;
}

/* restore_config reads the job's configuration. */
static int restore_config(json_t *saved, const char *name,
			  struct rdzv_job_config *cfg, char *err,
			  size_t err_size)
{
	char msg[256];
	if (rdzv_job_config_from_json(json_object_get(saved, "config"), cfg,
				      msg, sizeof(msg)) != 0) {
		snprintf(err, err_size, "job %s: %s", name, msg);
		return DL_EINVAL;
	}
	return 0;
}

/* replace_job creates job name afresh with cfg; a job saved again keeps
 * its KV store (journaled separately), unless it is a new run (the KV of
 * a run starts empty). NULL when out of memory. */
static struct job *replace_job(struct rdzv_state *st, const char *name,
			       const struct rdzv_job_config *cfg, uint64_t run)
{
	struct job *j, *old = state_find_job(st, name);
	struct rdzv_kv *kv = NULL;

	if (old && old->run == run) {
		kv = old->kv;
		old->kv = NULL;
	}
	if (old) {
		rdzv_job_delete(st, name);
	}
	j = state_add_job(st, name, cfg);
	if (!j) {
		rdzv_kv_free(kv);
		return NULL;
	}
	if (kv) {
		rdzv_kv_free(j->kv);
		j->kv = kv;
	}
	return j;
}

/* restore_run reads which run of its id a saved job is, and the
 * summaries of the runs before (both absent from a job saved before
 * reruns existed: run 1). runs is borrowed from saved. */
static int restore_run(json_t *saved, uint64_t *run, json_t **runs, char *err,
		       size_t err_size)
{
	json_t *r = json_object_get(saved, "runs"), *o;
	size_t i;
	*run = 1;
	*runs = NULL;
	if (json_object_get(saved, "run")) {
		int rc =
		    get_u64(saved, "run", 1, UINT32_MAX, run, err, err_size);
		if (rc)
			return rc;
	}
	if (!r)
		return 0;
	if (!json_is_array(r) || json_array_size(r) > RDZV_RUNS_KEPT) {
		snprintf(err, err_size,
			 "field 'runs' must be an array of at "
			 "most %d runs",
			 RDZV_RUNS_KEPT);
		return DL_EINVAL;
	}
	json_array_foreach(r, i, o)
	{
		if (!json_is_object(o)) {
			snprintf(err, err_size,
				 "field 'runs' must hold objects");
			return DL_EINVAL;
		}
	}
	*runs = r;
	return 0;
}

/* restore_counters reads the job's state, round and counters. */
static int restore_counters(json_t *saved, struct job *j, char *err,
			    size_t err_size)
{
	uint64_t state, restarts, had;
	int rc;

	if ((rc = get_u64(saved, "state", 0, RDZV_JOB_NSTATES - 1, &state, err,
			  err_size)) ||
	    (rc = get_u64(saved, "round", 1, UINT64_MAX / 2, &j->round, err,
			  err_size)) ||
	    (rc = get_u64(saved, "restart_count", 0, RDZV_MAX_RESTARTS,
			  &restarts, err, err_size)) ||
	    (rc = get_u64(saved, "next_seq", 0, UINT64_MAX / 2, &j->next_seq,
			  err, err_size)) ||
	    (rc = get_u64(saved, "had_survivors", 0, 1, &had, err, err_size)))
		return rc;
	/* absent in journals written before preemption existed */
	if ((rc = jsonh_get_u64(saved, "preempt_step", 0, 0, UINT64_MAX / 2,
				&j->preempt_step, err, err_size)))
		return rc;
	j->state = (enum rdzv_job_state)state;
	j->restart_count = (uint32_t)restarts;
	j->had_survivors = (int)had;
	return 0;
}

static int node_restore(json_t *o, struct rdzv_node_info *n, char *err,
			size_t err_size)
{
	const char *id = NULL, *inc = NULL, *addr = NULL;
	uint64_t v;
	int rc;
	memset(n, 0, sizeof(*n));
	if (!json_is_object(o))
		return DL_EINVAL;
	rc = jsonh_get_str(o, "node_id", 1, RDZV_NAME_MAX, &id, err, err_size);
	if (!rc)
		rc = jsonh_get_str(o, "incarnation", 1, RDZV_INCARNATION_MAX,
				   &inc, err, err_size);
	if (!rc)
		rc = jsonh_get_str(o, "addr", 1, RDZV_ADDR_MAX, &addr, err,
				   err_size);
	if (rc)
		return rc;
	snprintf(n->node_id, sizeof(n->node_id), "%s", id);
	snprintf(n->incarnation, sizeof(n->incarnation), "%s", inc);
	snprintf(n->addr, sizeof(n->addr), "%s", addr);
	rc = jsonh_get_u64(o, "nproc", 1, 1, RDZV_MAX_NPROC, &v, err, err_size);
	if (rc)
		return rc;
	n->nproc = (uint32_t)v;
	rc = jsonh_get_u64(o, "master_port", 1, 0, 65535, &v, err, err_size);
	if (rc)
		return rc;
	n->master_port = (uint16_t)v;
	return 0;
}

/* restore_recovery reads a member's optional "recovery" (a name
 * rdzv_recovery_parse knows) and "recovery_why" */
static int restore_recovery(json_t *o, struct member *m, char *err,
			    size_t err_size)
{
	const char *how = NULL, *why = NULL;
	if (jsonh_get_str(o, "recovery", 0, 32, &how, err, err_size) ||
	    jsonh_get_str(o, "recovery_why", 0, RDZV_RECOVERY_WHY_MAX, &why,
			  err, err_size))
		return DL_EINVAL;
	if (!how)
		return 0;
	if (rdzv_recovery_parse(how, &m->recovery) != 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "field 'recovery': '%s' is none of started, "
				 "in_place, restarted",
				 how);
	snprintf(m->recovery_why, sizeof(m->recovery_why), "%s",
		 why ? why : "");
	return 0;
}

/* restore_members rebuilds the closed round's members in node-rank order;
 * ranks and offsets follow from that order. */
static int restore_members(json_t *arr, struct job *j, uint64_t now_ms,
			   char *err, size_t err_size)
{
	json_t *o;
	size_t i;
	int rc;

	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->members, &j->members_cap,
			json_array_size(arr), sizeof(j->members[0])))
		return DL_EINVAL;
	json_array_foreach(arr, i, o)
	{
		struct member *m = &j->members[j->nmembers];
		uint64_t status;
		memset(m, 0, sizeof(*m));
		rc = node_restore(o, &m->info, err, err_size);
		if (!rc)
			rc = get_u64(o, "status", 0, RDZV_MEMBER_FAILED,
				     &status, err, err_size);
		if (rc)
			return rc;
		m->status = (enum rdzv_member_status)status;
		rc = restore_recovery(o, m, err, err_size);
		if (rc)
			return rc;
		m->node_rank = (uint32_t)j->nmembers;
		m->rank_offset = j->world_size;
		/* heartbeats are not journaled: a fresh deadline for all */
		m->last_seen_ms = now_ms;
		j->world_size += m->info.nproc;
		j->nmembers++;
	}
	job_index_members(j);
	return 0;
}

/* restore_waiters rebuilds the nodes waiting for the next round, in join
 * order. */
static int restore_waiters(json_t *arr, struct job *j, uint64_t now_ms,
			   char *err, size_t err_size)
{
	json_t *o;
	size_t i;
	int rc;

	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->waiters, &j->waiters_cap,
			json_array_size(arr), sizeof(j->waiters[0])))
		return DL_EINVAL;
	json_array_foreach(arr, i, o)
	{
		struct waiter *w = &j->waiters[j->nwaiters];
		memset(w, 0, sizeof(*w));
		rc = node_restore(o, &w->info, err, err_size);
		if (rc)
			return rc;
		w->seq = i + 1;
		w->last_seen_ms = now_ms;
		j->nwaiters++;
	}
	job_index_waiters(j);
	return 0;
}

/* restore_survivors rebuilds the previous round's members expected back,
 * in their old node-rank order. */
static int restore_survivors(json_t *arr, struct job *j, uint64_t now_ms)
{
	json_t *o;
	size_t i;

	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->survivors, &j->survivors_cap,
			json_array_size(arr), sizeof(j->survivors[0])))
		return DL_EINVAL;
	json_array_foreach(arr, i, o)
	{
		if (!json_is_string(o) ||
		    !parse_name_valid(json_string_value(o), RDZV_NAME_MAX))
			return DL_EINVAL;
		snprintf(j->survivors[i].node_id,
			 sizeof(j->survivors[i].node_id), "%s",
			 json_string_value(o));
		j->survivors[i].last_seen_ms = now_ms;
		j->nsurvivors++;
	}
	job_index_survivors(j);
	return 0;
}

/* restore_failures keeps the first RDZV_MAX_FAILURES failures. */
static int restore_failures(json_t *arr, struct job *j)
{
	json_t *o;
	size_t i;

	if (!json_is_array(arr))
		return DL_EINVAL;
	json_array_foreach(arr, i, o)
	{
		if (i >= RDZV_MAX_FAILURES)
			break;
		json_array_append(j->failures, o);
	}
	return 0;
}

/* restart_clocks starts the restored job's open-round clocks at now_ms
 * and checks that its members agree with its state. */
static int restart_clocks(struct rdzv_state *st, struct job *j, uint64_t now_ms,
			  char *err, size_t err_size)
{
	if (j->next_seq < j->nwaiters)
		j->next_seq = j->nwaiters;
	j->below_min_since_ms = now_ms;
	j->min_reached = j->nwaiters >= j->cfg.min_nodes;
	j->min_reached_ms = now_ms;
	/* the timeline is not journaled: it starts again here */
	j->nrounds = 0;
	history_open(j, now_ms, 1);
	if (j->state == RDZV_JOB_RUNNING)
		history_formed(j, now_ms);
	if (job_is_ended(j)) {
		/* the wait before a rerun starts again at the restore */
		j->ended_seq = ++st->end_seq;
		j->ended_ms = now_ms;
	}
	if ((j->state == RDZV_JOB_RUNNING && j->nmembers == 0) ||
	    (job_is_open(j) && j->nmembers)) {
		snprintf(err, err_size, "job %s: members do not match state %s",
			 j->name, rdzv_job_state_name(j->state));
		return DL_EINVAL;
	}
	return 0;
}

int rdzv_job_ended_ago(struct rdzv_state *st, const char *job, uint64_t ago_ms,
		       uint64_t now_ms)
{
	struct job *j = state_find_job(st, job);
	if (!j || !job_is_ended(j))
		return DL_ENOTFOUND;
	j->ended_ms = ago_ms < now_ms ? now_ms - ago_ms : 0;
	return 0;
}

int rdzv_job_restore(struct rdzv_state *st, json_t *saved, uint64_t now_ms,
		     char *err, size_t err_size)
{
	struct rdzv_job_config cfg;
	struct job *j;
	const char *name = NULL;
	uint64_t run = 1;
	json_t *runs = NULL;
	int rc;

	rc =
	    jsonh_get_str(saved, "job", 1, RDZV_NAME_MAX, &name, err, err_size);
	if (rc)
		return rc;
	if (!parse_name_valid(name, RDZV_NAME_MAX)) {
		snprintf(err, err_size, "invalid job name");
		return DL_EINVAL;
	}
	rc = restore_config(saved, name, &cfg, err, err_size);
	if (!rc)
		rc = restore_run(saved, &run, &runs, err, err_size);
	if (rc)
		goto out;
	j = replace_job(st, name, &cfg, run);
	if (!j) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	j->run = (uint32_t)run;
	if (runs)
		json_array_extend(j->runs, runs);
	rc = restore_counters(saved, j, err, err_size);
	if (!rc)
		rc = restore_members(json_object_get(saved, "members"), j,
				     now_ms, err, err_size);
	if (!rc)
		rc = restore_waiters(json_object_get(saved, "waiters"), j,
				     now_ms, err, err_size);
	if (!rc)
		rc = restore_survivors(json_object_get(saved, "survivors"), j,
				       now_ms);
	if (!rc)
		rc = restore_failures(json_object_get(saved, "failures"), j);
	if (!rc)
		rc = restart_clocks(st, j, now_ms, err, err_size);
	if (rc)
		rdzv_job_delete(st, name);
out:
	if (rc && !err[0])
		snprintf(err, err_size, "job %s: malformed saved state", name);
	return rc;
}
