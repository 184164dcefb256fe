/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_json.c - the state machine's jobs as JSON views: the answers of
 * the HTTP API (join assignment, job detail, job list). The durable form
 * is state_save.c. No I/O.
 */
#include "state_int.h"

#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"

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
	    "{s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, "
	    "s:I, s:I, s:I, s:I}",
	    "job", j->name, "run", (json_int_t)j->run, "round",
	    (json_int_t)j->round, "state", rdzv_job_state_name(j->state),
	    "node_rank", (json_int_t)m->node_rank, "nnodes",
	    (json_int_t)j->nmembers, "nproc", (json_int_t)m->info.nproc,
	    "rank_offset", (json_int_t)m->rank_offset, "world_size",
	    (json_int_t)j->world_size, "master_addr", j->members[0].info.addr,
	    "master_node", j->members[0].info.node_id, "master_port",
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
		/* how its workers entered the round: null until it says */
		json_object_set_new(
		    o, "recovery",
		    m->recovery == RDZV_RECOVERY_NONE
			? json_null()
			: json_pack("{s:s, s:s}", "how",
				    rdzv_recovery_name(m->recovery), "why",
				    m->recovery_why));
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
	if (out) {
		json_object_set_new(out, "rounds", history_json(j, now_ms));
		json_object_set_new(
		    out, "heartbeat_timeout_ms",
		    json_integer((json_int_t)j->cfg.heartbeat_timeout_ms));
		json_object_set_new(
		    out, "last_change_ms_ago",
		    json_integer((json_int_t)(now_ms > j->changed_ms
						  ? now_ms - j->changed_ms
						  : 0)));
		json_object_set_new(out, "run", json_integer(j->run));
		json_object_set_new(out, "runs", json_copy(j->runs));
		if (j->preempt_step)
			json_object_set_new(
			    out, "preempt_step",
			    json_integer((json_int_t)j->preempt_step));
	}
	if (out && job_is_ended(j))
		json_object_set_new(
		    out, "ended_ms_ago",
		    json_integer((json_int_t)(now_ms > j->ended_ms
						  ? now_ms - j->ended_ms
						  : 0)));
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
