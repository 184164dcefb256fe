/* SPDX-License-Identifier: Apache-2.0 */
/*
 * history.c - the timeline of a job's rounds for the status page and
 * GET /v1/jobs/{job}: when each round opened, when it formed (with how
 * many nodes), when and why it ended. A fixed ring of the newest rounds
 * per job, kept in memory only: a restarted server starts the timeline
 * again at the round it recovered. No I/O, no clock: times are the
 * state machine's now_ms.
 */
#include "state_int.h"

#include <stdio.h>
#include <string.h>

#define NEVER UINT64_MAX

/* current: the record of the job's newest round, NULL before the first */
static struct round_rec *current(struct job *j)
{
	if (!j->nrounds)
		return NULL;
	return &j->rounds[(j->nrounds - 1) % ROUND_HISTORY];
}

void history_open(struct job *j, uint64_t now_ms, int recovered)
{
	struct round_rec *r = &j->rounds[j->nrounds % ROUND_HISTORY];
	memset(r, 0, sizeof(*r));
	r->round = j->round;
	r->opened_ms = now_ms;
	r->formed_ms = NEVER;
	r->ended_ms = NEVER;
	r->recovered = recovered;
	j->nrounds++;
	j->changed_ms = now_ms;
}

void history_formed(struct job *j, uint64_t now_ms)
{
	struct round_rec *r = current(j);
	if (!r || r->round != j->round)
		return;
	r->formed_ms = now_ms;
	r->nnodes = (uint32_t)j->nmembers;
	r->world_size = j->world_size;
	j->changed_ms = now_ms;
}

void history_end(struct job *j, uint64_t now_ms, const char *reason,
		 const char *node_id)
{
	struct round_rec *r = current(j);
	if (!r || r->round != j->round || r->end_reason)
		return;
	r->ended_ms = now_ms;
	r->end_reason = reason;
	snprintf(r->end_node, sizeof(r->end_node), "%s",
		 node_id ? node_id : "");
	j->changed_ms = now_ms;
}

void history_recovery(struct job *j, enum rdzv_recovery how)
{
	struct round_rec *r = current(j);
	if (r && r->round == j->round && (unsigned)how < RDZV_RECOVERY_N)
		r->entered[how]++;
}

/* ago: milliseconds from t to now_ms as JSON, null when it never was */
static json_t *ago(uint64_t t, uint64_t now_ms)
{
	if (t == NEVER)
		return json_null();
	return json_integer((json_int_t)(now_ms > t ? now_ms - t : 0));
}

json_t *history_json(const struct job *j, uint64_t now_ms)
{
	json_t *arr = json_array();
	uint64_t first =
	    j->nrounds > ROUND_HISTORY ? j->nrounds - ROUND_HISTORY : 0;
	for (uint64_t i = first; arr && i < j->nrounds; i++) {
		const struct round_rec *r = &j->rounds[i % ROUND_HISTORY];
		json_t *o = json_pack(
		    "{s:I, s:o, s:o, s:o, s:I, s:I, s:b}", "round",
		    (json_int_t)r->round, "opened_ms_ago",
		    ago(r->opened_ms, now_ms), "formed_ms_ago",
		    ago(r->formed_ms, now_ms), "ended_ms_ago",
		    ago(r->ended_ms, now_ms), "nnodes", (json_int_t)r->nnodes,
		    "world_size", (json_int_t)r->world_size, "recovered",
		    r->recovered);
		if (!o) {
			json_decref(arr);
			return NULL;
		}
		json_object_set_new(o, "end_reason",
				    r->end_reason ? json_string(r->end_reason)
						  : json_null());
		json_object_set_new(o, "end_node",
				    r->end_node[0] ? json_string(r->end_node)
						   : json_null());
		/* how its members entered it, as far as they said */
		json_object_set_new(
		    o, "entered",
		    json_pack("{s:I, s:I, s:I}", "started",
			      (json_int_t)r->entered[RDZV_RECOVERY_STARTED],
			      "in_place",
			      (json_int_t)r->entered[RDZV_RECOVERY_IN_PLACE],
			      "restarted",
			      (json_int_t)r->entered[RDZV_RECOVERY_RESTARTED]));
		json_array_append_new(arr, o);
	}
	return arr;
}
