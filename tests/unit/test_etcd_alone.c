/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_alone.c - the etcd backend (agent/etcd/) on the backends'
 * contract (agent/rdzv/) alone, with no round loop of the agent's.
 *
 * It is linked from every object of libetcd.a with libagent_rdzv.a,
 * librdzv_state.a and libdlcommon.a and without libagent.a (see
 * agent/etcd/module.mk): should the etcd folder take anything of the
 * agent above it again, this program no longer links and make tests
 * fails. What it checks: the contract's helpers post each answer to the
 * loop they are given, as the event the round loop expects (an action,
 * a stop step, an assignment, and what they refuse), and the etcd
 * backend, made with a recording loop in place of the agent's, keeps
 * that loop and reports to it, and refuses a configuration it cannot
 * use without posting anything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>
#include <jansson.h>

#include "../../agent/etcd/rdzv_etcd.h"
#include "../../agent/rdzv/rdzv.h"
#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

/* A loop that records what a backend posts to it. */
struct recorder {
	struct agent_event ev[8];
	size_t n;
	struct agent_round current;
	char recovery[16], recovery_why[64];
	struct agent_rdzv_loop loop;
};

static void record(void *ctx, struct agent_event *ev)
{
	struct recorder *rec = ctx;
	assert_true(rec->n < sizeof(rec->ev) / sizeof(rec->ev[0]));
	rec->ev[rec->n] = *ev;
	rec->ev[rec->n].json = NULL;
	rec->n++;
	json_decref(ev->json); /* the loop takes it */
}

static void recorder_init(struct recorder *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->loop.post = record;
	rec->loop.ctx = rec;
	rec->loop.current = &rec->current;
	rec->loop.recovery = rec->recovery;
	rec->loop.recovery_why = rec->recovery_why;
}

/* a backend of the contract's with nothing but the loop, for the helpers */
static void backend_init(struct agent_rdzv *r, struct recorder *rec)
{
	memset(r, 0, sizeof(*r));
	r->loop = rec->loop;
}

static void test_action_posts_restart_or_stop(void **state)
{
	struct recorder rec;
	struct agent_rdzv r;
	(void)state;
	recorder_init(&rec);
	backend_init(&r, &rec);
	assert_int_equal(agent_rdzv_post_action(&r, 7, "restart", "RUNNING"),
			 1);
	assert_int_equal(agent_rdzv_post_action(&r, 8, "stop", "SUCCEEDED"), 1);
	/* what is no action posts nothing */
	assert_int_equal(agent_rdzv_post_action(&r, 9, "wait", "RUNNING"), 0);
	assert_int_equal(agent_rdzv_post_action(&r, 9, NULL, "RUNNING"), 0);
	assert_int_equal(rec.n, 2);
	assert_int_equal(rec.ev[0].kind, AGENT_EV_RESTART);
	assert_int_equal(rec.ev[0].round, 7);
	assert_string_equal(rec.ev[0].job_state, "RUNNING");
	assert_int_equal(rec.ev[1].kind, AGENT_EV_STOP);
	assert_int_equal(rec.ev[1].round, 8);
	assert_string_equal(rec.ev[1].job_state, "SUCCEEDED");
}

static void test_preempt_posts_the_stop_step(void **state)
{
	struct recorder rec;
	struct agent_rdzv r;
	json_t *with = json_pack("{s:I}", "preempt_step", (json_int_t)120);
	json_t *without = json_pack("{s:s}", "action", "none");
	json_t *zero = json_pack("{s:I}", "preempt_step", (json_int_t)0);
	(void)state;
	recorder_init(&rec);
	backend_init(&r, &rec);
	assert_int_equal(agent_rdzv_post_preempt(&r, 3, with), 1);
	assert_int_equal(agent_rdzv_post_preempt(&r, 3, without), 0);
	assert_int_equal(agent_rdzv_post_preempt(&r, 3, zero), 0);
	assert_int_equal(agent_rdzv_post_preempt(&r, 3, NULL), 0);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.ev[0].kind, AGENT_EV_PREEMPT);
	assert_int_equal(rec.ev[0].round, 3);
	assert_int_equal(rec.ev[0].step, 120);
	json_decref(with);
	json_decref(without);
	json_decref(zero);
}

static json_t *assignment(int node_rank, int nnodes, int world, int offset)
{
	return json_pack("{s:I, s:i, s:i, s:i, s:i, s:s, s:i, s:i, s:i}",
			 "round", (json_int_t)5, "node_rank", node_rank,
			 "nnodes", nnodes, "world_size", world, "rank_offset",
			 offset, "master_addr", "10.0.0.1", "master_port",
			 29500, "restart_count", 2, "heartbeat_interval_ms",
			 750);
}

static void test_joined_reads_the_assignment(void **state)
{
	struct recorder rec;
	struct agent_rdzv r;
	uint64_t hb = 1000;
	json_t *a = assignment(1, 2, 4, 2);
	(void)state;
	recorder_init(&rec);
	backend_init(&r, &rec);
	assert_int_equal(agent_rdzv_post_joined(&r, a, 2, &hb), 0);
	assert_int_equal(hb, 750);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.ev[0].kind, AGENT_EV_JOINED);
	assert_int_equal(rec.ev[0].assign.round, 5);
	assert_int_equal(rec.ev[0].assign.node_rank, 1);
	assert_int_equal(rec.ev[0].assign.nnodes, 2);
	assert_int_equal(rec.ev[0].assign.world_size, 4);
	assert_int_equal(rec.ev[0].assign.rank_offset, 2);
	assert_int_equal(rec.ev[0].assign.restart_count, 2);
	assert_string_equal(rec.ev[0].assign.master_addr, "10.0.0.1");
	assert_int_equal(rec.ev[0].assign.master_port, 29500);
	json_decref(a);
}

/* an assignment that does not fit a node of nproc workers, or names a
 * master that must not reach a worker's environment: refused, logged,
 * nothing posted, the interval left as it was */
static void test_joined_refuses_a_bad_assignment(void **state)
{
	struct recorder rec;
	struct agent_rdzv r;
	uint64_t hb = 1000;
	json_t *too_many = assignment(1, 2, 4, 3);
	json_t *bad_rank = assignment(2, 2, 4, 0);
	json_t *bad_addr = assignment(0, 2, 4, 0);
	(void)state;
	json_object_set_new(bad_addr, "master_addr", json_string("a;rm -rf"));
	recorder_init(&rec);
	backend_init(&r, &rec);
	assert_int_equal(agent_rdzv_post_joined(&r, too_many, 2, &hb),
			 DL_EPROTO);
	assert_int_equal(agent_rdzv_post_joined(&r, bad_rank, 2, &hb),
			 DL_EPROTO);
	assert_int_equal(agent_rdzv_post_joined(&r, bad_addr, 2, &hb),
			 DL_EPROTO);
	assert_int_equal(rec.n, 0);
	assert_int_equal(hb, 1000);
	json_decref(too_many);
	json_decref(bad_rank);
	json_decref(bad_addr);
}

static void etcd_config(struct agent_config *cfg, const char *endpoint)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = AGENT_MODE_ETCD;
	cfg->endpoint = endpoint;
	cfg->run_id = "alone";
	cfg->node_id = "n0";
	cfg->nproc = 1;
	cfg->local_addr = "127.0.0.1";
	cfg->heartbeat_interval_ms = 500;
	cfg->heartbeat_timeout_ms = 5000;
	cfg->etcd.key_prefix = "/dlaunch";
	cfg->etcd.lease_ttl_s = 5;
}

/* etcd_params: the backend's parameters for node n0 (incarnation i0),
 * reporting to rec's loop */
static void etcd_params(struct agent_rdzv_params *p, struct event_base *base,
			const struct agent_config *cfg, struct recorder *rec)
{
	memset(p, 0, sizeof(*p));
	p->base = base;
	p->cfg = cfg;
	p->node_id = "n0";
	p->incarnation = "i0";
	p->loop = rec->loop;
}

/* The etcd backend made with the recorder as its loop: a leave before
 * any join (no lease yet: nothing to revoke) is answered at once, to
 * that loop. */
static void test_etcd_backend_posts_to_its_loop(void **state)
{
	struct event_base *base = event_base_new();
	struct agent_config cfg;
	struct agent_rdzv_params p;
	struct recorder rec;
	struct agent_rdzv *r = NULL;
	char err[256] = "";
	(void)state;
	assert_non_null(base);
	recorder_init(&rec);
	etcd_config(&cfg, "127.0.0.1:2379");
	etcd_params(&p, base, &cfg, &rec);
	assert_int_equal(agent_rdzv_etcd_new(&p, &r, err, sizeof(err)), 0);
	assert_non_null(r);
	assert_ptr_equal(r->loop.ctx, &rec);
	assert_ptr_equal(r->loop.current, &rec.current);
	assert_string_equal(r->addr, "127.0.0.1");
	assert_non_null(r->ops->hang_open);
	r->ops->leave(r);
	assert_int_equal(rec.n, 1);
	assert_int_equal(rec.ev[0].kind, AGENT_EV_LEFT);
	r->ops->free(r);
	event_base_free(base);
}

static void test_etcd_backend_refuses_a_bad_endpoint(void **state)
{
	struct event_base *base = event_base_new();
	struct agent_config cfg;
	struct agent_rdzv_params p;
	struct recorder rec;
	struct agent_rdzv *r = NULL;
	char err[256] = "";
	(void)state;
	assert_non_null(base);
	recorder_init(&rec);
	etcd_config(&cfg, "127.0.0.1:notaport");
	etcd_params(&p, base, &cfg, &rec);
	assert_int_not_equal(agent_rdzv_etcd_new(&p, &r, err, sizeof(err)), 0);
	assert_null(r);
	assert_non_null(strstr(err, "notaport"));
	assert_int_equal(rec.n, 0);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_action_posts_restart_or_stop),
	    cmocka_unit_test(test_preempt_posts_the_stop_step),
	    cmocka_unit_test(test_joined_reads_the_assignment),
	    cmocka_unit_test(test_joined_refuses_a_bad_assignment),
	    cmocka_unit_test(test_etcd_backend_posts_to_its_loop),
	    cmocka_unit_test(test_etcd_backend_refuses_a_bad_endpoint),
	};
	log_set_level(LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
