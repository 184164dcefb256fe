/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load_sim.c - a process of etcd_load's simulated nodes: each node
 * the agent's etcd backend and round loop, with effects that start no
 * process, on one event loop shared by the nodes [lo, hi). Commands and
 * reports travel as lines on pipes to and from the driver.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/etcd/etcd_client.h"
#include "../agent/etcd/etcd_leader.h"
#include "../agent/etcd/rdzv_etcd.h"
#include "../agent/fsm.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#include "etcd_load.h"

/* ================================================================ nodes
 * A child process: the simulated nodes [lo, hi) on one event loop. It
 * reports each round a node is given ("J idx round rank nnodes t_ns"), its
 * workers stopped ("S idx t_ns": it heard that its round is over) and
 * a node's loop ending ("F idx status"); it obeys "G" (start them all),
 * "K idx" (drop that node) and "Q" (or the end of its input: exit). */

struct child;

struct sim {
	struct child *ch;
	int idx;
	char node_id[32];
	char inc[48];
	char endpoints[ENDPOINTS_MAX];
	struct agent_config cfg;
	struct agent_fsm fsm;
	struct agent_rdzv *r;
	int dead;
};

struct child {
	const struct opts *o;
	struct event_base *base;
	int lo, hi;
	int cmd_fd, rep_fd;
	struct sim *sims;
	struct lines in;
	struct event *cmd_ev;
};

static void fx_start_workers(void *ctx, const struct agent_round *r)
{
	struct sim *s = ctx;
	write_line(s->ch->rep_fd, "J %d %llu %d %d %llu\n", s->idx,
		   (unsigned long long)r->round, r->node_rank, r->nnodes,
		   (unsigned long long)clock_now_ns());
}

static void fx_stop_workers(void *ctx, int sig)
{
	struct sim *s = ctx;
	(void)sig;
	write_line(s->ch->rep_fd, "S %d %llu\n", s->idx,
		   (unsigned long long)clock_now_ns());
	/* no process to wait for: gone at once */
	agent_fsm_post_kind(&s->fsm, AGENT_EV_WORKERS_GONE, 0);
}

static void fx_kill_workers(void *ctx)
{
	(void)ctx;
}

static void fx_join(void *ctx)
{
	struct sim *s = ctx;
	s->r->ops->join(s->r);
}

static void fx_round_begin(void *ctx, uint64_t round)
{
	struct sim *s = ctx;
	s->r->ops->round_begin(s->r, round);
}

static void fx_round_end(void *ctx)
{
	struct sim *s = ctx;
	s->r->ops->round_end(s->r);
}

static void fx_report(void *ctx, uint64_t round, int failed, json_t *failures)
{
	struct sim *s = ctx;
	s->r->ops->report(s->r, round, failed, failures);
}

static void fx_cancel(void *ctx)
{
	struct sim *s = ctx;
	s->r->ops->cancel(s->r);
}

static void fx_leave(void *ctx)
{
	struct sim *s = ctx;
	s->r->ops->leave(s->r);
}

static void fx_status(void *ctx)
{
	struct sim *s = ctx;
	s->r->ops->status(s->r);
}

static void fx_print_report(void *ctx, json_t *job_failures,
			    json_t *own_failures)
{
	(void)ctx;
	(void)job_failures;
	(void)own_failures;
}

/* a simulated node has no worker to declare abort and membership: a
 * round that ends restarts it, as it restarts a real agent's workers that
 * did not declare them */
static int fx_in_place(void *ctx)
{
	(void)ctx;
	return 0;
}

static void fx_abort_workers(void *ctx, uint64_t round, const char *reason)
{
	(void)ctx;
	(void)round;
	(void)reason;
}

static void fx_reform_workers(void *ctx, const struct agent_round *r)
{
	(void)ctx;
	(void)r;
}

/* the node's workers entered a round: the backend says how, as a real
 * agent's does (after a restart, one more write of the node key) */
static void fx_entered(void *ctx)
{
	struct sim *s = ctx;
	if (s->r->ops->entered)
		s->r->ops->entered(s->r);
}

/* the node's loop is over: only a failed join or the job's end lead here,
 * and neither belongs in this benchmark */
static void fx_finish(void *ctx)
{
	struct sim *s = ctx;
	write_line(s->ch->rep_fd, "F %d %d\n", s->idx, s->fsm.exit_status);
}

static const struct agent_fsm_ops sim_ops = {
    .start_workers = fx_start_workers,
    .stop_workers = fx_stop_workers,
    .kill_workers = fx_kill_workers,
    .join = fx_join,
    .round_begin = fx_round_begin,
    .round_end = fx_round_end,
    .report = fx_report,
    .cancel = fx_cancel,
    .leave = fx_leave,
    .status = fx_status,
    .print_report = fx_print_report,
    .entered = fx_entered,
    .finish = fx_finish,
    .in_place = fx_in_place,
    .abort_workers = fx_abort_workers,
    .reform_workers = fx_reform_workers,
};

static void rotated(const struct opts *o, int by, char *out, size_t size)
{
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; i < o->eps.n; i++) {
		const char *u = o->eps.url[(i + (size_t)by) % o->eps.n];
		k += (size_t)snprintf(out + k, size - k, "%s%s", i ? "," : "",
				      u);
		if (k >= size)
			die("endpoint list too long");
	}
}

/* base_config: what the command line of a real agent would give */
void base_config(const struct opts *o, struct agent_config *cfg)
{
	agent_config_init(cfg);
	cfg->mode = AGENT_MODE_ETCD;
	cfg->endpoint = o->endpoints;
	cfg->run_id = o->job;
	cfg->nproc = 1;
	cfg->min_nodes = o->min_nodes;
	cfg->max_nodes = o->nodes;
	cfg->local_addr = "127.0.0.1";
	cfg->last_call_timeout_ms = o->last_call_ms;
	cfg->heartbeat_interval_ms = 500;
	cfg->heartbeat_timeout_ms = (uint64_t)o->lease_ttl_s * 1000;
	cfg->etcd.key_prefix = "/dlaunch";
	cfg->etcd.lease_ttl_s = o->lease_ttl_s;
}

static void sim_make(struct child *ch, struct sim *s, int idx)
{
	struct agent_rdzv_params p;
	char err[512];
	s->ch = ch;
	s->idx = idx;
	snprintf(s->node_id, sizeof(s->node_id), "sim%05d", idx);
	snprintf(s->inc, sizeof(s->inc), "i%d-%d-%llx", (int)getpid(), idx,
		 (unsigned long long)clock_now_ns());
	base_config(ch->o, &s->cfg);
	if (ch->o->rotate) {
		rotated(ch->o, idx, s->endpoints, sizeof(s->endpoints));
		s->cfg.endpoint = s->endpoints;
	}
	s->cfg.node_id = s->node_id;
	if (agent_fsm_init(&s->fsm, &sim_ops, s, ch->o->job, 1) != 0)
		die("out of memory");
	memset(&p, 0, sizeof(p));
	p.base = ch->base;
	p.cfg = &s->cfg;
	p.node_id = s->node_id;
	p.incarnation = s->inc;
	agent_fsm_rdzv_loop(&s->fsm, &p.loop);
	if (agent_rdzv_etcd_new(&p, &s->r, err, sizeof(err)) != 0) {
		fprintf(stderr, "etcd_load: node %d: %s\n", idx, err);
		exit(1);
	}
}

/* sim_kill: the node is gone as kill -9 leaves it: no leave, no revoke;
 * its connections close with its client */
static void sim_kill(struct sim *s)
{
	if (s->dead)
		return;
	s->dead = 1;
	s->r->ops->free(s->r);
	s->r = NULL;
}

static void on_command(void *arg, char *line)
{
	struct child *ch = arg;
	int idx;
	if (strcmp(line, "G") == 0) {
		for (int i = 0; i < ch->hi - ch->lo; i++)
			agent_fsm_post_kind(&ch->sims[i].fsm, AGENT_EV_START,
					    0);
	} else if (strncmp(line, "K ", 2) == 0 &&
		   parse_int(line + 2, ch->lo, ch->hi - 1, &idx) == 0) {
		sim_kill(&ch->sims[idx - ch->lo]);
	} else {
		event_base_loopbreak(ch->base);
	}
}

static void on_cmd_ev(evutil_socket_t fd, short what, void *arg)
{
	struct child *ch = arg;
	(void)what;
	if (read_lines(fd, &ch->in, on_command, ch) != 0)
		event_base_loopbreak(ch->base);
}

int child_main(const struct opts *o, int lo, int hi, int cmd_fd, int rep_fd)
{
	static struct child c;
	struct child *ch = &c;
	ch->o = o;
	ch->lo = lo;
	ch->hi = hi;
	ch->cmd_fd = cmd_fd;
	ch->rep_fd = rep_fd;
	log_set_level(o->level);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ch->base = event_base_new();
	ch->sims = calloc((size_t)(hi - lo), sizeof(*ch->sims));
	if (!ch->base || !ch->sims)
		die("out of memory");
	ch->cmd_ev =
	    event_new(ch->base, cmd_fd, EV_READ | EV_PERSIST, on_cmd_ev, ch);
	if (!ch->cmd_ev || event_add(ch->cmd_ev, NULL) != 0)
		die("out of memory");
	for (int i = lo; i < hi; i++)
		sim_make(ch, &ch->sims[i - lo], i);
	write_line(rep_fd, "R\n");
	event_base_dispatch(ch->base);
	for (int i = 0; i < hi - lo; i++) {
		if (!ch->sims[i].dead)
			ch->sims[i].r->ops->free(ch->sims[i].r);
		agent_fsm_release(&ch->sims[i].fsm);
	}
	event_free(ch->cmd_ev);
	event_base_free(ch->base);
	free(ch->sims);
	curl_global_cleanup();
	return 0;
}
