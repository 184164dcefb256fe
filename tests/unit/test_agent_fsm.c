/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_agent_fsm.c - the agent's round loop (agent/fsm.c) with no process
 * and no network: its effects are recorded, its events are made up.
 *
 * One test walks every state x event cell against the table written out
 * again below (what each cell must do: its next state and its effects);
 * the others play the sequences, and the races the fault suite found the
 * hard way, from start to end.
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

#include "../../agent/fsm.h"

struct rec {
	struct agent_fsm *f;
	char log[4096];
	int gone_on_stop;      /* stop_workers posts WORKERS_GONE at once */
	int printed_n;	       /* failures in the printed report */
	int printed_job;       /* the report was the job's, not our own */
	int report_failures_n; /* failures in the last failure report */
	int in_place;	       /* every worker declared abort+membership */
	int preempt;	       /* every worker declared preempt */
};

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

struct fixture {
	struct agent_fsm f;
	struct rec r;
};

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));
	assert_non_null(x);
	assert_int_equal(agent_fsm_init(&x->f, &ops, &x->r, "job", 2), 0);
	x->r.f = &x->f;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;
	agent_fsm_release(&x->f);
	free(x);
	return 0;
}

/* ---- event makers */

static void post(struct fixture *x, enum agent_event_kind k, uint64_t round)
{
	agent_fsm_post_kind(&x->f, k, round);
}

static void post_joined(struct fixture *x, uint64_t round, int restart_count)
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

static void post_job(struct fixture *x, enum agent_event_kind k, uint64_t round,
		     const char *job_state)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = k;
	ev.round = round;
	snprintf(ev.job_state, sizeof(ev.job_state), "%s", job_state);
	agent_fsm_post(&x->f, &ev);
}

static void post_failed(struct fixture *x, int n_records)
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

static void post_signal(struct fixture *x, int sig)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_SIGNAL;
	ev.sig = sig;
	agent_fsm_post(&x->f, &ev);
}

static void post_status(struct fixture *x, int n_failures)
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

static void post_preempt(struct fixture *x, uint64_t step)
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
static void post_any(struct fixture *x, enum agent_event_kind k)
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

static void clear_log(struct fixture *x)
{
	x->r.log[0] = '\0';
}

static void expect(struct fixture *x, enum agent_state s, const char *log)
{
	assert_string_equal(agent_state_name(x->f.state), agent_state_name(s));
	assert_string_equal(x->r.log, log);
	clear_log(x);
}

/* ---- every cell */

struct cell {
	enum agent_state from;
	enum agent_event_kind ev;
	enum agent_state to;
	const char *effects;
};

/* What each non-empty cell does when posted as post_any does; every
 * cell not listed must change nothing and do nothing. */
static const struct cell cells[] = {
    {AGENT_IDLE, AGENT_EV_START, AGENT_JOINING, "join;"},
    {AGENT_JOINING, AGENT_EV_JOINED, AGENT_RUNNING, "begin(6);start(6);"},
    {AGENT_JOINING, AGENT_EV_JOIN_ENDED, AGENT_FETCHING, "status;"},
    {AGENT_JOINING, AGENT_EV_JOIN_FAILED, AGENT_EXITED, "finish;"},
    {AGENT_JOINING, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_RUNNING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "end;report(5,failed);stop(15);"},
    {AGENT_RUNNING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_RUNNING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;stop(15);"},
    {AGENT_RUNNING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_RUNNING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_DONE, AGENT_EV_RESTART, AGENT_JOINING, "end;join;"},
    {AGENT_DONE, AGENT_EV_STOP, AGENT_FETCHING, "end;status;"},
    {AGENT_DONE, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_FAILING, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_FAILING, AGENT_EV_STOP, AGENT_FAILING_END, ""},
    {AGENT_FAILING, AGENT_EV_REPORT_DONE, AGENT_RESTARTING, ""},
    {AGENT_FAILING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_FAILING_END, AGENT_EV_WORKERS_GONE, AGENT_REPORTING_END, ""},
    {AGENT_FAILING_END, AGENT_EV_REPORT_DONE, AGENT_ENDING, ""},
    {AGENT_FAILING_END, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REPORTING, AGENT_EV_STOP, AGENT_REPORTING_END, ""},
    {AGENT_REPORTING, AGENT_EV_REPORT_DONE, AGENT_JOINING, "join;"},
    {AGENT_REPORTING, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_REPORTING_END, AGENT_EV_REPORT_DONE, AGENT_FETCHING, "status;"},
    {AGENT_REPORTING_END, AGENT_EV_SIGNAL, AGENT_LEAVING, "cancel;leave;"},
    {AGENT_RESTARTING, AGENT_EV_WORKERS_GONE, AGENT_JOINING, "join;"},
    {AGENT_RESTARTING, AGENT_EV_STOP, AGENT_ENDING, ""},
    {AGENT_RESTARTING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_ENDING, AGENT_EV_WORKERS_GONE, AGENT_FETCHING, "status;"},
    {AGENT_ENDING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_SIGNALLED, AGENT_EV_WORKERS_GONE, AGENT_LEAVING, "leave;"},
    {AGENT_SIGNALLED, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "kill;"},
    {AGENT_FETCHING, AGENT_EV_STATUS, AGENT_EXITED, "print;finish;"},
    {AGENT_FETCHING, AGENT_EV_SIGNAL, AGENT_EXITED, "cancel;print;finish;"},
    {AGENT_LEAVING, AGENT_EV_LEFT, AGENT_EXITED, "finish;"},
    /* the in-place states (their workers are kept) */
    {AGENT_ABORTING, AGENT_EV_ABORTED, AGENT_JOINING_KEPT, "join;"},
    {AGENT_ABORTING, AGENT_EV_REFORM_MISSED, AGENT_RESTARTING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_WORKER_FAILED, AGENT_RESTARTING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_WORKERS_GONE, AGENT_JOINING, "join;"},
    {AGENT_ABORTING, AGENT_EV_STOP, AGENT_ENDING, "stop(15);"},
    {AGENT_ABORTING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_ABORTED, AGENT_REPORTING_KEPT, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_REPORT_DONE, AGENT_ABORTING, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_FAILING, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_FAILING, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_FAILING_KEPT, AGENT_EV_STOP, AGENT_FAILING_END, "stop(15);"},
    {AGENT_FAILING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_REPORT_DONE, AGENT_JOINING_KEPT, "join;"},
    {AGENT_REPORTING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_FAILING, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_FAILING, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_REPORTING, ""},
    {AGENT_REPORTING_KEPT, AGENT_EV_STOP, AGENT_FAILING_END, "stop(15);"},
    {AGENT_REPORTING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOINED, AGENT_REFORMING,
     "begin(6);reform(6);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOIN_ENDED, AGENT_ENDING, "stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_JOIN_FAILED, AGENT_ENDING, "stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_REFORM_MISSED, AGENT_RESTARTING,
     "end;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_WORKER_FAILED, AGENT_RESTARTING,
     "end;stop(15);"},
    {AGENT_JOINING_KEPT, AGENT_EV_WORKERS_GONE, AGENT_JOINING, ""},
    {AGENT_JOINING_KEPT, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_REFORMED, AGENT_RUNNING, ""},
    {AGENT_REFORMING, AGENT_EV_REFORM_MISSED, AGENT_RESPAWNING, "stop(15);"},
    {AGENT_REFORMING, AGENT_EV_WORKER_FAILED, AGENT_RESPAWNING, "stop(15);"},
    {AGENT_REFORMING, AGENT_EV_WORKERS_GONE, AGENT_RUNNING, "start(5);"},
    {AGENT_REFORMING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_REFORMING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_RESPAWNING, AGENT_EV_WORKERS_GONE, AGENT_RUNNING, "start(5);"},
    {AGENT_RESPAWNING, AGENT_EV_RESTART, AGENT_RESTARTING, "end;"},
    {AGENT_RESPAWNING, AGENT_EV_STOP, AGENT_ENDING, "end;"},
    {AGENT_RESPAWNING, AGENT_EV_SIGNAL, AGENT_SIGNALLED, "cancel;stop(15);"},
    /* a preemption: the stop step from the rendezvous to a node whose
     * workers cannot stop at a step is the SIGTERM it would have had */
    {AGENT_RUNNING, AGENT_EV_PREEMPT, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT, AGENT_PREEMPTING,
     "grace;preempt(7);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT_FAILED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_PREEMPT_EXPIRED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_RESTART, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "report(5,failed);stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    {AGENT_PREEMPT_ASKING, AGENT_EV_SIGNAL, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_PREEMPT_EXPIRED, AGENT_SIGNALLED,
     "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_RESTART, AGENT_SIGNALLED, "cancel;stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_WORKER_FAILED, AGENT_FAILING,
     "report(5,failed);stop(15);"},
    {AGENT_PREEMPTING, AGENT_EV_WORKERS_GONE, AGENT_DONE, "report(5,ok);"},
    {AGENT_PREEMPTING, AGENT_EV_STOP, AGENT_ENDING, "end;stop(15);"},
    /* the first SIGTERM is the preemption's (told before signalled) */
    {AGENT_PREEMPTING, AGENT_EV_SIGNAL, AGENT_PREEMPTING, ""},
};

/* The cells that differ when every worker of the node declared preempt
 * (and the agent can preempt). */
static const struct cell cells_preempt[] = {
    {AGENT_RUNNING, AGENT_EV_SIGNAL, AGENT_PREEMPT_ASKING, "grace;ask;"},
    {AGENT_RUNNING, AGENT_EV_PREEMPT, AGENT_PREEMPTING, "grace;preempt(7);"},
};

/* The cells that differ when every worker of the node declared abort and
 * membership (the others are as above). */
static const struct cell cells_in_place[] = {
    {AGENT_RUNNING, AGENT_EV_WORKER_FAILED, AGENT_FAILING_KEPT,
     "end;report(5,failed);abort(5);"},
    {AGENT_RUNNING, AGENT_EV_RESTART, AGENT_ABORTING, "end;abort(5);"},
    {AGENT_REFORMING, AGENT_EV_RESTART, AGENT_ABORTING, "end;abort(5);"},
};

static const struct cell *find_cell(enum agent_state s, enum agent_event_kind k,
				    int in_place)
{
	for (size_t i = 0; in_place == 2 &&
			   i < sizeof(cells_preempt) / sizeof(cells_preempt[0]);
	     i++)
		if (cells_preempt[i].from == s && cells_preempt[i].ev == k)
			return &cells_preempt[i];
	for (size_t i = 0; in_place == 1 && i < sizeof(cells_in_place) /
						    sizeof(cells_in_place[0]);
	     i++)
		if (cells_in_place[i].from == s && cells_in_place[i].ev == k)
			return &cells_in_place[i];
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++)
		if (cells[i].from == s && cells[i].ev == k)
			return &cells[i];
	return NULL;
}

/* sweep posts every event in every state and compares with the tables;
 * in_place 1: every worker declared abort and membership, 2: preempt */
static void sweep(struct fixture *x, int in_place)
{
	x->r.in_place = in_place == 1;
	x->r.preempt = in_place == 2;
	for (int s = 0; s < AGENT_N_STATES; s++) {
		for (int k = 0; k < AGENT_N_EVENTS; k++) {
			const struct cell *c = find_cell(s, k, in_place);
			char what[96];
			x->f.state = (enum agent_state)s;
			x->f.r.round = 5;
			x->f.joined = 1;
			x->f.report_on_exit = 1; /* as after a FAILED end */
			x->f.preempt_sigterms = 0;
			clear_log(x);
			post_any(x, (enum agent_event_kind)k);
			snprintf(what, sizeof(what), "%s x %s%s",
				 agent_state_name(s), agent_event_name(k),
				 in_place == 1	 ? " (in place)"
				 : in_place == 2 ? " (preempt)"
						 : "");
			if (!c) {
				if (x->f.state != (enum agent_state)s ||
				    x->r.log[0])
					fail_msg("%s: expected nothing, got "
						 "%s and '%s'",
						 what,
						 agent_state_name(x->f.state),
						 x->r.log);
				continue;
			}
			if (x->f.state != c->to ||
			    strcmp(x->r.log, c->effects) != 0)
				fail_msg(
				    "%s: expected %s and '%s', got %s and "
				    "'%s'",
				    what, agent_state_name(c->to), c->effects,
				    agent_state_name(x->f.state), x->r.log);
		}
	}
}

static void test_every_cell(void **state)
{
	sweep(*state, 0);
}

static void test_every_cell_in_place(void **state)
{
	sweep(*state, 1);
}

static void test_every_cell_preempt(void **state)
{
	sweep(*state, 2);
}

/* SIGTERM with workers that declared preempt: the stop step is asked
 * for, sent, the workers stop and the node reports success; the job ends
 * PREEMPTED and the agent exits 0 without leaving */
static void test_preempt(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_signal(x, SIGTERM);
	expect(x, AGENT_PREEMPT_ASKING, "grace;ask;");
	post_preempt(x, 40);
	expect(x, AGENT_PREEMPTING, "grace;preempt(40);");
	post_preempt(x, 41); /* the same news again (every answer says it) */
	expect(x, AGENT_PREEMPTING, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(1,ok);");
	post_job(x, AGENT_EV_STOP, 1, "PREEMPTED");
	expect(x, AGENT_EXITED, "end;finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* the grace runs out after this node's workers stopped: a signalled
 * agent leaves (exit 143); one only told by the rendezvous waits on */
static void test_preempt_grace_done(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_preempt(x, 40); /* told, not signalled */
	post(x, AGENT_EV_WORKERS_GONE, 0);
	clear_log(x);
	post(x, AGENT_EV_PREEMPT_EXPIRED, 0);
	expect(x, AGENT_DONE, "");
	post_signal(x, SIGTERM); /* DONE: a plain signal, as ever */
	expect(x, AGENT_LEAVING, "cancel;leave;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

static void test_preempt_grace_expired_done(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_signal(x, SIGTERM);
	post_preempt(x, 40);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	clear_log(x);
	post(x, AGENT_EV_PREEMPT_EXPIRED, 0);
	expect(x, AGENT_LEAVING, "cancel;leave;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

/* a second SIGTERM while stopping at the step is a plain signal */
static void test_preempt_second_sigterm(void **state)
{
	struct fixture *x = *state;
	x->r.preempt = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_preempt(x, 40);
	clear_log(x);
	post_signal(x, SIGTERM);
	expect(x, AGENT_PREEMPTING, "");
	post_signal(x, SIGTERM);
	expect(x, AGENT_SIGNALLED, "cancel;stop(15);");
}

/* the states said to have workers are those WORKERS_GONE ends */
static void test_worker_states(void **state)
{
	(void)state;
	for (int s = 0; s < AGENT_N_STATES; s++) {
		const struct cell *c =
		    find_cell((enum agent_state)s, AGENT_EV_WORKERS_GONE, 0);
		assert_int_equal(agent_fsm_has_workers((enum agent_state)s),
				 c != NULL);
	}
}

/* ---- whole sequences */

static void test_success(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	expect(x, AGENT_JOINING, "join;");
	post_joined(x, 1, 0);
	expect(x, AGENT_RUNNING, "begin(1);start(1);");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(1,ok);");
	post(x, AGENT_EV_REPORT_DONE, 1); /* a plain "continue" */
	expect(x, AGENT_DONE, "");
	post_job(x, AGENT_EV_STOP, 1, "SUCCEEDED");
	expect(x, AGENT_EXITED, "end;finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* a failure: the report's answer and the end of the workers come in
 * either order; either way the agent rejoins once both are in */
static void test_failure_then_rejoin(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_failed(x, 1);
	expect(x, AGENT_FAILING, "end;report(1,failed);stop(15);");
	assert_int_equal(x->r.report_failures_n, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_REPORTING, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_JOINING, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_RUNNING, "begin(2);start(2);");
	assert_int_equal(json_array_size(x->f.failures), 0);
	/* the other order */
	post_failed(x, 1);
	clear_log(x);
	post(x, AGENT_EV_REPORT_DONE, 2);
	expect(x, AGENT_RESTARTING, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;");
}

/* an answer about the old round arriving after the new round's join
 * (the held heartbeat of tests/e2e/agent_stale.sh) changes nothing */
static void test_stale_answers(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	post(x, AGENT_EV_REPORT_DONE, 1);
	post_joined(x, 2, 1);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RUNNING");
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_RUNNING, "");
	/* the same answer about the current round does act */
	post_job(x, AGENT_EV_RESTART, 2, "RUNNING");
	expect(x, AGENT_RESTARTING, "end;stop(15);");
}

/* a restart answer while joining speaks of the round we already left */
static void test_answer_while_joining(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 3, 0);
	post_job(x, AGENT_EV_RESTART, 3, "RUNNING");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;begin(3);start(3);end;stop(15);join;");
	post_job(x, AGENT_EV_RESTART, 3, "RUNNING");
	post_job(x, AGENT_EV_STOP, 3, "FAILED");
	expect(x, AGENT_JOINING, "");
}

/* workers exiting while they are being stopped are not new failures */
static void test_exit_while_stopping(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_job(x, AGENT_EV_RESTART, 1, "RUNNING");
	clear_log(x);
	post_failed(x, 1);
	post_failed(x, 1);
	expect(x, AGENT_RESTARTING, "");
	assert_int_equal(json_array_size(x->f.failures), 0);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_JOINING, "join;");
	/* and while failing, only the first failure is the round's */
	post_joined(x, 2, 1);
	post_failed(x, 1);
	post_failed(x, 1);
	assert_int_equal(json_array_size(x->f.failures), 1);
}

/* a watch answer while the failure report is in flight: "restart" is
 * what we do anyway; "stop" ends the job once the report is answered */
static void test_watch_during_report(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 2); /* two hung workers */
	assert_int_equal(x->r.report_failures_n, 2);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_FAILING, "");
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	expect(x, AGENT_FAILING_END, "");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_REPORTING_END, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_FETCHING, "status;");
	post_status(x, 3);
	expect(x, AGENT_EXITED, "print;finish;");
	assert_int_equal(x->r.printed_job, 1);
	assert_int_equal(x->r.printed_n, 3);
	assert_int_equal(x->f.exit_status, 1);
}

/* no usable job record: the report is this node's own failures */
static void test_report_own_failures(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	post_failed(x, 1);
	post_job(x, AGENT_EV_STOP, 1, "FAILED");
	post(x, AGENT_EV_REPORT_DONE, 1);
	post(x, AGENT_EV_WORKERS_GONE, 0);
	post_status(x, -1);
	assert_int_equal(x->f.state, AGENT_EXITED);
	assert_int_equal(x->r.printed_job, 0);
	assert_int_equal(x->r.printed_n, 1);
}

static void test_signal(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_signal(x, SIGINT);
	expect(x, AGENT_SIGNALLED, "cancel;stop(2);");
	post_signal(x, SIGINT);
	expect(x, AGENT_SIGNALLED, "kill;");
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_LEAVING, "leave;");
	post_signal(x, SIGTERM);
	expect(x, AGENT_LEAVING, "");
	post(x, AGENT_EV_LEFT, 0);
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 128 + SIGINT);
}

/* a signal before any round: nothing to leave */
static void test_signal_before_joining(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_signal(x, SIGTERM);
	expect(x, AGENT_EXITED, "join;cancel;finish;");
	assert_int_equal(x->f.exit_status, 128 + SIGTERM);
}

static void test_join_outcomes(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post(x, AGENT_EV_JOIN_FAILED, 0);
	expect(x, AGENT_EXITED, "join;finish;");
	assert_int_equal(x->f.exit_status, 1);
	/* a job that ended before this node ever joined it ran nothing
	 * here: never a success */
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "SUCCEEDED");
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 1);
	/* a member of an earlier round rejoining a job that has succeeded
	 * ends as the job did */
	x->f.joined = 1;
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "SUCCEEDED");
	expect(x, AGENT_EXITED, "finish;");
	assert_int_equal(x->f.exit_status, 0);
	x->f.state = AGENT_JOINING;
	post_job(x, AGENT_EV_JOIN_ENDED, 0, "FAILED");
	expect(x, AGENT_FETCHING, "status;");
	assert_int_equal(x->f.exit_status, 1);
}

/* events posted by an effect are handled after the current one, in
 * order: a stop with no worker left ends at once */
static void test_effects_post_in_order(void **state)
{
	struct fixture *x = *state;
	x->r.gone_on_stop = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_job(x, AGENT_EV_STOP, 1, "SUCCEEDED");
	expect(x, AGENT_EXITED, "end;stop(15);finish;");
	assert_int_equal(x->f.exit_status, 0);
}

/* the in-place path whole: a round ends elsewhere, the workers abort,
 * the node rejoins, they re-form; a stale aborted/reformed changes
 * nothing; recovery says how the round began */
static void test_in_place_round(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	assert_string_equal(x->f.recovery, "started");
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_ABORTING, "end;abort(1);");
	post(x, AGENT_EV_ABORTED, 0); /* another round's: dropped */
	expect(x, AGENT_ABORTING, "");
	post(x, AGENT_EV_ABORTED, 1);
	expect(x, AGENT_JOINING_KEPT, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_REFORMING, "begin(2);reform(2);");
	post(x, AGENT_EV_REFORMED, 1); /* stale */
	expect(x, AGENT_REFORMING, "");
	post(x, AGENT_EV_REFORMED, 2);
	expect(x, AGENT_RUNNING, "");
	assert_string_equal(x->f.recovery, "in_place");
	/* and to the end as usual */
	post(x, AGENT_EV_WORKERS_GONE, 0);
	expect(x, AGENT_DONE, "report(2,ok);");
}

/* a worker of ours failed: the report and the others' abort run side by
 * side, in either order, then the rejoin keeps the others */
static void test_in_place_after_own_failure(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_failed(x, 1);
	expect(x, AGENT_FAILING_KEPT, "end;report(1,failed);abort(1);");
	assert_int_equal(x->r.report_failures_n, 1);
	post(x, AGENT_EV_ABORTED, 1);
	expect(x, AGENT_REPORTING_KEPT, "");
	post(x, AGENT_EV_REPORT_DONE, 1);
	expect(x, AGENT_JOINING_KEPT, "join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_REFORMING, "begin(2);reform(2);");
	post(x, AGENT_EV_REFORMED, 2);
	expect(x, AGENT_RUNNING, "");
	/* the other order */
	post_failed(x, 1);
	clear_log(x);
	post(x, AGENT_EV_REPORT_DONE, 2);
	expect(x, AGENT_ABORTING, "");
	post(x, AGENT_EV_ABORTED, 2);
	expect(x, AGENT_JOINING_KEPT, "join;");
}

/* every miss lands on the plain path and the job goes on */
static void test_in_place_fallbacks(void **state)
{
	struct fixture *x = *state;
	x->r.in_place = 1;
	x->r.gone_on_stop = 1;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	/* abort ignored: stop, rejoin, start afresh */
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	post(x, AGENT_EV_REFORM_MISSED, 0);
	expect(x, AGENT_JOINING, "end;abort(1);stop(15);join;");
	post_joined(x, 2, 1);
	expect(x, AGENT_RUNNING, "begin(2);start(2);");
	assert_string_equal(x->f.recovery, "restarted");
	/* no new round in time: the join is dropped, then made again */
	post_job(x, AGENT_EV_RESTART, 2, "RESTARTING");
	post(x, AGENT_EV_ABORTED, 2);
	clear_log(x);
	post(x, AGENT_EV_REFORM_MISSED, 0);
	expect(x, AGENT_JOINING, "end;stop(15);join;");
	post_joined(x, 3, 2);
	clear_log(x);
	/* a worker crashed during the re-form: new workers in the round */
	post_job(x, AGENT_EV_RESTART, 3, "RESTARTING");
	post(x, AGENT_EV_ABORTED, 3);
	post_joined(x, 4, 3);
	clear_log(x);
	post_failed(x, 0);
	expect(x, AGENT_RUNNING, "stop(15);start(4);");
	assert_string_equal(x->f.recovery, "restarted");
	assert_int_equal(x->f.r.round, 4);
}

/* without the declaration of every worker, the path is today's */
static void test_not_in_place(void **state)
{
	struct fixture *x = *state;
	post(x, AGENT_EV_START, 0);
	post_joined(x, 1, 0);
	clear_log(x);
	post_job(x, AGENT_EV_RESTART, 1, "RESTARTING");
	expect(x, AGENT_RESTARTING, "end;stop(15);");
	assert_string_equal(x->f.recovery_why,
			    "not every worker declared abort and membership");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_cell, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_cell_preempt, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_preempt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_grace_done, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_grace_expired_done,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_preempt_second_sigterm, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_every_cell_in_place, setup,
					    teardown),
	    cmocka_unit_test(test_worker_states),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	    T(test_success),
	    T(test_failure_then_rejoin),
	    T(test_stale_answers),
	    T(test_answer_while_joining),
	    T(test_exit_while_stopping),
	    T(test_watch_during_report),
	    T(test_report_own_failures),
	    T(test_signal),
	    T(test_signal_before_joining),
	    T(test_join_outcomes),
	    T(test_effects_post_in_order),
	    T(test_in_place_round),
	    T(test_in_place_after_own_failure),
	    T(test_in_place_fallbacks),
	    T(test_not_in_place),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
