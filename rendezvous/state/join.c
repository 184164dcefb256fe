/* SPDX-License-Identifier: Apache-2.0 */
/*
 * join.c - a node's join (rdzv_join): what it asks with is validated, the
 * job is found, created on its first join or started on a new run after
 * its end, and the node waits in the open round (or a running round ends
 * to take it in); the re-check of a held join and the end of its poll.
 * The round rules it leads to are round.c's.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

/* late_for_run refuses a join of the ended job j: too soon after its end
 * for a new run (a node late for the run that ended must not start one
 * alone while its peers are gone), or reruns are off. */
static int late_for_run(const struct rdzv_state *st, struct job *j,
			uint64_t now_ms, struct rdzv_reply *reply, char *err,
			size_t err_size)
{
	uint64_t ago = now_ms > j->ended_ms ? now_ms - j->ended_ms : 0;
	job_fill_reply(j, RDZV_ACTION_STOP, reply);
	if (!st->limits.rerun_after_ms)
		return ERR(DL_EGONE,
			   "job %s has ended (%s); this server does not rerun "
			   "ended jobs: use another job id",
			   j->name, rdzv_job_state_name(j->state));
	return ERR(DL_EGONE,
		   "job %s has ended (%s) %" PRIu64
		   " ms ago: this node is late "
		   "for run %" PRIu32 "; a join from %" PRIu64 " ms after "
		   "the end starts a new run (or use another job id)",
		   j->name, rdzv_job_state_name(j->state), ago, j->run,
		   st->limits.rerun_after_ms);
}

static int config_mismatch(const struct job *j, const struct rdzv_job_config *c,
			   char *err, size_t err_size)
{
	const struct rdzv_job_config *h = &j->cfg;
	const char *field = NULL;
	if (h->min_nodes != c->min_nodes)
		field = "min_nodes";
	else if (h->max_nodes != c->max_nodes)
		field = "max_nodes";
	else if (h->max_restarts != c->max_restarts)
		field = "max_restarts";
	else if (h->join_timeout_ms != c->join_timeout_ms)
		field = "join_timeout";
	else if (h->last_call_timeout_ms != c->last_call_timeout_ms)
		field = "last_call_timeout";
	else if (h->heartbeat_interval_ms != c->heartbeat_interval_ms)
		field = "heartbeat_interval";
	else if (h->heartbeat_timeout_ms != c->heartbeat_timeout_ms)
		field = "heartbeat_timeout";
	if (!field)
		return 0;
	return ERR(DL_ECONFLICT,
		   "field '%s' disagrees with the configuration of job %s",
		   field, j->name);
}

static int check_config(const struct rdzv_state *st,
			const struct rdzv_job_config *c, char *err,
			size_t err_size)
{
	if (c->min_nodes < 1 || c->max_nodes < c->min_nodes)
		return ERR(
		    DL_EINVAL,
		    "min_nodes must be at least 1 and at most max_nodes");
	if (c->max_nodes > st->limits.max_nodes_per_job)
		return ERR(DL_ELIMIT,
			   "max_nodes is above the server's limit "
			   "of %" PRIu32 " nodes per job",
			   st->limits.max_nodes_per_job);
	if (c->max_restarts > RDZV_MAX_RESTARTS)
		return ERR(DL_EINVAL, "max_restarts is out of range");
	if (!c->heartbeat_timeout_ms || !c->heartbeat_interval_ms ||
	    !c->join_timeout_ms)
		return ERR(DL_EINVAL, "timeouts must be positive");
	return 0;
}

void job_note_replaced(struct job *j, const char *node_id,
		       const char *incarnation)
{
	struct replaced_inc *r = &j->replaced[j->nreplaced++ % REPLACED_KEPT];
	snprintf(r->node_id, sizeof(r->node_id), "%s", node_id);
	snprintf(r->incarnation, sizeof(r->incarnation), "%s", incarnation);
}

int job_replaced(const struct job *j, const char *node_id,
		 const char *incarnation, struct rdzv_reply *reply, char *err,
		 size_t err_size)
{
	uint64_t kept =
	    j->nreplaced < REPLACED_KEPT ? j->nreplaced : REPLACED_KEPT;
	for (uint64_t i = 0; i < kept; i++) {
		const struct replaced_inc *r = &j->replaced[i];
		if (strcmp(r->node_id, node_id) != 0 ||
		    strcmp(r->incarnation, incarnation) != 0)
			continue;
		job_fill_reply(j, RDZV_ACTION_STOP, reply);
		if (reply)
			reply->replaced = 1;
		return ERR(DL_ESTALE,
			   "node id %s was taken: another agent joined job %s "
			   "with it after this one (incarnation %s); give "
			   "every agent a node id of its own",
			   node_id, j->name, incarnation);
	}
	return 0;
}

static int add_waiter(struct rdzv_state *st, struct job *j,
		      const struct rdzv_node_info *node, int hold,
		      uint64_t now_ms, char *err, size_t err_size)
{
	struct waiter *w = job_find_waiter(j, node->node_id);
	if (w) {
		if (strcmp(w->info.incarnation, node->incarnation) != 0) {
			job_note_replaced(j, node->node_id,
					  w->info.incarnation);
			log_info("job=%s round=%" PRIu64
				 " event=node_restarted "
				 "node=%s",
				 j->name, j->round, node->node_id);
		}
		if (memcmp(&w->info, node, sizeof(*node)) != 0)
			job_mark(j, RDZV_CHANGED_JOB);
		w->info = *node;
	} else {
		if (j->nwaiters + j->nmembers >= st->limits.max_nodes_per_job)
			return ERR(DL_ELIMIT,
				   "too many nodes in job %s (the server's "
				   "limit is %" PRIu32 ")",
				   j->name, st->limits.max_nodes_per_job);
		if (job_reserve((void **)&j->waiters, &j->waiters_cap,
				j->nwaiters + 1, sizeof(j->waiters[0])))
			return ERR(DL_ENOMEM, "out of memory");
		w = &j->waiters[j->nwaiters++];
		memset(w, 0, sizeof(*w));
		w->info = *node;
		w->seq = ++j->next_seq;
		job_waiter_added(j);
		/* no wake-up: a new waiter alone answers no parked poll (the
		 * round closing or ending does), and waking every parked join
		 * on every join made forming an n-node round O(n^3) */
		job_mark(j, RDZV_CHANGED_JOB);
		log_info("job=%s round=%" PRIu64 " event=node_joined node=%s "
			 "addr=%s nproc=%" PRIu32 " waiting=%zu",
			 j->name, j->round, node->node_id, node->addr,
			 node->nproc, j->nwaiters);
	}
	w->last_seen_ms = now_ms;
	if (hold)
		w->polls_open++;
	return 0;
}

/* check_join validates what a node asks to join with. */
static int check_join(const struct rdzv_state *st, const char *job,
		      const struct rdzv_node_info *node,
		      const struct rdzv_job_config *cfg, char *err,
		      size_t err_size)
{
	if (!parse_name_valid(job, RDZV_NAME_MAX))
		return ERR(DL_EINVAL, "invalid job name");
	if (!parse_name_valid(node->node_id, RDZV_NAME_MAX) ||
	    !parse_name_valid(node->incarnation, RDZV_INCARNATION_MAX))
		return ERR(DL_EINVAL, "invalid node_id or incarnation");
	if (node->nproc < 1 || node->nproc > RDZV_MAX_NPROC)
		return ERR(DL_EINVAL, "nproc must be between 1 and %d",
			   RDZV_MAX_NPROC);
	return check_config(st, cfg, err, err_size);
}

/* job_to_join finds job, or creates it with cfg on the first join; a job
 * that exists must have the same configuration and not have ended, but
 * a join rerun_after_ms after its end starts a new run of it (job_new_run). */
static int job_to_join(struct rdzv_state *st, const char *job,
		       const struct rdzv_node_info *node,
		       const struct rdzv_job_config *cfg, uint64_t now_ms,
		       struct job **out, struct rdzv_reply *reply, char *err,
		       size_t err_size)
{
	struct job *j = state_find_job(st, job);
	int rc;

	if (!j) {
		rc = state_make_room(st, err, err_size);
		if (rc)
			return rc;
		j = state_add_job(st, job, cfg);
		if (!j)
			return ERR(DL_ENOMEM, "out of memory");
		j->below_min_since_ms = now_ms;
		history_open(j, now_ms, 0);
		job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
		log_info("job=%s round=1 event=job_created min_nodes=%" PRIu32
			 " max_nodes=%" PRIu32 " max_restarts=%" PRIu32,
			 job, cfg->min_nodes, cfg->max_nodes,
			 cfg->max_restarts);
	} else if (node->run && (node->run < j->run ||
				 (node->run == j->run && job_is_ended(j)))) {
		/* a node of an ended run (back from a partition, or its
		 * agent slow to hear of the end) never starts a new one */
		job_fill_reply(j, RDZV_ACTION_STOP, reply);
		return ERR(DL_EGONE,
			   "node %s took part in run %" PRIu32 " of job %s, "
			   "which has ended (the job is at run %" PRIu32
			   ", %s)",
			   node->node_id, node->run, j->name, j->run,
			   rdzv_job_state_name(j->state));
	} else if (job_is_ended(j) && st->limits.rerun_after_ms &&
		   now_ms >= j->ended_ms + st->limits.rerun_after_ms) {
		rc = job_new_run(j, cfg, now_ms, err, err_size);
		if (rc)
			return rc;
	} else {
		rc = config_mismatch(j, cfg, err, err_size);
		if (rc) {
			job_fill_reply(j, job_action_for(j, node->node_id),
				       reply);
			return rc;
		}
	}
	if (job_is_ended(j))
		return late_for_run(st, j, now_ms, reply, err, err_size);
	*out = j;
	return 0;
}

/* after_new_waiter: a node now waits in j. A running round ends to take
 * it in (scale up) unless the job is full (the node is a spare) or
 * finishing; an open round may close. */
static void after_new_waiter(struct rdzv_state *st, struct job *j,
			     const char *node_id, uint64_t now_ms)
{
	if (j->state == RDZV_JOB_RUNNING) {
		int done = 0;
		for (size_t i = 0; i < j->nmembers; i++)
			if (j->members[i].status == RDZV_MEMBER_SUCCEEDED)
				done = 1;
		if (j->nmembers < j->cfg.max_nodes && !done && !j->preempt_step)
			job_end_round(st, j, now_ms, "scale_up", node_id);
	} else {
		job_track_min(j, now_ms);
		job_try_close(st, j, now_ms);
	}
}

int rdzv_join(struct rdzv_state *st, const char *job,
	      const struct rdzv_node_info *node,
	      const struct rdzv_job_config *cfg, int hold, uint64_t now_ms,
	      struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = NULL;
	struct member *m;
	int rc;

	rc = check_join(st, job, node, cfg, err, err_size);
	if (!rc)
		rc = job_to_join(st, job, node, cfg, now_ms, &j, reply, err,
				 err_size);
	if (rc)
		return rc;
	rc = job_replaced(j, node->node_id, node->incarnation, reply, err,
			  err_size);
	if (rc)
		return rc;
	m = job_find_member(j, node->node_id);
	if (m && strcmp(m->info.incarnation, node->incarnation) == 0) {
		/* a repeated join of a member: the same answer again */
		m->last_seen_ms = now_ms;
		job_fill_reply(j, RDZV_ACTION_CONTINUE, reply);
		return RDZV_DONE;
	}
	if (m) {
		/* the node's agent restarted: its old incarnation is gone
		 * (or another agent took the id: the old one is refused
		 * from now on, so the two do not take turns) */
		job_note_replaced(j, node->node_id, m->info.incarnation);
		m->gone = 1;
		job_end_round(st, j, now_ms, "node_restarted", node->node_id);
	}
	rc = add_waiter(st, j, node, hold, now_ms, err, err_size);
	if (rc)
		return rc;
	after_new_waiter(st, j, node->node_id, now_ms);
	job_fill_reply(j, job_action_for(j, node->node_id), reply);
	return job_find_member(j, node->node_id) ? RDZV_DONE : RDZV_WAIT;
}

int rdzv_join_check(struct rdzv_state *st, const char *job, const char *node_id,
		    const char *incarnation, struct rdzv_reply *reply,
		    char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;
	struct waiter *w;
	int rc;

	if (!j)
		return ERR(DL_EGONE, "job %s no longer exists", job);
	if (job_is_ended(j)) {
		job_fill_reply(j, RDZV_ACTION_STOP, reply);
		return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
			   rdzv_job_state_name(j->state));
	}
	rc = job_replaced(j, node_id, incarnation, reply, err, err_size);
	if (rc)
		return rc;
	m = job_find_member(j, node_id);
	w = job_find_waiter(j, node_id);
	job_fill_reply(j, job_action_for(j, node_id), reply);
	if ((m && strcmp(m->info.incarnation, incarnation) != 0) ||
	    (w && strcmp(w->info.incarnation, incarnation) != 0))
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation, node_id, j->name);
	if (m && j->state == RDZV_JOB_RUNNING)
		return RDZV_DONE;
	if (w)
		return RDZV_WAIT;
	return ERR(DL_ESTALE,
		   "node %s is no longer waiting in job %s at "
		   "round %" PRIu64 " (join again)",
		   node_id, j->name, j->round);
}

void rdzv_join_poll_end(struct rdzv_state *st, const char *job,
			const char *node_id, const char *incarnation,
			uint64_t now_ms)
{
	struct job *j = state_find_job(st, job);
	struct waiter *w;
	struct member *m;
	if (!j)
		return;
	w = job_find_waiter(j, node_id);
	if (w) {
		/* counted per node: polls of an old incarnation end too */
		if (w->polls_open)
			w->polls_open--;
		if (strcmp(w->info.incarnation, incarnation) == 0)
			w->last_seen_ms = now_ms;
	}
	m = job_find_member(j, node_id);
	if (m && strcmp(m->info.incarnation, incarnation) == 0)
		m->last_seen_ms = now_ms;
}
