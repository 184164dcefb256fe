/* SPDX-License-Identifier: Apache-2.0 */
/*
 * round.c - the rules of a job's rounds: when the open round closes
 * (min and max nodes, survivors, the last call), who its members are and
 * in which node-rank order, how a running round ends (the survivors
 * expected back in the next) and how the job's run finishes. The events
 * that drive them are join.c's (joins) and node_events.c's (heartbeats,
 * watches, reports, leaves, evictions); deadlines.c drives the timers.
 * Each state change is logged as one structured line ("job=J round=N
 * event=E ...").
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

/* job_fill_reply: j's round, state and counts with action into reply. */
void job_fill_reply(const struct job *j, enum rdzv_action action,
		    struct rdzv_reply *reply)
{
	if (!reply)
		return;
	reply->round = j->round;
	reply->state = j->state;
	reply->restart_count = j->restart_count;
	reply->preempt_step = j->preempt_step;
	reply->action = job_is_ended(j) ? RDZV_ACTION_STOP : action;
	reply->replaced = 0;
}

/* The action for node_id right now: continue for a member of a running
 * round, stop once the job ended, restart (join again) otherwise. */
enum rdzv_action job_action_for(const struct job *j, const char *node_id)
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
	job_index_waiters(j);
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
		const struct waiter *w =
		    job_find_waiter(j, j->survivors[s].node_id);
		if (w && !picked[w - j->waiters]) {
			picked[w - j->waiters] = PICKED_SURVIVOR;
			n++;
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
	for (size_t s = 0; s < j->nsurvivors; s++) {
		const struct waiter *w =
		    job_find_waiter(j, j->survivors[s].node_id);
		if (w && picked[w - j->waiters] == PICKED_SURVIVOR)
			add_member(j, w, now_ms);
	}
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
	job_index_waiters(j);
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
	job_index_survivors(j);
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
