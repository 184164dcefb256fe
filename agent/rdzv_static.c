/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_static.c - the static rendezvous: no server.
 *
 * The node's place comes from the command line (--nnodes, --node-rank,
 * --master-addr, --master-port), as with torchrun's static backend, and
 * the agent decides restarts alone: a failure report is answered with a
 * restart while this node's --max-restarts allow one, else with the end
 * of the job. Every answer is posted at once; the loop handles it after
 * the request's own event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "backends.h"
#include "rdzv/addr.h"

struct rdzv_static {
	struct agent_rdzv base;
	const struct agent_config *cfg;
	int restart_count;
	int joins;
	char addr[AGENT_ADDR_MAX]; /* the route to the master; "": none */
};

static void static_join(struct agent_rdzv *r)
{
	struct rdzv_static *s = (struct rdzv_static *)r;
	const struct agent_config *cfg = s->cfg;
	struct agent_event ev;
	if (s->joins++ > 0) {
		s->restart_count++;
		log_info("restarting workers (restart %d of %d)",
			 s->restart_count, cfg->max_restarts);
	}
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_JOINED;
	ev.assign.node_rank = cfg->node_rank;
	ev.assign.nnodes = cfg->nnodes;
	ev.assign.world_size = cfg->nnodes * cfg->nproc;
	ev.assign.rank_offset = cfg->node_rank * cfg->nproc;
	ev.assign.restart_count = s->restart_count;
	snprintf(ev.assign.master_addr, sizeof(ev.assign.master_addr), "%s",
		 cfg->master_addr);
	ev.assign.master_port = cfg->master_port;
	agent_rdzv_post(r, &ev);
}

static void static_nothing(struct agent_rdzv *r)
{
	(void)r;
}

static void static_round_begin(struct agent_rdzv *r, uint64_t round)
{
	(void)r;
	(void)round;
}

static void static_report(struct agent_rdzv *r, uint64_t round, int failed,
			  json_t *failures)
{
	struct rdzv_static *s = (struct rdzv_static *)r;
	(void)failures;
	if (!failed) {
		agent_rdzv_post_action(r, round, "stop", "SUCCEEDED");
	} else if (s->restart_count < s->cfg->max_restarts) {
		agent_rdzv_post_kind(r, AGENT_EV_RESTART, round);
	} else {
		log_error("job %s failed: no restarts left (%d)",
			  s->cfg->run_id, s->cfg->max_restarts);
		agent_rdzv_post_action(r, round, "stop", "FAILED");
	}
	agent_rdzv_post_kind(r, AGENT_EV_REPORT_DONE, round);
}

static void static_leave(struct agent_rdzv *r)
{
	agent_rdzv_post_kind(r, AGENT_EV_LEFT, 0);
}

/* the job's record is this node's own: the loop prints those failures */
static void static_status(struct agent_rdzv *r)
{
	agent_rdzv_post_kind(r, AGENT_EV_STATUS, 0);
}

static void static_free(struct agent_rdzv *r)
{
	free(r);
}

static const struct agent_rdzv_ops static_ops = {
    .name = "static",
    .join = static_join,
    .round_begin = static_round_begin,
    .round_end = static_nothing,
    .report = static_report,
    .cancel = static_nothing,
    .leave = static_leave,
    .status = static_status,
    .free = static_free,
};

int agent_rdzv_static_new(const struct agent_rdzv_params *p,
			  struct agent_rdzv **out, char *err, size_t err_size)
{
	struct rdzv_static *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	s->base.ops = &static_ops;
	s->base.loop = p->loop;
	s->cfg = p->cfg;
	/* nothing is announced; the address this node reaches the master
	 * from stands for it (the master's own when this node is it) */
	if (p->cfg->nnodes > 1 && p->cfg->master_addr) {
		agent_rdzv_route_addr(p->cfg->master_addr, p->cfg->master_port,
				      s->addr, sizeof(s->addr));
		s->base.addr = s->addr;
	}
	*out = &s->base;
	return 0;
}
