/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runs.c - the runs of one job id: a job id whose run has ended can be
 * run again (rdzv_limits.rerun_after_ms, docs/http-api.md "Ended jobs");
 * the new run starts afresh and what is kept of the ended ones is a short
 * summary each, for status.
 */
#include "state_int.h"

#include <inttypes.h>
#include <stdio.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

json_t *job_run_summary(const struct job *j)
{
	return json_pack("{s:I, s:s, s:I, s:I, s:O}", "run", (json_int_t)j->run,
			 "state", rdzv_job_state_name(j->state), "round",
			 (json_int_t)j->round, "restart_count",
			 (json_int_t)j->restart_count, "failures", j->failures);
}

int job_new_run(struct job *j, const struct rdzv_job_config *cfg,
		uint64_t now_ms, char *err, size_t err_size)
{
	json_t *summary = job_run_summary(j);
	json_t *failures = json_array();
	struct rdzv_kv *kv = rdzv_kv_new();
	int rc = !summary || !failures || !kv;
	if (rc)
		json_decref(summary);
	/* json_array_append_new takes summary, even when it fails */
	else
		rc = json_array_append_new(j->runs, summary) != 0;
	if (rc) {
		json_decref(failures);
		rdzv_kv_free(kv);
		return ERR(DL_ENOMEM, "out of memory");
	}
	while (json_array_size(j->runs) > RDZV_RUNS_KEPT)
		json_array_remove(j->runs, 0);
	log_info("job=%s run=%" PRIu32 " round=%" PRIu64 " event=run_started "
		 "previous=%s ended_ms_ago=%" PRIu64,
		 j->name, j->run + 1, j->round + 1,
		 rdzv_job_state_name(j->state), now_ms - j->ended_ms);
	json_decref(j->failures);
	j->failures = failures;
	rdzv_kv_free(j->kv);
	j->kv = kv;
	job_hangs_free(j); /* the ended run's hang reports go with it */
	j->cfg = *cfg;
	j->run++;
	j->round++;
	j->state = RDZV_JOB_WAITING;
	j->restart_count = 0;
	j->preempt_step = 0;
	j->world_size = 0;
	j->nmembers = 0;
	job_index_members(j);
	j->nwaiters = 0;
	job_index_waiters(j);
	j->nsurvivors = 0;
	j->had_survivors = 0;
	j->min_reached = 0;
	j->below_min_since_ms = now_ms;
	j->ended_seq = 0;
	j->ended_ms = 0;
	history_open(j, now_ms, 0); /* the new run's first round, timed */
	job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	return 0;
}
