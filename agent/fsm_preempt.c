/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fsm_preempt.c - the round loop's cells of a preemption (docs/agent.md,
 * "Preemption"): SIGTERM to a node whose workers all declared preempt
 * asks the rendezvous for the job's stop step instead of forwarding the
 * signal; the stop step, from any answer, is sent to the workers; every
 * miss falls back to what the signal does without it. The table that
 * places these cells is fsm.c's.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "dlaunch/log.h"
#include "fsm.h"
#include "fsm_cells.h"

static int can_preempt(struct agent_fsm *f)
{
	return f->ops->preempt_ok && f->ops->preempt_ok(f->ctx);
}

/* run_signal: SIGTERM to a node whose workers can stop at a step asks
 * the rendezvous for the job's stop step; any other signal (or workers
 * that cannot) is forwarded as before */
void fsm_run_signal(struct agent_fsm *f, struct agent_event *ev)
{
	if (ev->sig != SIGTERM || !can_preempt(f)) {
		fsm_signalled(f, ev);
		return;
	}
	log_warn("received SIGTERM; every worker of this node declared "
		 "preempt: asking the rendezvous for the job's stop step");
	f->preempt_sigterms = 1;
	fsm_enter(f, AGENT_PREEMPT_ASKING);
	f->ops->preempt_grace(f->ctx);
	f->ops->preempt_ask(f->ctx);
}

static void stop_at(struct agent_fsm *f, uint64_t step)
{
	f->preempt_step = step;
	log_info("job %s is preempted: this node's workers stop after step "
		 "%llu, save it and exit",
		 f->job, (unsigned long long)step);
	fsm_enter(f, AGENT_PREEMPTING);
	f->ops->preempt_grace(f->ctx);
	f->ops->preempt_workers(f->ctx, step);
}

/* the rendezvous says the job is preempted (another node had SIGTERM);
 * workers that cannot stop at a step get the SIGTERM they would have */
void fsm_run_preempt(struct agent_fsm *f, struct agent_event *ev)
{
	struct agent_event sig;
	if (can_preempt(f)) {
		stop_at(f, ev->step);
		return;
	}
	log_warn("job %s is preempted at step %llu, but not every worker of "
		 "this node declared preempt: stopping them as SIGTERM would",
		 f->job, (unsigned long long)ev->step);
	memset(&sig, 0, sizeof(sig));
	sig.kind = AGENT_EV_SIGNAL;
	sig.sig = SIGTERM;
	fsm_signalled(f, &sig);
}

void fsm_asking_preempt(struct agent_fsm *f, struct agent_event *ev)
{
	stop_at(f, ev->step);
}

/* no stop step (refused, the round ended, the grace is over): what the
 * signal would have done */
void fsm_preempt_fall_back(struct agent_fsm *f, struct agent_event *ev)
{
	struct agent_event sig;
	log_warn("preemption of job %s: %s; stopping this node's workers "
		 "with SIGTERM",
		 f->job,
		 ev->kind == AGENT_EV_PREEMPT_EXPIRED
		     ? "not done within --preempt-grace"
		 : ev->kind == AGENT_EV_PREEMPT_FAILED
		     ? "the rendezvous refused it"
		     : "the round ended first");
	memset(&sig, 0, sizeof(sig));
	sig.kind = AGENT_EV_SIGNAL;
	sig.sig = SIGTERM;
	fsm_signalled(f, &sig);
}

/* another SIGTERM: the first is taken by the preemption under way (a
 * node told by the rendezvous before its own signal came); more is a
 * plain signal */
void fsm_preempting_signal(struct agent_fsm *f, struct agent_event *ev)
{
	if (ev->sig == SIGTERM && f->preempt_sigterms == 0) {
		f->preempt_sigterms = 1;
		log_info("received SIGTERM; already stopping after step %llu",
			 (unsigned long long)f->preempt_step);
		return;
	}
	fsm_signalled(f, ev);
}

/* a worker failed before the step: the job cannot stop at it (the
 * rendezvous ends it FAILED) */
void fsm_preempting_failed(struct agent_fsm *f, struct agent_event *ev)
{
	fsm_keep_failures(f, ev);
	fsm_enter(f, AGENT_FAILING);
	f->ops->report(f->ctx, f->r.round, 1, f->failures);
	f->ops->stop_workers(f->ctx, SIGTERM);
}

/* this node's workers stopped and saved; the signalled agent whose job
 * does not end within the grace leaves (its part is done) */
void fsm_done_expired(struct agent_fsm *f, struct agent_event *ev)
{
	(void)ev;
	if (!f->preempt_sigterms)
		return;
	log_warn("job %s did not end within --preempt-grace; this node's "
		 "workers stopped after step %llu: leaving",
		 f->job, (unsigned long long)f->preempt_step);
	f->exit_status = 128 + SIGTERM;
	f->report_on_exit = 0;
	f->ops->cancel(f->ctx);
	fsm_after_signal(f);
}
