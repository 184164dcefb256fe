/*
 * state_json.c - the state machine's jobs as JSON: the answers of the HTTP
 * API (join assignment, job detail, job list) and the durable form the
 * journal stores and replays. No I/O.
 */
#include "state_int.h"

#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"

/* torchrun's default when node rank 0 offered no port */

static json_t *member_json(const struct member *m)
{
	return json_pack("{s:s, s:I, s:s, s:I, s:I}", "node_id",
			 m->info.node_id, "node_rank", (json_int_t)m->node_rank,
			 "addr", m->info.addr, "nproc",
			 (json_int_t)m->info.nproc, "rank_offset",
			 (json_int_t)m->rank_offset);
}

json_t *rdzv_assignment_json(const struct rdzv_state *st, const char *job,
			     const char *node_id)
{
	const struct job *j = state_find_job(st, job);
	const struct member *m;
	json_t *out;

	if (!j || !(m = job_find_member(j, node_id)))
		return NULL;
	/* no member list: every node of an n-node round gets an answer, and
	 * n lists of n members made forming a 4096-node round cost 1.6 GB and
	 * seconds; the job detail (GET /v1/jobs/{job}) has them */
	out = json_pack(
	    "{s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:I, "
	    "s:I, s:I}",
	    "job", j->name, "round", (json_int_t)j->round, "state",
	    rdzv_job_state_name(j->state), "node_rank",
	    (json_int_t)m->node_rank, "nnodes", (json_int_t)j->nmembers,
	    "nproc", (json_int_t)m->info.nproc, "rank_offset",
	    (json_int_t)m->rank_offset, "world_size", (json_int_t)j->world_size,
	    "master_addr", j->members[0].info.addr, "master_port",
	    (json_int_t)job_master_port(j), "restart_count",
	    (json_int_t)j->restart_count, "max_restarts",
	    (json_int_t)j->cfg.max_restarts, "heartbeat_interval_ms",
	    (json_int_t)j->cfg.heartbeat_interval_ms, "heartbeat_timeout_ms",
	    (json_int_t)j->cfg.heartbeat_timeout_ms);
	return out;
}

json_t *rdzv_waiting_json(const struct rdzv_state *st, const char *job)
{
	const struct job *j = state_find_job(st, job);
	if (!j)
		return NULL;
	return json_pack("{s:s, s:I, s:s, s:I, s:s}", "job", j->name, "round",
			 (json_int_t)j->round, "state",
			 rdzv_job_state_name(j->state), "waiting",
			 (json_int_t)j->nwaiters, "action", "continue");
}

json_t *rdzv_job_detail_json(const struct rdzv_state *st, const char *job,
			     uint64_t now_ms)
{
	const struct job *j = state_find_job(st, job);
	json_t *out, *members, *waiting;

	if (!j)
		return NULL;
	members = json_array();
	waiting = json_array();
	for (size_t i = 0; members && i < j->nmembers; i++) {
		const struct member *m = &j->members[i];
		json_t *o = member_json(m);
		uint64_t ago =
		    now_ms > m->last_seen_ms ? now_ms - m->last_seen_ms : 0;
		json_object_set_new(
		    o, "status",
		    json_string(rdzv_member_status_name(m->status)));
		json_object_set_new(o, "last_seen_ms_ago",
				    json_integer((json_int_t)ago));
		json_array_append_new(members, o);
	}
	for (size_t i = 0; waiting && i < j->nwaiters; i++)
		json_array_append_new(
		    waiting, json_pack("{s:s, s:s, s:I}", "node_id",
				       j->waiters[i].info.node_id, "addr",
				       j->waiters[i].info.addr, "nproc",
				       (json_int_t)j->waiters[i].info.nproc));
	out = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, "
			"s:O}",
			"job", j->name, "state", rdzv_job_state_name(j->state),
			"round", (json_int_t)j->round, "restart_count",
			(json_int_t)j->restart_count, "max_restarts",
			(json_int_t)j->cfg.max_restarts, "min_nodes",
			(json_int_t)j->cfg.min_nodes, "max_nodes",
			(json_int_t)j->cfg.max_nodes, "world_size",
			(json_int_t)j->world_size, "members", members,
			"waiting", waiting, "failures", j->failures);
	if (out && j->nmembers) {
		json_object_set_new(out, "master_addr",
				    json_string(j->members[0].info.addr));
		json_object_set_new(out, "master_port",
				    json_integer(job_master_port(j)));
	}
	return out;
}

json_t *rdzv_jobs_json(const struct rdzv_state *st)
{
	json_t *jobs = json_array();
	for (size_t i = 0; jobs && i < st->njobs; i++) {
		const struct job *j = st->jobs[i];
		json_array_append_new(
		    jobs,
		    json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "job",
			      j->name, "state", rdzv_job_state_name(j->state),
			      "round", (json_int_t)j->round, "nnodes",
			      (json_int_t)j->nmembers, "world_size",
			      (json_int_t)j->world_size, "restart_count",
			      (json_int_t)j->restart_count, "max_restarts",
			      (json_int_t)j->cfg.max_restarts));
	}
	return json_pack("{s:o}", "jobs", jobs);
}

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
	json_t *members, *waiters, *survivors, *cfg;
	if (!j)
		return NULL;
	members = json_array();
	waiters = json_array();
	survivors = json_array();
	for (size_t i = 0; members && i < j->nmembers; i++) {
		json_t *o = node_save(&j->members[i].info);
		json_object_set_new(o, "status",
				    json_integer(j->members[i].status));
		json_array_append_new(members, o);
	}
	for (size_t i = 0; waiters && i < j->nwaiters; i++)
		json_array_append_new(waiters, node_save(&j->waiters[i].info));
	for (size_t i = 0; survivors && i < j->nsurvivors; i++)
		json_array_append_new(survivors,
				      json_string(j->survivors[i].node_id));
	cfg = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "min_nodes",
	    (json_int_t)j->cfg.min_nodes, "max_nodes",
	    (json_int_t)j->cfg.max_nodes, "max_restarts",
	    (json_int_t)j->cfg.max_restarts, "join_timeout_ms",
	    (json_int_t)j->cfg.join_timeout_ms, "last_call_timeout_ms",
	    (json_int_t)j->cfg.last_call_timeout_ms, "heartbeat_interval_ms",
	    (json_int_t)j->cfg.heartbeat_interval_ms, "heartbeat_timeout_ms",
	    (json_int_t)j->cfg.heartbeat_timeout_ms);
	return json_pack("{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:o, "
			 "s:O}",
			 "job", j->name, "config", cfg, "state",
			 (json_int_t)j->state, "round", (json_int_t)j->round,
			 "restart_count", (json_int_t)j->restart_count,
			 "next_seq", (json_int_t)j->next_seq, "had_survivors",
			 (json_int_t)j->had_survivors, "members", members,
			 "waiters", waiters, "survivors", survivors, "failures",
			 j->failures);
}

#define GET_U64(obj, key, min, max, dst)                                       \
	do {                                                                   \
		uint64_t v_;                                                   \
		rc = jsonh_get_u64(obj, key, 1, min, max, &v_, err, err_size); \
		if (rc)                                                        \
			goto out;                                              \
		*(dst) = v_;                                                   \
	} while (0)

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

int rdzv_job_restore(struct rdzv_state *st, json_t *saved, uint64_t now_ms,
		     char *err, size_t err_size)
{
	struct rdzv_job_config cfg;
	struct job *j = NULL, *old;
	struct rdzv_kv *kv = NULL;
	json_t *cfgj, *arr, *o;
	const char *name = NULL;
	uint64_t state;
	size_t i;
	int rc;

	rc =
	    jsonh_get_str(saved, "job", 1, RDZV_NAME_MAX, &name, err, err_size);
	if (rc)
		return rc;
	if (!rdzv_name_valid(name, RDZV_NAME_MAX)) {
		snprintf(err, err_size, "invalid job name");
		return DL_EINVAL;
	}
	cfgj = json_object_get(saved, "config");
	if (!json_is_object(cfgj)) {
		snprintf(err, err_size, "job %s has no config", name);
		return DL_EINVAL;
	}
	GET_U64(cfgj, "min_nodes", 1, UINT32_MAX, &cfg.min_nodes);
	GET_U64(cfgj, "max_nodes", 1, UINT32_MAX, &cfg.max_nodes);
	GET_U64(cfgj, "max_restarts", 0, RDZV_MAX_RESTARTS, &cfg.max_restarts);
	GET_U64(cfgj, "join_timeout_ms", 1, UINT32_MAX, &cfg.join_timeout_ms);
	GET_U64(cfgj, "last_call_timeout_ms", 0, UINT32_MAX,
		&cfg.last_call_timeout_ms);
	GET_U64(cfgj, "heartbeat_interval_ms", 1, UINT32_MAX,
		&cfg.heartbeat_interval_ms);
	GET_U64(cfgj, "heartbeat_timeout_ms", 1, UINT32_MAX,
		&cfg.heartbeat_timeout_ms);
	if (cfg.max_nodes < cfg.min_nodes) {
		snprintf(err, err_size, "job %s: min_nodes above max_nodes",
			 name);
		return DL_EINVAL;
	}
	/* a job saved again keeps its KV store (journaled separately) */
	old = state_find_job(st, name);
	if (old) {
		kv = old->kv;
		old->kv = NULL;
		rdzv_job_delete(st, name);
	}
	j = state_add_job(st, name, &cfg);
	if (!j) {
		rdzv_kv_free(kv);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	if (kv) {
		rdzv_kv_free(j->kv);
		j->kv = kv;
	}
	GET_U64(saved, "state", 0, RDZV_JOB_NSTATES - 1, &state);
	j->state = (enum rdzv_job_state)state;
	GET_U64(saved, "round", 1, UINT64_MAX / 2, &j->round);
	GET_U64(saved, "restart_count", 0, RDZV_MAX_RESTARTS,
		&j->restart_count);
	GET_U64(saved, "next_seq", 0, UINT64_MAX / 2, &j->next_seq);
	GET_U64(saved, "had_survivors", 0, 1, &j->had_survivors);

	arr = json_object_get(saved, "members");
	rc = DL_EINVAL;
	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->members, &j->members_cap,
			json_array_size(arr), sizeof(j->members[0])))
		goto out;
	json_array_foreach(arr, i, o)
	{
		struct member *m = &j->members[j->nmembers];
		uint64_t status;
		memset(m, 0, sizeof(*m));
		rc = node_restore(o, &m->info, err, err_size);
		if (rc)
			goto out;
		GET_U64(o, "status", 0, RDZV_MEMBER_FAILED, &status);
		m->status = (enum rdzv_member_status)status;
		m->node_rank = (uint32_t)j->nmembers;
		m->rank_offset = j->world_size;
		/* heartbeats are not journaled: a fresh deadline for all */
		m->last_seen_ms = now_ms;
		j->world_size += m->info.nproc;
		j->nmembers++;
	}
	job_index_members(j);
	arr = json_object_get(saved, "waiters");
	rc = DL_EINVAL;
	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->waiters, &j->waiters_cap,
			json_array_size(arr), sizeof(j->waiters[0])))
		goto out;
	json_array_foreach(arr, i, o)
	{
		struct waiter *w = &j->waiters[j->nwaiters];
		memset(w, 0, sizeof(*w));
		rc = node_restore(o, &w->info, err, err_size);
		if (rc)
			goto out;
		w->seq = i + 1;
		w->last_seen_ms = now_ms;
		j->nwaiters++;
	}
	arr = json_object_get(saved, "survivors");
	rc = DL_EINVAL;
	if (!json_is_array(arr) ||
	    job_reserve((void **)&j->survivors, &j->survivors_cap,
			json_array_size(arr), sizeof(j->survivors[0])))
		goto out;
	json_array_foreach(arr, i, o)
	{
		if (!json_is_string(o) ||
		    !rdzv_name_valid(json_string_value(o), RDZV_NAME_MAX))
			goto out;
		snprintf(j->survivors[i].node_id,
			 sizeof(j->survivors[i].node_id), "%s",
			 json_string_value(o));
		j->survivors[i].last_seen_ms = now_ms;
		j->nsurvivors++;
	}
	arr = json_object_get(saved, "failures");
	if (!json_is_array(arr))
		goto out;
	json_array_foreach(arr, i, o)
	{
		if (i >= RDZV_MAX_FAILURES)
			break;
		json_array_append(j->failures, o);
	}
	if (j->next_seq < j->nwaiters)
		j->next_seq = j->nwaiters;
	j->below_min_since_ms = now_ms;
	j->min_reached = j->nwaiters >= j->cfg.min_nodes;
	j->min_reached_ms = now_ms;
	if (job_is_ended(j))
		j->ended_seq = ++st->end_seq;
	if ((j->state == RDZV_JOB_RUNNING && j->nmembers == 0) ||
	    (job_is_open(j) && j->nmembers)) {
		snprintf(err, err_size, "job %s: members do not match state %s",
			 name, rdzv_job_state_name(j->state));
		goto out;
	}
	return 0;
out:
	if (rc == 0)
		rc = DL_EINVAL;
	if (!err[0])
		snprintf(err, err_size, "job %s: malformed saved state", name);
	if (j)
		rdzv_job_delete(st, name);
	return rc;
}
