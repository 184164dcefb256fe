/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_record.c - the end time in an etcd job record (etcd_record.h).
 */
#include "etcd_record.h"

#include "dlaunch/clock.h"
#include "dlaunch/jsonh.h"

#define ENDED_KEY "ended_unix_ms"

static int saved_ended(json_t *saved)
{
	json_t *s = json_object_get(saved, "state");
	json_int_t v = json_is_integer(s) ? json_integer_value(s) : -1;
	return v == RDZV_JOB_SUCCEEDED || v == RDZV_JOB_FAILED;
}

void etcd_record_stamp(json_t *saved, uint64_t *ended_wall_ms)
{
	if (!saved_ended(saved)) {
		*ended_wall_ms = 0;
		return;
	}
	if (!*ended_wall_ms)
		*ended_wall_ms = clock_wall_ms();
	json_object_set_new(saved, ENDED_KEY,
			    json_integer((json_int_t)*ended_wall_ms));
}

void etcd_record_restored(struct rdzv_state *st, const char *job, json_t *saved,
			  uint64_t now_ms, uint64_t *ended_wall_ms)
{
	uint64_t at = 0, wall = clock_wall_ms();
	*ended_wall_ms = 0;
	if (!saved_ended(saved))
		return;
	if (jsonh_get_u64(saved, ENDED_KEY, 0, 1, UINT64_MAX / 2, &at, NULL,
			  0) != 0 ||
	    !at)
		at = 1; /* not kept: long ago */
	*ended_wall_ms = at;
	rdzv_job_ended_ago(st, job, wall > at ? wall - at : 0, now_ms);
}
