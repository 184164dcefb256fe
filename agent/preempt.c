/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preempt.c - the agent's side of a preemption: one stop step for the
 * whole job when a SIGTERM comes (Slurm preemption, scancel --signal,
 * Kubernetes deleting a pod).
 *
 * The round loop (fsm.c) decides; this file gives it its effects. It
 * keeps each worker's step rate from the `step` messages (control.c
 * calls preempt_note_step), asks the rendezvous backend for the job's
 * stop step with this node's latest step and rate, sends `preempt` to
 * the workers once the step is known, and bounds the whole by
 * --preempt-grace: one timer, armed once, whose end falls back to the
 * plain SIGTERM (and then --shutdown-timeout and SIGKILL).
 */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "control_proto.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "internal.h"

/* a rate is measured over windows of at least this long */
#define RATE_WINDOW_MS 2000
/* SIGTERMs this close together are one: Slurm signals the step's
 * processes itself and srun forwards its own copy */
#define PREEMPT_REPEAT_MS 1000

static int worker_alive(const struct agent_worker *w)
{
	return w->pid > 0 && !w->reaped;
}

uint64_t preempt_grace_ms(const struct agent *a)
{
	if (!a->rdzv || !a->rdzv->ops->preempt)
		return 0;
	return a->cfg.preempt_grace_ms;
}

void preempt_note_step(struct agent_worker *w)
{
	struct agent_control *c = &w->ctl;
	uint64_t now = c->step_ms;
	if (!c->rate_ms || c->step < c->rate_step) {
		c->rate_step = c->step;
		c->rate_ms = now;
		return;
	}
	if (now - c->rate_ms >= RATE_WINDOW_MS) {
		c->rate = (double)(c->step - c->rate_step) * 1000.0 /
			  (double)(now - c->rate_ms);
		c->rate_step = c->step;
		c->rate_ms = now;
	}
}

/* rate_of: w's steps per second now: the faster of its last whole
 * window and the window under way (a rate too low would make a stop
 * step that a fast rank passes before it hears of it) */
static double rate_of(const struct agent_worker *w)
{
	const struct agent_control *c = &w->ctl;
	double rate = c->rate;
	if (c->rate_ms && c->step_ms > c->rate_ms && c->step > c->rate_step) {
		double now = (double)(c->step - c->rate_step) * 1000.0 /
			     (double)(c->step_ms - c->rate_ms);
		if (now > rate)
			rate = now;
	}
	return rate;
}

int preempt_ok(struct agent *a)
{
	int n = 0;
	if (!preempt_grace_ms(a))
		return 0;
	for (int i = 0; i < a->n_workers; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (!worker_alive(w))
			continue;
		if (w->ctl.state != AGENT_CONTROL_SPEAKS ||
		    !(w->ctl.handles & CONTROL_HANDLES_PREEMPT)) {
			log_info("rank %d (pid %ld) did not declare preempt: "
				 "no preemption at one step for this node",
				 w->rank, (long)w->pid);
			return 0;
		}
		n++;
	}
	return n > 0;
}

void preempt_ask(struct agent *a)
{
	uint64_t step = 0;
	double rate = 0;
	for (int i = 0; i < a->n_workers; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (!worker_alive(w) || !w->ctl.has_step)
			continue;
		if (w->ctl.step > step)
			step = w->ctl.step;
		if (rate_of(w) > rate)
			rate = rate_of(w);
	}
	log_info("job=%s round=%llu event=preempt_asked step=%llu "
		 "step_rate=%.3f",
		 a->cfg.run_id, (unsigned long long)a->fsm.r.round,
		 (unsigned long long)step, rate);
	a->rdzv->ops->preempt(a->rdzv, a->fsm.r.round, step, rate);
}

void preempt_workers(struct agent *a, uint64_t step)
{
	for (int i = 0; i < a->n_workers; i++) {
		const struct agent_worker *w = &a->workers[i];
		if (worker_alive(w) && w->ctl.has_step && w->ctl.step > step)
			/* the margin was too small: the worker saves where
			 * it is, and says so */
			log_warn("rank %d is already at step %llu, past the "
				 "stop step %llu",
				 w->rank, (unsigned long long)w->ctl.step,
				 (unsigned long long)step);
	}
	control_preempt(a, step);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct agent *a = arg;
	(void)fd;
	(void)what;
	agent_fsm_post_kind(&a->fsm, AGENT_EV_PREEMPT_EXPIRED, 0);
}

void preempt_grace(struct agent *a)
{
	uint64_t ms = a->cfg.preempt_grace_ms;
	struct timeval tv = {(time_t)(ms / 1000),
			     (suseconds_t)(ms % 1000) * 1000};
	if (a->preempt_timer)
		return; /* armed once, by the first of signal and news */
	a->preempt_timer = evtimer_new(a->base, on_grace, a);
	if (!a->preempt_timer) {
		log_error("cannot start the --preempt-grace timer: out of "
			  "memory; stopping the workers now");
		agent_fsm_post_kind(&a->fsm, AGENT_EV_PREEMPT_EXPIRED, 0);
		return;
	}
	evtimer_add(a->preempt_timer, &tv);
}

int preempt_signal_repeated(struct agent *a, int sig)
{
	uint64_t now = clock_now_ms(), last = a->preempt_sigterm_ms;
	if (sig != SIGTERM)
		return 0;
	a->preempt_sigterm_ms = now;
	if (!last || now - last >= PREEMPT_REPEAT_MS ||
	    (a->fsm.state != AGENT_PREEMPT_ASKING &&
	     a->fsm.state != AGENT_PREEMPTING))
		return 0;
	log_info("received SIGTERM again within %d ms: the same signal, "
		 "delivered twice (a preemption is under way)",
		 PREEMPT_REPEAT_MS);
	return 1;
}

void preempt_release(struct agent *a)
{
	if (a->preempt_timer)
		event_free(a->preempt_timer);
	a->preempt_timer = NULL;
}
