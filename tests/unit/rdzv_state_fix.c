/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_state_fix.c - the helpers of rdzv_state_fix.h: nodes of job
 * "job1" and their events on a rendezvous state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "rdzv_state_fix.h"

char err[256];

struct rdzv_job_config config(uint32_t min, uint32_t max, uint32_t restarts)
{
	struct rdzv_job_config c;
	rdzv_job_config_init(&c);
	c.min_nodes = min;
	c.max_nodes = max;
	c.max_restarts = restarts;
	c.last_call_timeout_ms = 1000;
	c.heartbeat_timeout_ms = 2000;
	c.join_timeout_ms = 10000;
	return c;
}

struct rdzv_node_info node(const char *id, uint32_t nproc)
{
	struct rdzv_node_info n;
	memset(&n, 0, sizeof(n));
	snprintf(n.node_id, sizeof(n.node_id), "%s", id);
	snprintf(n.incarnation, sizeof(n.incarnation), "inc-%s", id);
	snprintf(n.addr, sizeof(n.addr), "10.0.0.%d", id[strlen(id) - 1]);
	n.nproc = nproc;
	n.master_port = 29500 + (uint16_t)id[strlen(id) - 1];
	return n;
}

int join(struct rdzv_state *st, const struct rdzv_job_config *c, const char *id,
	 uint32_t nproc, uint64_t now)
{
	struct rdzv_node_info n = node(id, nproc);
	struct rdzv_reply r;
	return rdzv_join(st, "job1", &n, c, 1, now, &r, err, sizeof(err));
}

int check(struct rdzv_state *st, const char *id)
{
	struct rdzv_reply r;
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_join_check(st, "job1", id, inc, &r, err, sizeof(err));
}

json_int_t field(const struct rdzv_state *st, const char *id, const char *key)
{
	json_t *a = rdzv_assignment_json(st, "job1", id);
	json_int_t v;
	assert_non_null(a);
	v = json_integer_value(json_object_get(a, key));
	json_decref(a);
	return v;
}

const char *state_of(const struct rdzv_state *st)
{
	static char buf[32];
	json_t *d = rdzv_job_detail_json(st, "job1", 0);
	assert_non_null(d);
	snprintf(buf, sizeof(buf), "%s",
		 json_string_value(json_object_get(d, "state")));
	json_decref(d);
	return buf;
}

int hb(struct rdzv_state *st, const char *id, uint64_t round, uint64_t now,
       struct rdzv_reply *r)
{
	char inc[80];
	snprintf(inc, sizeof(inc), "inc-%s", id);
	return rdzv_heartbeat(st, "job1", id, inc, round, now, r, err,
			      sizeof(err));
}

int report(struct rdzv_state *st, const char *id, uint64_t round, int ok,
	   uint64_t now, struct rdzv_reply *r)
{
	char inc[80];
	json_t *f = json_pack("[{s:i, s:i, s:s}]", "rank", 0, "exitcode", 1,
			      "message", "boom");
	int rc;
	snprintf(inc, sizeof(inc), "inc-%s", id);
	rc = rdzv_report(st, "job1", id, inc, round, ok, ok ? NULL : f, now, r,
			 err, sizeof(err));
	json_decref(f);
	return rc;
}

void drain(struct rdzv_state *st)
{
	char name[RDZV_NAME_MAX + 1];
	while (rdzv_state_pop_changed(st, name))
		;
}

struct rdzv_state *running(uint32_t min, uint32_t max, uint32_t restarts, int n)
{
	struct rdzv_state *st = rdzv_state_new(NULL);
	struct rdzv_job_config c = config(min, max, restarts);
	char id[16]; /* "n" and any int */
	for (int i = 1; i <= n; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		join(st, &c, id, 2, 0);
	}
	rdzv_state_tick(st, 1000);
	assert_string_equal(state_of(st), "RUNNING");
	/* every member beats at 1000: their deadlines are 3000 */
	for (int i = 1; i <= n; i++) {
		struct rdzv_reply r;
		snprintf(id, sizeof(id), "n%d", i);
		hb(st, id, 1, 1000, &r); /* spares get 409: fine */
	}
	drain(st);
	return st;
}
