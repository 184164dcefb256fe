/* SPDX-License-Identifier: Apache-2.0 */
/*
 * deadlines.c - the timer side of the rendezvous state machine: evicting
 * members whose heartbeats stopped, dropping waiters that stopped polling
 * and survivors that did not come back, the last call and the join
 * timeout; and the next time any of them is due, for the host's timer.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

static void tick_running(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	const char *first = NULL;
	size_t dead = 0;
	for (size_t i = 0; i < j->nmembers; i++) {
		struct member *m = &j->members[i];
		if (m->status == RDZV_MEMBER_SUCCEEDED ||
		    now_ms < m->last_seen_ms + j->cfg.heartbeat_timeout_ms)
			continue;
		m->gone = 1;
		dead++;
		if (!first)
			first = m->info.node_id;
		st->counters.evictions_total++;
		log_info("job=%s round=%" PRIu64 " event=node_evicted node=%s "
			 "silent_ms=%" PRIu64,
			 j->name, j->round, m->info.node_id,
			 now_ms - m->last_seen_ms);
	}
	if (dead) {
		char node[RDZV_NAME_MAX + 1];
		snprintf(node, sizeof(node), "%s", first);
		job_end_round(st, j, now_ms, "heartbeat_timeout", node);
	}
}

static void tick_open(struct rdzv_state *st, struct job *j, uint64_t now_ms)
{
	size_t kept = 0;
	uint64_t hbt = j->cfg.heartbeat_timeout_ms;
	for (size_t i = 0; i < j->nwaiters; i++) {
		struct waiter *w = &j->waiters[i];
		if (w->polls_open == 0 && now_ms >= w->last_seen_ms + hbt) {
			log_info("job=%s round=%" PRIu64 " event=node_dropped "
				 "node=%s reason=not_polling",
				 j->name, j->round, w->info.node_id);
			job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			continue;
		}
		j->waiters[kept++] = *w;
	}
	if (kept != j->nwaiters) {
		j->nwaiters = kept;
		job_index_waiters(j);
	}
	kept = 0;
	for (size_t i = 0; i < j->nsurvivors; i++) {
		struct survivor *s = &j->survivors[i];
		if (!job_find_waiter(j, s->node_id) &&
		    now_ms >= s->last_seen_ms + hbt) {
			log_info("job=%s round=%" PRIu64 " event=node_dropped "
				 "node=%s reason=did_not_rejoin",
				 j->name, j->round, s->node_id);
			job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
			continue;
		}
		j->survivors[kept++] = *s;
	}
	if (kept != j->nsurvivors) {
		j->nsurvivors = kept;
		job_index_survivors(j);
	}
	job_track_min(j, now_ms);
	if (!j->min_reached &&
	    now_ms >= j->below_min_since_ms + j->cfg.join_timeout_ms) {
		job_finish(st, j, RDZV_JOB_FAILED, "join_timeout", now_ms);
		return;
	}
	job_try_close(st, j, now_ms);
}

void rdzv_state_tick(struct rdzv_state *st, uint64_t now_ms)
{
	for (size_t i = 0; i < st->njobs; i++) {
		struct job *j = st->jobs[i];
		if (j->state == RDZV_JOB_RUNNING)
			tick_running(st, j, now_ms);
		if (job_is_open(j))
			tick_open(st, j, now_ms);
	}
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t rdzv_state_next_deadline(const struct rdzv_state *st)
{
	uint64_t next = UINT64_MAX;
	for (size_t i = 0; i < st->njobs; i++) {
		const struct job *j = st->jobs[i];
		uint64_t hbt = j->cfg.heartbeat_timeout_ms;
		if (j->state == RDZV_JOB_RUNNING) {
			for (size_t k = 0; k < j->nmembers; k++)
				if (j->members[k].status !=
				    RDZV_MEMBER_SUCCEEDED)
					next = min_u64(
					    next,
					    j->members[k].last_seen_ms + hbt);
		}
		if (!job_is_open(j))
			continue;
		for (size_t k = 0; k < j->nwaiters; k++)
			if (!j->waiters[k].polls_open)
				next = min_u64(
				    next, j->waiters[k].last_seen_ms + hbt);
		/* a survivor that rejoined waits like any joiner */
		for (size_t k = 0; k < j->nsurvivors; k++)
			if (!job_find_waiter(j, j->survivors[k].node_id))
				next = min_u64(
				    next, j->survivors[k].last_seen_ms + hbt);
		if (j->min_reached)
			next = min_u64(next, j->min_reached_ms +
						 j->cfg.last_call_timeout_ms);
		else
			next = min_u64(next, j->below_min_since_ms +
						 j->cfg.join_timeout_ms);
	}
	return next;
}
