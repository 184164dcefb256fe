/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt.c - a preemption of a job: one stop step for every rank.
 *
 * A member whose agent got SIGTERM (Slurm preemption, scancel --signal,
 * Kubernetes deleting a pod) and whose workers can stop at a step asks
 * for a preemption with its workers' latest step and step rate. The
 * first ask of a run picks the stop step (rdzv_preempt_pick_step) and
 * keeps it on the job; every answer to a member (heartbeat, watch,
 * report) carries it from then on, so every agent tells its workers the
 * same step whichever of them was signalled. The job then ends
 * PREEMPTED once every member reported success (round.c), and FAILED
 * when a member fails or is lost meanwhile (job_preempt_end): a new
 * round could not stop every rank at the step.
 */
#include "state_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"

uint64_t rdzv_preempt_pick_step(uint64_t step, double step_rate,
				uint64_t heartbeat_interval_ms)
{
	double latency_s =
	    (double)(RDZV_PREEMPT_LATENCY_MS + 2 * heartbeat_interval_ms) /
	    1000.0;
	double ahead = ceil(step_rate * latency_s);
	uint64_t margin;
	if (!(step_rate > 0) || !isfinite(step_rate))
		ahead = 0;
	if (ahead > RDZV_PREEMPT_RATE_MAX * 3600)
		ahead = RDZV_PREEMPT_RATE_MAX * 3600;
	margin = (uint64_t)ahead;
	if (margin < 2)
		margin = 2;
	/* a peer may be one step ahead of the announcer, and a worker
	 * that hears the decision mid-step completes that step first */
	return step + 2 + margin;
}

int rdzv_preempt(struct rdzv_state *st, const char *job, const char *node_id,
		 const char *incarnation, uint64_t round, uint64_t step,
		 double step_rate, uint64_t now_ms, struct rdzv_reply *reply,
		 char *err, size_t err_size)
{
	struct job *j;
	int rc;

	if (!isfinite(step_rate) || step_rate < 0 ||
	    step_rate > RDZV_PREEMPT_RATE_MAX)
		return ERR(DL_EINVAL,
			   "field 'step_rate': %g is not a rate of 0 to %g "
			   "steps per second",
			   step_rate, RDZV_PREEMPT_RATE_MAX);
	if (step > UINT64_MAX / 4)
		return ERR(DL_EINVAL, "field 'step': %" PRIu64 " is too large",
			   step);
	/* fenced as a heartbeat: a member of the running round only */
	rc = rdzv_heartbeat(st, job, node_id, incarnation, round, now_ms, reply,
			    err, err_size);
	if (rc)
		return rc;
	j = state_find_job(st, job);
	if (!j || job_is_ended(j) || j->preempt_step)
		return 0;
	j->preempt_step = rdzv_preempt_pick_step(step, step_rate,
						 j->cfg.heartbeat_interval_ms);
	job_mark(j, RDZV_CHANGED_JOB | RDZV_CHANGED_WAKE);
	log_info("job=%s round=%" PRIu64
		 " event=preempted node=%s step=%" PRIu64
		 " step_rate=%.3f stop_step=%" PRIu64,
		 j->name, j->round, node_id, step, step_rate, j->preempt_step);
	if (reply)
		reply->preempt_step = j->preempt_step;
	return 0;
}

int job_preempt_end(struct rdzv_state *st, struct job *j, const char *reason,
		    uint64_t now_ms)
{
	if (!j->preempt_step || job_is_ended(j))
		return 0;
	log_info("job=%s round=%" PRIu64 " event=preemption_failed reason=%s "
		 "stop_step=%" PRIu64,
		 j->name, j->round, reason, j->preempt_step);
	job_finish(st, j, RDZV_JOB_FAILED, reason, now_ms);
	return 1;
}
