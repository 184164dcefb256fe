/* SPDX-License-Identifier: Apache-2.0 */
/*
 * round.c - the rules of the rendezvous: the events of a node (join,
 * heartbeat, watch, report, leave) and what they decide for the job's
 * rounds, membership, ranks, restarts and completion. Each state change is
 * logged as one structured line ("job=J round=N event=E ...").
 *
 * A job's round is either open (WAITING for the first round, RESTARTING
 * after one ended: nodes join) or closed (RUNNING: members with node ranks).
 * Ending a round opens the next one at once (round + 1); the members that
 * did not fail, leave or die become survivors, expected back, and keep
 * their relative order in the next round.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define ERR(code, ...) (snprintf(err, err_size, __VA_ARGS__), (code))

static void fill_reply(const struct job *j, enum rdzv_action action,
		       struct rdzv_reply *reply)
{
	if (!reply)
		return;
	reply->round = j->round;
	reply->state = j->state;
	reply->restart_count = j->restart_count;
	reply->preempt_step = j->preempt_step;
	reply->action = job_is_ended(j) ? RDZV_ACTION_STOP : action;
}

/* The action for node_id right now: continue for a member of a running
 * round, stop once the job ended, restart (join again) otherwise. */
static enum rdzv_action action_for(const struct job *j, const char *node_id)
{
	if (job_is_ended(j))
		return RDZV_ACTION_STOP;
	if (node_id && j->state == RDZV_JOB_RUNNING &&
	    job_find_member(j, node_id))
		return RDZV_ACTION_CONTINUE;
	return RDZV_ACTION_RESTART;
}

/* track_min keeps the open round's clocks: when min_nodes were reached
 * (the last call runs from there) and since when the round has been short
 * of them (the join timeout runs from there). */
void job_track_min(struct job *j, uint64_t now_ms)
{
	int enough = j->nwaiters >= j->cfg.min_nodes;
	if (enough && !j->min_reached) {
		j->min_reached = 1;
		j->min_reached_ms = now_ms;
	} else if (!enough && j->min_reached) {
		j->min_reached = 0;
		j->below_min_since_ms = now_ms;
	}
}

void job_finish(struct rdzv_state *st, struct job *j, enum rdzv_job_state state,
		const char *reason, uint64_t now_ms)
{
	history_end(j, now_ms, reason, NULL);
	j->state = state;
	j->nwaiters = 0;
	j->nsurvivors = 0;
	j->ended_seq = ++st->end_seq;
	j->ended_ms = now_ms;
	job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	log_info("job=%s run=%" PRIu32 " round=%" PRIu64 " event=job_%s "
		 "reason=%s restart_count=%" PRIu32,
		 j->name, j->run, j->round,
		 state == RDZV_JOB_SUCCEEDED   ? "succeeded"
		 : state == RDZV_JOB_PREEMPTED ? "preempted"
					       : "failed",
		 reason, j->restart_count);
}

/* late_for_run refuses a join of the ended job j: too soon after its end
 * for a new run (a node late for the run that ended must not start one
 * alone while its peers are gone), or reruns are off. */
static int late_for_run(const struct rdzv_state *st, struct job *j,
			uint64_t now_ms, struct rdzv_reply *reply, char *err,
			size_t err_size)
{
	uint64_t ago = now_ms > j->ended_ms ? now_ms - j->ended_ms : 0;
	fill_reply(j, RDZV_ACTION_STOP, reply);
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

/* PICKED_*: what close_round decided for each waiter. */
#define PICKED_SURVIVOR 1
#define PICKED_NEW	2

/* pick_members marks in picked which waiters join the closing round: the
 * survivors of the previous round first, then new nodes in join order, at
 * most take of them. */
static void pick_members(const struct job *j, unsigned char *picked,
			 size_t take)
{
	size_t n = 0;
	for (size_t s = 0; s < j->nsurvivors && n < take; s++) {
		for (size_t w = 0; w < j->nwaiters; w++) {
			if (!picked[w] &&
			    strcmp(j->waiters[w].info.node_id,
				   j->survivors[s].node_id) == 0) {
				picked[w] = PICKED_SURVIVOR;
				n++;
				break;
			}
		}
	}
	for (size_t w = 0; w < j->nwaiters && n < take; w++) {
		if (!picked[w]) {
			picked[w] = PICKED_NEW;
			n++;
		}
	}
}

/* add_member appends waiter w as the next node rank, its ranks following
 * those of the members before it. */
static void add_member(struct job *j, const struct waiter *w, uint64_t now_ms)
{
	struct member *m = &j->members[j->nmembers];
	memset(m, 0, sizeof(*m));
	m->info = w->info;
	m->node_rank = (uint32_t)j->nmembers;
	m->rank_offset = j->world_size;
	m->status = RDZV_MEMBER_RUNNING;
	m->last_seen_ms = now_ms;
	j->world_size += m->info.nproc;
	j->nmembers++;
}

/* place_members makes the picked waiters members in node-rank order:
 * survivors in survivor order, then new nodes in join order. */
static void place_members(struct job *j, const unsigned char *picked,
			  uint64_t now_ms)
{
	j->nmembers = 0;
	j->world_size = 0;
	for (size_t s = 0; s < j->nsurvivors; s++)
		for (size_t w = 0; w < j->nwaiters; w++)
			if (picked[w] == PICKED_SURVIVOR &&
			    strcmp(j->waiters[w].info.node_id,
				   j->survivors[s].node_id) == 0)
				add_member(j, &j->waiters[w], now_ms);
	for (size_t w = 0; w < j->nwaiters; w++)
		if (picked[w] == PICKED_NEW)
			add_member(j, &j->waiters[w], now_ms);
}

/* close_round turns the open round's waiters into members (pick_members,
 * place_members), at most max_nodes; the rest stay as spares. */
static int close_round(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	size_t take =
	    j->nwaiters < j->cfg.max_nodes ? j->nwaiters : j->cfg.max_nodes;
	size_t kept = 0;
	unsigned char *picked = calloc(j->nwaiters ? j->nwaiters : 1, 1);

	if (!picked || job_reserve((void **)&j->members, &j->members_cap, take,
				   sizeof(j->members[0]))) {
		free(picked);
		return DL_ENOMEM;
	}
	pick_members(j, picked, take);
	place_members(j, picked, now_ms);
	job_master_reachable(j);
	for (size_t w = 0; w < j->nwaiters; w++)
		if (!picked[w])
			j->waiters[kept++] = j->waiters[w];
	j->nwaiters = kept;
	free(picked);
	j->nsurvivors = 0;
	j->had_survivors = 0;
	j->state = RDZV_JOB_RUNNING;
	job_index_members(j);
	history_formed(j, now_ms);
	st->counters.rounds_total++;
	job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	log_info("job=%s round=%" PRIu64 " event=round_closed nnodes=%zu "
		 "world_size=%" PRIu64 " master=%s:%u spares=%zu",
		 j->name, j->round, j->nmembers, j->world_size,
		 j->members[0].info.addr, job_master_port(j), j->nwaiters);
	return 0;
}

/* try_close closes the open round when it is complete: min_nodes are there
 * and either every survivor of the previous round is back (or max_nodes
 * joined in a first round), or the last call has passed. */
void job_try_close(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	int all_back = 1;
	if (!job_is_open(j) || j->nwaiters < j->cfg.min_nodes ||
	    j->nwaiters == 0)
		return;
	for (size_t s = 0; s < j->nsurvivors; s++)
		if (!job_find_waiter(j, j->survivors[s].node_id))
			all_back = 0;
	if (all_back && (j->had_survivors || j->nwaiters >= j->cfg.max_nodes)) {
		close_round(st, j, now_ms);
		return;
	}
	if (j->min_reached &&
	    now_ms >= j->min_reached_ms + j->cfg.last_call_timeout_ms)
		close_round(st, j, now_ms);
}

/* end_round ends the running round: the members not marked gone survive;
 * round + 1 opens at once. */
void job_end_round(struct rdzv_state *st, struct job *j, uint64_t now_ms,
		   const char *reason, const char *node_id)
{
	size_t ns = 0;
	/* a preempted job has no next round: its ranks stop at one step */
	if (job_preempt_end(st, j, reason, now_ms))
		return;
	if (job_reserve((void **)&j->survivors, &j->survivors_cap, j->nmembers,
			sizeof(j->survivors[0])) == 0) {
		for (size_t i = 0; i < j->nmembers; i++) {
			if (j->members[i].gone)
				continue;
			memcpy(j->survivors[ns].node_id,
			       j->members[i].info.node_id,
			       sizeof(j->survivors[0].node_id));
			j->survivors[ns].last_seen_ms =
			    j->members[i].last_seen_ms;
			ns++;
		}
	}
	log_info("job=%s round=%" PRIu64 " event=round_ended reason=%s "
		 "node=%s survivors=%zu restart_count=%" PRIu32,
		 j->name, j->round, reason, node_id ? node_id : "-", ns,
		 j->restart_count);
	history_end(j, now_ms, reason, node_id);
	j->nsurvivors = ns;
	j->had_survivors = ns > 0;
	j->nmembers = 0;
	j->world_size = 0;
	j->round++;
	history_open(j, now_ms, 0);
	j->state = RDZV_JOB_RESTARTING;
	j->min_reached = 0;
	j->below_min_since_ms = now_ms;
	job_track_min(j, now_ms);
	job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	job_try_close(st, j, now_ms);
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

static int add_waiter(struct rdzv_state *st, struct job *j,
		      const struct rdzv_node_info *node, int hold,
		      uint64_t now_ms, char *err, size_t err_size)
{
	struct waiter *w = job_find_waiter(j, node->node_id);
	if (w) {
		if (strcmp(w->info.incarnation, node->incarnation) != 0)
			log_info("job=%s round=%" PRIu64
				 " event=node_restarted "
				 "node=%s",
				 j->name, j->round, node->node_id);
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
		fill_reply(j, RDZV_ACTION_STOP, reply);
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
			fill_reply(j, action_for(j, node->node_id), reply);
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
	m = job_find_member(j, node->node_id);
	if (m && strcmp(m->info.incarnation, node->incarnation) == 0) {
		/* a repeated join of a member: the same answer again */
		m->last_seen_ms = now_ms;
		fill_reply(j, RDZV_ACTION_CONTINUE, reply);
		return RDZV_DONE;
	}
	if (m) {
		/* the node's agent restarted: its old incarnation is gone */
		m->gone = 1;
		job_end_round(st, j, now_ms, "node_restarted", node->node_id);
	}
	rc = add_waiter(st, j, node, hold, now_ms, err, err_size);
	if (rc)
		return rc;
	after_new_waiter(st, j, node->node_id, now_ms);
	fill_reply(j, action_for(j, node->node_id), reply);
	return job_find_member(j, node->node_id) ? RDZV_DONE : RDZV_WAIT;
}

int rdzv_join_check(struct rdzv_state *st, const char *job, const char *node_id,
		    const char *incarnation, struct rdzv_reply *reply,
		    char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m;
	struct waiter *w;

	if (!j)
		return ERR(DL_EGONE, "job %s no longer exists", job);
	if (job_is_ended(j)) {
		fill_reply(j, RDZV_ACTION_STOP, reply);
		return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
			   rdzv_job_state_name(j->state));
	}
	m = job_find_member(j, node_id);
	w = job_find_waiter(j, node_id);
	fill_reply(j, action_for(j, node_id), reply);
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

/* fence checks that node_id (incarnation) is a member of job j's running
 * round; otherwise it fills reply and returns DL_ESTALE. */
static int fence(struct job *j, const char *node_id, const char *incarnation,
		 uint64_t round, struct member **out, struct rdzv_reply *reply,
		 char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	fill_reply(j, RDZV_ACTION_RESTART, reply);
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
	fill_reply(j, RDZV_ACTION_CONTINUE, reply);
	return 0;
}

/* ended answers a request to an ended job: 200 stop for a member of the
 * last round, 410 for anyone else. */
static int ended(struct job *j, const char *node_id, const char *incarnation,
		 struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct member *m = job_find_member(j, node_id);
	fill_reply(j, RDZV_ACTION_STOP, reply);
	if (m && strcmp(m->info.incarnation, incarnation) == 0)
		return 0;
	return ERR(DL_EGONE, "job %s has ended (%s)", j->name,
		   rdzv_job_state_name(j->state));
}

int rdzv_heartbeat(struct rdzv_state *st, const char *job, const char *node_id,
		   const char *incarnation, uint64_t round, uint64_t now_ms,
		   struct rdzv_reply *reply, char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct member *m = NULL;
	int rc;

	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	st->counters.heartbeats_total++;
	if (job_is_ended(j))
		return ended(j, node_id, incarnation, reply, err, err_size);
	rc = fence(j, node_id, incarnation, round, &m, reply, err, err_size);
	if (rc)
		return rc;
	m->last_seen_ms = now_ms;
	return 0;
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
	fill_reply(j,
		   node_id	       ? action_for(j, node_id)
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
	if (job_is_ended(j))
		return ended(j, node_id, incarnation, reply, err, err_size);
	rc = fence(j, node_id, incarnation, round, &m, reply, err, err_size);
	if (rc)
		return rc;
	m->last_seen_ms = now_ms;
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
		fill_reply(j, RDZV_ACTION_CONTINUE, reply);
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
	fill_reply(j, action_for(j, node_id), reply);
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
	fill_reply(j, RDZV_ACTION_STOP, reply);
	rc = drop_node(st, j, node_id, incarnation, "leave", now_ms, err,
		       err_size);
	fill_reply(j, RDZV_ACTION_STOP, reply);
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
