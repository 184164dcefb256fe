/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node_events.c - the events of a job's nodes once they joined: heartbeat,
 * watch, report (success or failures), leave, eviction (the etcd
 * leader's: a lease that expired) and the word of how a member's workers
 * entered the round (recovery). Each is fenced by node id, incarnation
 * and round; what it decides for the round is round.c's.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

/* fence checks that node_id (incarnation) is a member of job j's running
 * round; otherwise it fills reply and returns DL_ESTALE. */
static int fence(struct job *j, const char *node_id, const char *incarnation,
		 uint64_t round, struct member **out, struct rdzv_reply *reply,
		 char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	int rc = job_replaced(j, node_id, incarnation, reply, err, err_size);
	if (rc)
		return rc;
	job_fill_reply(j, RDZV_ACTION_RESTART, reply);
	if (m && strcmp(m->info.incarnation, incarnation) != 0)
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (round != j->round)
		return ERR(DL_ESTALE,
			   "stale round %" PRIu64
			   " (job %s is at round %" PRIu64 ")",
			   round, j->name, j->round);
	if (!m || j->state != RDZV_JOB_RUNNING)
		return ERR(DL_ESTALE,
			   "node %s is not a member of round %" PRIu64
			   " of job %s",
			   node_id, j->round, j->name);
	*out = m;
	job_fill_reply(j, RDZV_ACTION_CONTINUE, reply);
	return 0;
}

/* ended answers a request to an ended job: 200 stop for a member of the
 * last round, 410 for anyone else. */
static int ended(struct job *j, const char *node_id, const char *incarnation,
		 struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	job_fill_reply(j, RDZV_ACTION_STOP, reply);
	if (m && strcmp(m->info.incarnation, incarnation) == 0)
		return 0;
	return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
		   rdzv_job_state_name(j->state));
}

/* heard_member: node_id (incarnation) speaks of round of job j at now_ms.
 * Once j ended, the answer is ended()'s and *out is NULL; otherwise the
 * node must be a member of the running round (fence), which is then
 * heard (*out, its last_seen_ms now_ms). */
static int heard_member(struct job *j, const char *node_id,
			const char *incarnation, uint64_t round,
			uint64_t now_ms, struct member **out,
			struct rdzv_reply *reply, char *err, size_t err_size)
{
	int rc;
	*out = NULL;
	if (job_is_ended(j))
		return ended(j, node_id, incarnation, reply, err, err_size);
	rc = fence(j, node_id, incarnation, round, out, reply, err, err_size);
	if (rc)
		return rc;
	(*out)->last_seen_ms = now_ms;
	return 0;
}

int rdzv_heartbeat(struct rdzv_state *st, const char *job, const char *node_id,
		   const char *incarnation, uint64_t round, uint64_t now_ms,
		   struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	st->counters.heartbeats_total++;
	return heard_member(j, node_id, incarnation, round, now_ms, &m, reply,
			    err, err_size);
}

static const char *const recovery_names[RDZV_RECOVERY_N] = {
    [RDZV_RECOVERY_NONE] = "",
    [RDZV_RECOVERY_STARTED] = "started",
    [RDZV_RECOVERY_IN_PLACE] = "in_place",
    [RDZV_RECOVERY_RESTARTED] = "restarted",
};

const char *rdzv_recovery_name(enum rdzv_recovery r)
{
	return (unsigned)r < RDZV_RECOVERY_N ? recovery_names[r] : "";
}

int rdzv_recovery_parse(const char *s, enum rdzv_recovery *out)
{
	for (int i = RDZV_RECOVERY_STARTED; i < RDZV_RECOVERY_N; i++)
		if (strcmp(s, recovery_names[i]) == 0) {
			*out = (enum rdzv_recovery)i;
			return 0;
		}
	return DL_EINVAL;
}

int rdzv_member_recovery(struct rdzv_state *st, const char *job,
			 const char *node_id, const char *incarnation,
			 uint64_t round, enum rdzv_recovery how,
			 const char *why, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m = NULL;
	struct rdzv_reply reply;
	int rc;
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (job_is_ended(j) || (unsigned)how >= RDZV_RECOVERY_N ||
	    how == RDZV_RECOVERY_NONE)
		return 0;
	rc = fence(j, node_id, incarnation, round, &m, &reply, err, err_size);
	if (rc)
		return rc;
	/* once per member and round: the first word counts */
	if (m->recovery == RDZV_RECOVERY_NONE) {
		st->counters.recoveries_total[how]++;
		history_recovery(j, how);
	}
	m->recovery = how;
	/* agents repeat it with every heartbeat of the round */
	if (strcmp(m->recovery_why, why ? why : "") != 0)
		snprintf(m->recovery_why, sizeof(m->recovery_why), "%s",
			 why ? why : "");
	return 0;
}

int rdzv_watch(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t round, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (node_id) {
		struct member *m = job_find_member(j, node_id);
		struct waiter *w = job_find_waiter(j, node_id);
		struct survivor *s = job_find_survivor(j, node_id);
		if (m && (!incarnation ||
			  strcmp(m->info.incarnation, incarnation) == 0))
			m->last_seen_ms = now_ms;
		if (w && (!incarnation ||
			  strcmp(w->info.incarnation, incarnation) == 0))
			w->last_seen_ms = now_ms;
		/* a survivor still watching is alive: it has the heartbeat
		 * timeout from now to rejoin (the etcd leader refreshes each
		 * node with a live key so, at the tick that would drop it) */
		if (s)
			s->last_seen_ms = now_ms;
	}
	/* an anonymous watcher (a dashboard, a script) is told whether the
	 * round it named is still the job's: continue, or restart */
	job_fill_reply(j,
		       node_id		   ? job_action_for(j, node_id)
		       : j->round == round ? RDZV_ACTION_CONTINUE
					   : RDZV_ACTION_RESTART,
		       reply);
	if (job_is_ended(j) || j->round != round)
		return RDZV_DONE;
	/* a node is woken once for a preemption; it watches no more */
	if (node_id && j->preempt_step)
		return RDZV_DONE;
	return RDZV_WAIT;
}

static void add_failures(struct job *j, const char *node_id, json_t *failures)
{
	size_t i;
	json_t *f;
	if (!json_is_array(failures))
		return;
	json_array_foreach(failures, i, f)
	{
		json_t *copy;
		if (json_array_size(j->failures) >= RDZV_MAX_FAILURES)
			return;
		if (!json_is_object(f))
			continue;
		copy = json_deep_copy(f);
		if (!copy)
			return;
		json_object_set_new(copy, "round",
				    json_integer((json_int_t)j->round));
		json_object_set_new(copy, "node_id", json_string(node_id));
		json_array_append_new(j->failures, copy);
	}
}

int rdzv_report(struct rdzv_state *st, const char *job, const char *node_id,
		const char *incarnation, uint64_t round, int succeeded,
		json_t *failures, uint64_t now_ms, struct rdzv_reply *reply,
		char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m = NULL;
	int rc;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	rc = heard_member(j, node_id, incarnation, round, now_ms, &m, reply,
			  err, err_size);
	if (rc || !m)
		return rc;
	if (succeeded) {
		size_t done = 0;
		if (m->status != RDZV_MEMBER_SUCCEEDED) {
			m->status = RDZV_MEMBER_SUCCEEDED;
			job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			log_info("job=%s round=%" PRIu64
				 " event=node_succeeded "
				 "node=%s",
				 j->name, j->round, node_id);
		}
		for (size_t i = 0; i < j->nmembers; i++)
			done += j->members[i].status == RDZV_MEMBER_SUCCEEDED;
		if (done == j->nmembers && j->preempt_step)
			job_finish(st, j, RDZV_JOB_PREEMPTED, "all_stopped",
				   now_ms);
		else if (done == j->nmembers)
			job_finish(st, j, RDZV_JOB_SUCCEEDED, "all_succeeded",
				   now_ms);
		job_fill_reply(j, RDZV_ACTION_CONTINUE, reply);
		return 0;
	}
	m->status = RDZV_MEMBER_FAILED;
	add_failures(j, node_id, failures);
	log_info("job=%s round=%" PRIu64 " event=node_failed node=%s "
		 "failures=%zu",
		 j->name, j->round, node_id,
		 json_is_array(failures) ? json_array_size(failures) : 0);
	if (j->restart_count >= j->cfg.max_restarts) {
		job_finish(st, j, RDZV_JOB_FAILED, "restart_budget_exhausted",
			   now_ms);
	} else {
		j->restart_count++;
		st->counters.restarts_total++;
		job_end_round(st, j, now_ms, "failure", node_id);
	}
	job_fill_reply(j, job_action_for(j, node_id), reply);
	return 0;
}

/* drop_node takes node_id out of j (a member of the running round ends
 * it with reason; a waiter or survivor is forgotten). Unknown nodes and
 * ended jobs are fine; DL_ESTALE when the node is known with another
 * incarnation. */
static int drop_node(struct rdzv_state *st, struct job *j, const char *node_id,
		     const char *incarnation, const char *reason,
		     uint64_t now_ms, char *err, size_t err_size)
{
	struct member *m;
	struct waiter *w;
	struct survivor *s;

	if (job_is_ended(j))
		return 0;
	m = job_find_member(j, node_id);
	w = job_find_waiter(j, node_id);
	if ((m && strcmp(m->info.incarnation, incarnation) != 0) ||
	    (w && strcmp(w->info.incarnation, incarnation) != 0))
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (m && m->status != RDZV_MEMBER_SUCCEEDED &&
	    j->state == RDZV_JOB_RUNNING) {
		m->gone = 1;
		job_end_round(st, j, now_ms, reason, node_id);
	}
	if (w) {
		size_t at = (size_t)(w - j->waiters);
		memmove(w, w + 1, (j->nwaiters - at - 1) * sizeof(*w));
		j->nwaiters--;
		job_index_waiters(j);
		job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
		log_info("job=%s round=%" PRIu64 " event=node_left node=%s "
			 "reason=%s waiting=%zu",
			 j->name, j->round, node_id, reason, j->nwaiters);
	}
	s = job_find_survivor(j, node_id);
	if (s) {
		size_t at = (size_t)(s - j->survivors);
		memmove(s, s + 1, (j->nsurvivors - at - 1) * sizeof(*s));
		j->nsurvivors--;
		job_index_survivors(j);
		job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	}
	if (job_is_open(j)) {
		job_track_min(j, now_ms);
		job_try_close(st, j, now_ms);
	}
	return 0;
}

int rdzv_leave(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, uint64_t now_ms,
	       struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	int rc;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	job_fill_reply(j, RDZV_ACTION_STOP, reply);
	rc = drop_node(st, j, node_id, incarnation, "leave", now_ms, err,
		       err_size);
	job_fill_reply(j, RDZV_ACTION_STOP, reply);
	return rc;
}

int rdzv_evict(struct rdzv_state *st, const char *job, const char *node_id,
	       const char *incarnation, const char *reason, uint64_t now_ms,
	       char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	m = job_find_member(j, node_id);
	if (m && !job_is_ended(j) && j->state == RDZV_JOB_RUNNING &&
	    m->status != RDZV_MEMBER_SUCCEEDED &&
	    strcmp(m->info.incarnation, incarnation) == 0) {
		st->counters.evictions_total++;
		log_info("job=%s round=%" PRIu64 " event=node_evicted node=%s "
			 "reason=%s",
			 j->name, j->round, node_id, reason);
	}
	return drop_node(st, j, node_id, incarnation, reason, now_ms, err,
			 err_size);
}
