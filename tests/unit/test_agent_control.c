/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_agent_control.c - the agent's end of a worker's control channel
 * (agent/control.c) on a real socket pair and event loop, the test
 * playing the worker: welcome, steps as progress, the answers the agent
 * waits for (and the ones of another round it ignores), bad input making
 * the worker plain, and the bound on what waits for a worker that does
 * not read.
 */
#include <event2/event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../agent/control_proto.h"
#include "../../agent/internal.h"

static char fx_log[1024];

static void fx_say(const char *what)
{
	size_t n = strlen(fx_log);
	snprintf(fx_log + n, sizeof(fx_log) - n, "%s;", what);
}

static void fx_join(void *ctx)
{
	(void)ctx;
	fx_say("join");
}

static void fx_stop(void *ctx, int sig)
{
	(void)ctx;
	(void)sig;
	fx_say("stop");
}

static const struct agent_fsm_ops ops = {.join = fx_join,
					 .stop_workers = fx_stop};

struct fixture {
	struct agent a;
	int peer; /* the worker's end */
};

static int setup(void **state)
{
	struct fixture *x = calloc(1, sizeof(*x));
	struct agent_worker *w;
	assert_non_null(x);
	x->a.base = event_base_new();
	assert_non_null(x->a.base);
	x->a.cfg.reform_timeout_ms = 5000;
	x->a.cfg.shutdown_timeout_ms = 2000;
	x->a.cfg.last_call_timeout_ms = 1000;
	assert_int_equal(agent_fsm_init(&x->a.fsm, &ops, &x->a, "job", 1), 0);
	x->a.workers = calloc(1, sizeof(*x->a.workers));
	x->a.n_workers = 1;
	w = &x->a.workers[0];
	w->a = &x->a;
	w->pid = getpid(); /* alive, never reaped */
	w->rank = 3;
	assert_int_equal(control_open(w, &x->peer), 0);
	assert_true(x->peer > 2);
	fx_log[0] = '\0';
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *x = *state;
	control_close(&x->a.workers[0]);
	control_release(&x->a);
	free(x->a.workers);
	agent_fsm_release(&x->a.fsm);
	event_base_free(x->a.base);
	close(x->peer);
	free(x);
	return 0;
}

/* pump runs the loop until nothing is ready */
static void pump(struct fixture *x)
{
	for (int i = 0; i < 8; i++)
		event_base_loop(x->a.base, EVLOOP_NONBLOCK);
}

static void worker_says(struct fixture *x, const char *line)
{
	size_t n = strlen(line);
	assert_int_equal(write(x->peer, line, n), (ssize_t)n);
	pump(x);
}

/* worker_reads: what the agent wrote, as one string */
static void worker_reads(struct fixture *x, char *out, size_t size)
{
	ssize_t n = recv(x->peer, out, size - 1, MSG_DONTWAIT);
	out[n > 0 ? n : 0] = '\0';
}

static void hello(struct fixture *x)
{
	char got[256];
	worker_says(x,
		    "{\"type\":\"hello\",\"version\":1,\"handles\":[\"abort\","
		    "\"membership\"]}\n");
	worker_reads(x, got, sizeof(got));
	/* the agent's deadlines travel with the welcome: each step 5 s, the
	 * rejoin 2 x 5 s + the 2 s grace + the 1 s last call */
	assert_string_equal(got, "{\"type\":\"welcome\",\"version\":1,"
				 "\"reform_timeout_ms\":5000,"
				 "\"rejoin_timeout_ms\":13000}\n");
}

static void test_welcome_and_steps(void **state)
{
	struct fixture *x = *state;
	struct agent_worker *w = &x->a.workers[0];
	assert_false(control_in_place(&x->a));
	hello(x);
	assert_true(control_in_place(&x->a));
	w->last_progress_ms = 0;
	worker_says(x, "{\"type\":\"step\",\"step\":7}\n");
	assert_int_equal(w->ctl.step, 7);
	assert_true(w->last_progress_ms > 0); /* progress */
	/* a step going back breaks the protocol: plain from now on */
	worker_says(x, "{\"type\":\"step\",\"step\":6}\n");
	assert_int_equal(w->ctl.state, AGENT_CONTROL_PLAIN);
	assert_false(control_in_place(&x->a));
	/* and what it says after is drained, not heard */
	worker_says(x, "{\"type\":\"step\",\"step\":9}\n");
	assert_int_equal(w->ctl.step, 7);
}

static void test_bad_input(void **state)
{
	struct fixture *x = *state;
	struct agent_worker *w = &x->a.workers[0];
	worker_says(x, "{\"type\":\"step\",\"step\":1}\n"); /* before hello */
	assert_int_equal(w->ctl.state, AGENT_CONTROL_PLAIN);
	assert_false(control_in_place(&x->a));
}

/* the agent waits for aborted of its round only; all in: ABORTED */
static void test_answers_fenced(void **state)
{
	struct fixture *x = *state;
	char got[512];
	hello(x);
	x->a.fsm.state = AGENT_ABORTING;
	x->a.fsm.r.round = 4;
	control_abort(&x->a, 4, "test");
	pump(x);
	worker_reads(x, got, sizeof(got));
	assert_non_null(strstr(got, "\"type\":\"abort\""));
	assert_non_null(strstr(got, "\"round\":4"));
	worker_says(x, "{\"type\":\"aborted\",\"round\":3,\"step\":5}\n");
	assert_string_equal(fx_log, ""); /* another round's: ignored */
	assert_int_equal(x->a.fsm.state, AGENT_ABORTING);
	worker_says(x, "{\"type\":\"aborted\",\"round\":4,\"step\":5}\n");
	assert_string_equal(fx_log, "join;");
	assert_int_equal(x->a.fsm.state, AGENT_JOINING_KEPT);
}

/* a worker that does not read: what waits for it stays bounded, and it
 * becomes plain; during a re-form that is a miss */
static void test_not_reading(void **state)
{
	struct fixture *x = *state;
	struct agent_worker *w = &x->a.workers[0];
	char reason[4096];
	int sndbuf = 4096;
	hello(x);
	setsockopt(w->ctl.fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	memset(reason, 'r', sizeof(reason) - 1);
	reason[sizeof(reason) - 1] = '\0';
	x->a.fsm.state = AGENT_ABORTING;
	for (int i = 0; i < 1000 && w->ctl.state == AGENT_CONTROL_SPEAKS; i++) {
		control_abort(&x->a, 4, reason);
		assert_true(w->ctl.out.len <= 4 * CONTROL_LINE_MAX);
		pump(x);
	}
	assert_int_equal(w->ctl.state, AGENT_CONTROL_PLAIN);
	assert_string_equal(fx_log, "stop;"); /* the miss: back to plain */
	assert_int_equal(x->a.fsm.state, AGENT_RESTARTING);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_welcome_and_steps),
	    T(test_bad_input),
	    T(test_answers_fenced),
	    T(test_not_reading),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
