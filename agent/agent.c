/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.c - one node's agent: the round loop (fsm.c) wired to the world.
 *
 * The loop decides; this file gives it its effects: the workers
 * (workers.c), a rendezvous backend (rdzv/rdzv.h, chosen from the table
 * below by the agent's mode), the root-cause report and the end of the
 * event loop. Signals to the agent and child exits arrive as libevent
 * signal events and become events of the loop.
 */
#include <errno.h>
#include <event2/event.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "internal.h"
#include "rdzv/addr.h"

/* The rendezvous backends, by the agent's mode. */
static const struct {
	enum agent_mode mode;
	agent_rdzv_new_fn make;
} backends[] = {
    {AGENT_MODE_STATIC, agent_rdzv_static_new},
    {AGENT_MODE_RDZV, agent_rdzv_http_new},
    {AGENT_MODE_ETCD, agent_rdzv_etcd_new},
};

/* ------------------------------------------------------------ effects */

static void fx_start_workers(void *ctx, const struct agent_round *r)
{
	(void)r; /* the same as a->fsm.r, which the workers read */
	workers_start(ctx);
}

static void fx_stop_workers(void *ctx, int sig)
{
	struct agent *a = ctx;
	/* after a hang's verdict in this round nothing graceful can happen:
	 * ranks stuck in a collective never reach the step boundary that a
	 * SIGTERM (a notice of preemption to dlaunch-train) waits for, and
	 * the stacks are taken; SIGKILL at once, not --shutdown-timeout
	 * later (docs/hangs.md) */
	if (sig == SIGTERM && hang_round_hung(a)) {
		log_info("stopping this node's workers with SIGKILL: the hang "
			 "diagnosis of round %llu is done, and ranks stuck in "
			 "a collective cannot end gracefully",
			 (unsigned long long)a->fsm.r.round);
		sig = SIGKILL;
	}
	/* a worker that took a SIGTERM as a notice of preemption takes
	 * this one as its end: its channel is closed first */
	control_hang_up(ctx);
	workers_stop(ctx, sig);
}

static void fx_kill_workers(void *ctx)
{
	workers_kill_all(ctx);
}

static struct agent_rdzv *rdzv_of(void *ctx)
{
	return ((struct agent *)ctx)->rdzv;
}

static void fx_join(void *ctx)
{
	rdzv_of(ctx)->ops->join(rdzv_of(ctx));
}

static void fx_round_begin(void *ctx, uint64_t round)
{
	rdzv_of(ctx)->ops->round_begin(rdzv_of(ctx), round);
}

static void fx_round_end(void *ctx)
{
	rdzv_of(ctx)->ops->round_end(rdzv_of(ctx));
}

static void fx_report(void *ctx, uint64_t round, int failed, json_t *failures)
{
	rdzv_of(ctx)->ops->report(rdzv_of(ctx), round, failed, failures);
}

static void fx_cancel(void *ctx)
{
	rdzv_of(ctx)->ops->cancel(rdzv_of(ctx));
}

static void fx_leave(void *ctx)
{
	rdzv_of(ctx)->ops->leave(rdzv_of(ctx));
}

static void fx_status(void *ctx)
{
	rdzv_of(ctx)->ops->status(rdzv_of(ctx));
}

static void fx_print_report(void *ctx, json_t *job_failures,
			    json_t *own_failures)
{
	struct agent *a = ctx;
	json_t *f =
	    json_is_array(job_failures) && json_array_size(job_failures) > 0
		? job_failures
		: own_failures;
	report_print(a->cfg.run_id, f, (int)json_array_size(f),
		     hang_last_reason(a));
}

static void fx_finish(void *ctx)
{
	struct agent *a = ctx;
	a->rdzv->ops->cancel(a->rdzv);
	/* a hang diagnosis under way ends first (its phases are bounded):
	 * this node's verdict is printed even when the job ended meanwhile,
	 * but not after a signal to us */
	if (hang_busy(a) && a->fsm.exit_status < 128) {
		log_info("the job is over; finishing the hang diagnosis first");
		a->exit_after_hang = 1;
		return;
	}
	event_base_loopexit(a->base, NULL);
}

static int fx_in_place(void *ctx)
{
	return control_in_place(ctx);
}

static void fx_abort_workers(void *ctx, uint64_t round, const char *reason)
{
	control_abort(ctx, round, reason);
}

static void fx_reform_workers(void *ctx, const struct agent_round *r)
{
	(void)r; /* the same as a->fsm.r, which the workers read */
	workers_reform(ctx);
}

static void fx_entered(void *ctx)
{
	if (rdzv_of(ctx)->ops->entered)
		rdzv_of(ctx)->ops->entered(rdzv_of(ctx));
}

static int fx_preempt_ok(void *ctx)
{
	return preempt_ok(ctx);
}

static void fx_preempt_ask(void *ctx)
{
	preempt_ask(ctx);
}

static void fx_preempt_workers(void *ctx, uint64_t step)
{
	preempt_workers(ctx, step);
}

static void fx_preempt_grace(void *ctx)
{
	preempt_grace(ctx);
}

static const struct agent_fsm_ops effects = {
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
    .preempt_ok = fx_preempt_ok,
    .preempt_ask = fx_preempt_ask,
    .preempt_workers = fx_preempt_workers,
    .preempt_grace = fx_preempt_grace,
};

/* ------------------------------------------------------------ signals */

static void on_sigchld(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	workers_on_sigchld(arg);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct agent *a = arg;
	struct agent_event ev;
	(void)what;
	if (preempt_signal_repeated(a, (int)sig))
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_SIGNAL;
	ev.sig = (int)sig;
	agent_fsm_post(&a->fsm, &ev);
}

/* ---------------------------------------------------------- lifecycle */

static void new_incarnation(char out[17])
{
	unsigned char rnd[8];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t x = clock_now_ns() ^ ((uint64_t)getpid() << 32);
		memcpy(rnd, &x, sizeof(rnd));
	}
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", rnd[i]);
}

/* socket_ifname: where the host name resolves to loopback only, the
 * workers' gloo and NCCL bootstrap would bind it and no other node could
 * reach them: they get the interface of the node's address instead
 * (agent_addr_socket_ifname), unless the user set both variables. */
static void socket_ifname(struct agent *a)
{
	char host_addrs[16][AGENT_ADDR_MAX], host[256];
	const char *hp[16];
	struct agent_addr_if ifs[32];
	size_t nh, ni;
	const char *ann = a->rdzv->addr;
	/* standalone announces loopback: no host name lookup for nothing */
	if (!ann || !ann[0] || agent_addr_is_loopback(ann) ||
	    (getenv("GLOO_SOCKET_IFNAME") && getenv("NCCL_SOCKET_IFNAME")))
		return;
	nh = agent_addr_host_addrs(host_addrs, 16, host, sizeof(host));
	for (size_t i = 0; i < nh; i++)
		hp[i] = host_addrs[i];
	ni = agent_addr_interface_list(ifs, 32);
	if (!agent_addr_socket_ifname(ann, hp, nh, ifs, ni, a->socket_ifname,
				      sizeof(a->socket_ifname)))
		return;
	snprintf(a->socket_why, sizeof(a->socket_why),
		 "workers get %s=%s, the interface of this node's address "
		 "%s: host name %s %s, where gloo and NCCL would bind loopback",
		 getenv("GLOO_SOCKET_IFNAME")	? "NCCL_SOCKET_IFNAME"
		 : getenv("NCCL_SOCKET_IFNAME") ? "GLOO_SOCKET_IFNAME"
						: "GLOO_SOCKET_IFNAME and "
						  "NCCL_SOCKET_IFNAME",
		 a->socket_ifname, ann, host,
		 nh ? "resolves to loopback only" : "does not resolve");
}

static int new_backend(struct agent *a, char *err, size_t err_size)
{
	struct agent_rdzv_params p = {.base = a->base,
				      .cfg = &a->cfg,
				      .node_id = a->node_id,
				      .incarnation = a->incarnation};
	agent_fsm_rdzv_loop(&a->fsm, &p.loop);
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i].mode == a->cfg.mode)
			return backends[i].make(&p, &a->rdzv, err, err_size);
	snprintf(err, err_size, "no rendezvous backend for mode %d",
		 (int)a->cfg.mode);
	return DL_EINVAL;
}

int agent_new(struct event_base *base, const struct agent_config *cfg,
	      struct agent **out, char *err, size_t err_size)
{
	struct agent *a = calloc(1, sizeof(*a));
	int rc;
	if (!a)
		return DL_ENOMEM;
	a->base = base;
	a->cfg = *cfg;
	new_incarnation(a->incarnation);
	snprintf(a->node_id, sizeof(a->node_id), "%s",
		 cfg->node_id ? cfg->node_id : "node");
	a->sigchld = evsignal_new(base, SIGCHLD, on_sigchld, a);
	if (agent_fsm_init(&a->fsm, &effects, a, a->cfg.run_id, a->cfg.nproc) !=
		0 ||
	    !a->sigchld) {
		agent_free(a);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	rc = new_backend(a, err, err_size);
	if (rc) {
		agent_free(a);
		return rc;
	}
	socket_ifname(a);
	if (hang_new(a) != 0) {
		agent_free(a);
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	*out = a;
	return 0;
}

static int add_signals(struct agent *a)
{
	int n = 0;
	for (const int *s = a->cfg.signals; s && *s; s++)
		n++;
	a->sigs = calloc((size_t)n + 1, sizeof(*a->sigs));
	if (!a->sigs)
		return DL_ENOMEM;
	for (int i = 0; i < n; i++) {
		a->sigs[i] =
		    evsignal_new(a->base, a->cfg.signals[i], on_signal, a);
		if (!a->sigs[i])
			return DL_ENOMEM;
		a->n_sigs = i + 1;
		evsignal_add(a->sigs[i], NULL);
	}
	return 0;
}

static int make_log_dir(struct agent *a, char *err, size_t err_size)
{
	const char *tmp = getenv("TMPDIR");
	if (a->cfg.log_dir) {
		snprintf(a->log_dir, sizeof(a->log_dir), "%s", a->cfg.log_dir);
		return 0;
	}
	snprintf(a->log_dir, sizeof(a->log_dir), "%s/dlaunch-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(a->log_dir)) {
		snprintf(err, err_size,
			 "cannot create a temporary log directory: %s",
			 strerror(errno));
		return DL_ESYS;
	}
	a->log_dir_temp = 1;
	return 0;
}

int agent_start(struct agent *a, char *err, size_t err_size)
{
	int rc;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		log_warn("cannot become a child subreaper: %s; workers' "
			 "daemonised children may outlive the job",
			 strerror(errno));
	/* before anything is spawned: what an earlier agent of the job left
	 * ends here, and nothing of ours may outlive us from now on */
	rc = keeper_start(a->cfg.run_id, &a->keeper);
	if (rc) {
		snprintf(err, err_size, "out of memory");
		return rc;
	}
	evsignal_add(a->sigchld, NULL);
	rc = add_signals(a);
	if (rc) {
		snprintf(err, err_size, "out of memory");
		return rc;
	}
	rc = make_log_dir(a, err, err_size);
	if (rc)
		return rc;
	/* plain Python workers' stacks on SIGUSR2 (docs/hangs.md) */
	if (hang_site_dir(a->log_dir, a->site_dir, sizeof(a->site_dir)) != 0)
		a->site_dir[0] = '\0';
	agent_fsm_post_kind(&a->fsm, AGENT_EV_START, 0);
	return 0;
}

int agent_exit_status(const struct agent *a)
{
	return a->fsm.exit_status;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void agent_free(struct agent *a)
{
	if (!a)
		return;
	if (a->n_live > 0) {
		workers_kill_all(a);
		/* they die at once; reap so nothing is left as a zombie */
		for (int i = 0; i < a->n_workers; i++)
			if (a->workers[i].pid > 0 && !a->workers[i].reaped)
				waitpid(a->workers[i].pid, NULL, 0);
	}
	workers_free(a);
	hang_free(a);
	control_release(a);
	keeper_free(a->keeper);
	a->keeper = NULL;
	if (a->rdzv)
		a->rdzv->ops->free(a->rdzv);
	if (a->kill_timer)
		event_free(a->kill_timer);
	progress_release(a);
	preempt_release(a);
	if (a->sigchld)
		event_free(a->sigchld);
	for (int i = 0; i < a->n_sigs; i++)
		event_free(a->sigs[i]);
	free(a->sigs);
	agent_fsm_release(&a->fsm);
	if (a->log_dir_temp && !a->hang_kept && a->cfg.redirects.all < 0 &&
	    a->cfg.redirects.n == 0 && a->cfg.tee.all < 0 && a->cfg.tee.n == 0)
		nftw(a->log_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(a);
}
