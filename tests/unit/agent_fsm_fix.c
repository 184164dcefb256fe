/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent_fsm_fix.c - the fixture of agent_fsm_fix.h: the effects that
 * record themselves, the cmocka setup and teardown, the event makers and
 * expect().
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_fsm_fix.h"

static void say(struct rec *r, const char *fmt, ...)
{
	size_t n = strlen(r->log);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->log + n, sizeof(r->log) - n, fmt, ap);
	va_end(ap);
}

static void fx_start(void *ctx, const struct agent_round *rd)
{
	say(ctx, "start(%llu);", (unsigned long long)rd->round);
}

static void fx_stop(void *ctx, int sig)
{
	struct rec *r = ctx;
	say(r, "stop(%d);", sig);
	if (r->gone_on_stop)
		agent_fsm_post_kind(r->f, AGENT_EV_WORKERS_GONE, 0);
}

static void fx_kill(void *ctx)
{
	say(ctx, "kill;");
}

static void fx_join(void *ctx)
{
	say(ctx, "join;");
}

static void fx_round_begin(void *ctx, uint64_t round)
{
	say(ctx, "begin(%llu);", (unsigned long long)round);
}

static void fx_round_end(void *ctx)
{
	say(ctx, "end;");
}

static void fx_report(void *ctx, uint64_t round, int failed, json_t *failures)
{
	struct rec *r = ctx;
	say(r, "report(%llu,%s);", (unsigned long long)round,
	    failed ? "failed" : "ok");
	if (failed)
		r->report_failures_n = (int)json_array_size(failures);
}

static void fx_cancel(void *ctx)
{
	say(ctx, "cancel;");
}

static void fx_leave(void *ctx)
{
	say(ctx, "leave;");
}

static void fx_status(void *ctx)
{
	say(ctx, "status;");
}

static void fx_print(void *ctx, json_t *job, json_t *own)
{
	struct rec *r = ctx;
	int use_job = json_array_size(job) > 0;
	say(r, "print;");
	r->printed_job = use_job;
	r->printed_n = (int)json_array_size(use_job ? job : own);
}

static void fx_finish(void *ctx)
{
	say(ctx, "finish;");
}

static int fx_in_place(void *ctx)
{
	return ((struct rec *)ctx)->in_place;
}

static void fx_abort(void *ctx, uint64_t round, const char *reason)
{
	(void)reason;
	say(ctx, "abort(%llu);", (unsigned long long)round);
}

static void fx_reform(void *ctx, const struct agent_round *rd)
{
	say(ctx, "reform(%llu);", (unsigned long long)rd->round);
}

static int fx_preempt_ok(void *ctx)
{
	return ((struct rec *)ctx)->preempt;
}

static void fx_preempt_ask(void *ctx)
{
	say(ctx, "ask;");
}

static void fx_preempt_workers(void *ctx, uint64_t step)
{
	say(ctx, "preempt(%llu);", (unsigned long long)step);
}

static void fx_preempt_grace(void *ctx)
{
	say(ctx, "grace;");
}

static const struct agent_fsm_ops ops = {
    .start_workers = fx_start,
    .stop_workers = fx_stop,
    .kill_workers = fx_kill,
    .join = fx_join,
    .round_begin = fx_round_begin,
    .round_end = fx_round_end,
    .report = fx_report,
    .cancel = fx_cancel,
    .leave = fx_leave,
    .status = fx_status,
    .print_report = fx_print,
    .finish = fx_finish,
    .in_place = fx_in_place,
    .abort_workers = fx_abort,
    .reform_workers = fx_reform,
    .preempt_ok = fx_preempt_ok,
    .preempt_ask = fx_preempt_ask,
    .preempt_workers = fx_preempt_workers,
    .preempt_grace = fx_preempt_grace,
};

int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));
	assert_non_null(x);
	assert_int_equal(agent_fsm_init(&x->f, &ops, &x->r, "job", 2), 0);
	x->r.f = &x->f;
	*state = x;
	return 0;
}

int teardown(void **state)
{
	struct fixture *x = *state;
	agent_fsm_release(&x->f);
	free(x);
	return 0;
}

/* ---- event makers */

void post(struct fixture *x, enum agent_event_kind k, uint64_t round)
{
	agent_fsm_post_kind(&x->f, k, round);
}

void post_joined(struct fixture *x, uint64_t round, int restart_count)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_JOINED;
	ev.assign.round = round;
	ev.assign.nnodes = 1;
	ev.assign.world_size = 2;
	ev.assign.restart_count = restart_count;
	agent_fsm_post(&x->f, &ev);
}

void post_job(struct fixture *x, enum agent_event_kind k, uint64_t round,
	      const char *job_state)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = k;
	ev.round = round;
	snprintf(ev.job_state, sizeof(ev.job_state), "%s", job_state);
	agent_fsm_post(&x->f, &ev);
}

void post_failed(struct fixture *x, int n_records)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_WORKER_FAILED;
	if (n_records == 1) {
		ev.json = json_pack("{s:i}", "rank", 0);
	} else if (n_records > 1) {
		ev.json = json_array();
		for (int i = 0; i < n_records; i++)
			json_array_append_new(ev.json,
					      json_pack("{s:i}", "rank", i));
	}
	agent_fsm_post(&x->f, &ev);
}

void post_signal(struct fixture *x, int sig)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_SIGNAL;
	ev.sig = sig;
	agent_fsm_post(&x->f, &ev);
}

void post_status(struct fixture *x, int n_failures)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_STATUS;
	if (n_failures >= 0) {
		ev.json = json_array();
		for (int i = 0; i < n_failures; i++)
			json_array_append_new(ev.json, json_object());
	}
	agent_fsm_post(&x->f, &ev);
}

void post_preempt(struct fixture *x, uint64_t step)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_PREEMPT;
	ev.round = 5;
	ev.step = step;
	agent_fsm_post(&x->f, &ev);
}

/* post_any posts event k as the sweep does: about round 5, job FAILED,
 * signal SIGTERM, a join of round 6, one failure record, stop step 7 */
void post_any(struct fixture *x, enum agent_event_kind k)
{
	switch (k) {
	case AGENT_EV_PREEMPT: post_preempt(x, 7); break;
	case AGENT_EV_JOINED: post_joined(x, 6, 1); break;
	case AGENT_EV_JOIN_ENDED:
	case AGENT_EV_RESTART:
	case AGENT_EV_STOP: post_job(x, k, 5, "FAILED"); break;
	case AGENT_EV_WORKER_FAILED: post_failed(x, 1); break;
	case AGENT_EV_SIGNAL: post_signal(x, SIGTERM); break;
	case AGENT_EV_STATUS: post_status(x, 1); break;
	default: post(x, k, 5);
	}
}

void clear_log(struct fixture *x)
{
	x->r.log[0] = '\0';
}

void expect(struct fixture *x, enum agent_state s, const char *log)
{
	assert_string_equal(agent_state_name(x->f.state), agent_state_name(s));
	assert_string_equal(x->r.log, log);
	clear_log(x);
}
