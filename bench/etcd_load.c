/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load.c - load generator for dlaunch's etcd backend: many simulated
 * agents joining one job through a real etcd, then the job's leader lost.
 *
 *   etcd_load --endpoints 127.0.0.1:P0,127.0.0.1:P1,... --nodes 1024
 *             [--job NAME] [--min-nodes N] [--lease-ttl 2]
 *             [--last-call-ms 1000] [--timeout 120] [--no-takeover]
 *             [--idle-ms MS] [--etcd-pids PID,...] [--procs P]
 *             [--rotate] [--log-level warn]
 *
 * Each simulated node is a real agent without workers: the etcd backend
 * of agent/etcd/rdzv_etcd.c (agent_rdzv_etcd_new: its own etcd client, lease,
 * node key, inbox read and watch, campaign for the leader key, leader
 * watch; the node that wins the campaign runs etcd_leader.c, as a real
 * agent would) driven by the agent's own round loop (fsm.c), whose
 * effects start no process: start_workers records the round the node was
 * given, stop_workers says at once that its workers are gone. So a node
 * makes exactly the requests a dlaunch agent makes.
 *
 * The nodes share event loops in --procs processes (default: as few as
 * the open-file limit allows; a node holds about 9 descriptors: its
 * client's three curl multi handles, each with its wake-up socket pair,
 * and its connections, two of them watch streams). This process forks
 * them, starts them all at the same moment and collects what each node
 * got; CLOCK_MONOTONIC is one clock for all of them.
 *
 * Phases:
 *   1. first round: every node is made (not timed), then all are started
 *      at once; join_ms is the time from the start to the last node's
 *      round (JOINED). The assignments are checked: one round, world size
 *      N, node ranks 0..N-1 each exactly once. etcd's own counters
 *      (/metrics of every member) are read just before the start and just
 *      after the last JOINED: their difference is what N joins cost.
 *   (idle, with --idle-ms): every node in its round, nothing happening but
 *      the leases' keep-alives, for MS: etcd's counters over that window
 *      and the CPU time etcd (--etcd-pids) and these processes used in it
 *      say what a job of N nodes costs etcd while it runs.
 *   2. takeover (unless --no-takeover): the node that holds the leader key
 *      is dropped without a word, as kill -9 would leave it (its
 *      connections close, its lease is not revoked and expires after the
 *      TTL). Timed from the drop: the leader key deleted (the lease
 *      expired), a new leader key written (by whom), and every survivor
 *      in a new round (which needs --min-nodes <= N-1).
 *
 * --rotate gives node i the endpoint list rotated by i (real agents given
 * the same list all start on its first member).
 *
 * The result is one JSON object on stdout; exit status 0 when every phase
 * completed and was checked, 1 otherwise (the reason on stderr).
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

#define MAX_NODES     100000
#define MAX_PROCS     64
#define ENDPOINTS_MAX 4096
#define FDS_PER_NODE  12 /* 9 measured, and room for the leader's */
#define LINE_MAX_LEN  256

static void die(const char *msg)
{
	fprintf(stderr, "etcd_load: %s\n", msg);
	exit(1);
}

/* What the command line says; the same in every process. */
struct opts {
	char endpoints[ENDPOINTS_MAX];
	struct agent_etcd_endpoints eps;
	char job[129];
	char prefix[256];
	int nodes, min_nodes, procs;
	unsigned lease_ttl_s;
	uint64_t last_call_ms;
	double timeout_s;
	int takeover, rotate;
	uint64_t idle_ms;
	int n_etcd_pids;
	pid_t etcd_pids[16];
	enum log_level level;
};

/* write_line writes one line whole (a pipe write under PIPE_BUF is) */
static void write_line(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void write_line(int fd, const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	int n;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line))
		die("line too long");
	while (write(fd, line, (size_t)n) < 0)
		if (errno != EINTR)
			die("a pipe to another etcd_load process broke");
}

/* Lines from a pipe, split as they arrive. */
struct lines {
	char buf[64 * 1024];
	size_t len;
};

/* read_lines reads what fd has and calls fn on each whole line; returns
 * 0, or -1 at the end of the stream */
static int read_lines(int fd, struct lines *in, void (*fn)(void *, char *),
		      void *arg)
{
	ssize_t n = read(fd, in->buf + in->len, sizeof(in->buf) - in->len);
	char *p, *nl;
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	if (n == 0)
		return -1;
	in->len += (size_t)n;
	p = in->buf;
	while ((nl = memchr(p, '\n', in->len - (size_t)(p - in->buf)))) {
		*nl = '\0';
		fn(arg, p);
		p = nl + 1;
	}
	in->len -= (size_t)(p - in->buf);
	memmove(in->buf, p, in->len);
	if (in->len == sizeof(in->buf))
		die("a line too long from another etcd_load process");
	return 0;
}

/* ================================================================ nodes
 * A child process: the simulated nodes [lo, hi) on one event loop. It
 * reports each round a node is given ("J idx round rank nnodes t_ns") and
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
static void base_config(const struct opts *o, struct agent_config *cfg)
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

static int child_main(const struct opts *o, int lo, int hi, int cmd_fd,
		      int rep_fd)
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

/* ======================================================= etcd's counters */

#define MAX_COUNTERS 64
struct counters {
	size_t n;
	char name[MAX_COUNTERS][96];
	double value[MAX_COUNTERS];
};

struct body {
	char *data;
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *d = realloc(b->data, b->len + size * n + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, p, size * n);
	b->len += size * n;
	d[b->len] = '\0';
	b->data = d;
	return size * n;
}

static void count(struct counters *c, const char *name, double v, int max)
{
	size_t i;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->name[i], name) == 0)
			break;
	if (i == c->n) {
		if (c->n == MAX_COUNTERS)
			return;
		snprintf(c->name[c->n], sizeof(c->name[0]), "%s", name);
		c->value[c->n++] = 0;
	}
	if (max)
		c->value[i] = v > c->value[i] ? v : c->value[i];
	else
		c->value[i] += v;
}

/* the method of a grpc_* line, or NULL */
static const char *grpc_method(const char *line, char *out, size_t size)
{
	const char *m = strstr(line, "grpc_method=\""), *e;
	if (!m)
		return NULL;
	m += strlen("grpc_method=\"");
	e = strchr(m, '"');
	if (!e || (size_t)(e - m) >= size)
		return NULL;
	memcpy(out, m, (size_t)(e - m));
	out[e - m] = '\0';
	return out;
}

/* take_line adds what one line of /metrics says to c: gRPC calls started
 * (the JSON gateway turns each HTTP request into one) and stream messages
 * received, by method, summed over the members; etcd's storage
 * operations (summed: a read counts on the member that served it, a
 * write on every member); the raft proposals committed (the most any
 * member has seen). */
static void take_line(struct counters *c, const char *line)
{
	static const char *const storage[] = {
	    "etcd_debugging_mvcc_put_total",
	    "etcd_debugging_mvcc_txn_total",
	    "etcd_debugging_mvcc_range_total",
	    "etcd_debugging_mvcc_delete_total",
	};
	char method[48], name[96];
	const char *sp = strrchr(line, ' ');
	double v;
	if (!sp || line[0] == '#')
		return;
	v = strtod(sp + 1, NULL);
	if (strncmp(line, "grpc_server_started_total{", 26) == 0 &&
	    grpc_method(line, method, sizeof(method))) {
		snprintf(name, sizeof(name), "started.%s", method);
		if (v > 0)
			count(c, name, v, 0);
		return;
	}
	if (strncmp(line, "grpc_server_msg_received_total{", 31) == 0 &&
	    grpc_method(line, method, sizeof(method)) &&
	    (strcmp(method, "LeaseKeepAlive") == 0 ||
	     strcmp(method, "Watch") == 0)) {
		snprintf(name, sizeof(name), "msg_received.%s", method);
		count(c, name, v, 0);
		return;
	}
	for (size_t i = 0; i < sizeof(storage) / sizeof(storage[0]); i++)
		if (strncmp(line, storage[i], strlen(storage[i])) == 0 &&
		    line[strlen(storage[i])] == ' ') {
			count(c, storage[i] + strlen("etcd_debugging_"), v, 0);
			return;
		}
	if (strncmp(line, "etcd_server_proposals_committed_total ", 38) == 0)
		count(c, "proposals_committed", v, 1);
}

/* scrape reads every member's /metrics (blocking: between phases, while
 * the nodes' loops run in their own processes) */
static int scrape(const struct opts *o, struct counters *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < o->eps.n; i++) {
		CURL *e = curl_easy_init();
		struct body b = {NULL, 0};
		char url[AGENT_ETCD_URL_MAX + 16];
		long status = 0;
		CURLcode rc;
		if (!e)
			return -1;
		snprintf(url, sizeof(url), "%s/metrics", o->eps.url[i]);
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		rc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(e);
		if (rc != CURLE_OK || status != 200 || !b.data) {
			free(b.data);
			return -1;
		}
		for (char *save = NULL, *line = strtok_r(b.data, "\n", &save);
		     line; line = strtok_r(NULL, "\n", &save))
			take_line(c, line);
		free(b.data);
	}
	return 0;
}

static json_t *counters_delta(const struct counters *a,
			      const struct counters *b)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < b->n; i++) {
		double was = 0;
		for (size_t j = 0; j < a->n; j++)
			if (strcmp(a->name[j], b->name[i]) == 0)
				was = a->value[j];
		if (b->value[i] - was != 0)
			json_object_set_new(o, b->name[i],
					    json_real(b->value[i] - was));
	}
	return o;
}

/* ============================================================ the driver
 * This process: forks the children, starts them, follows each node's
 * rounds, reads etcd's counters, and for the takeover finds the leader,
 * has it dropped and watches its key. */

enum phase { PH_FIRST = 1, PH_IDLE = 2, PH_TAKEOVER = 3, PH_DONE = 4 };

struct proc {
	pid_t pid;
	int lo, hi;
	int cmd_fd, rep_fd;
	struct lines in;
	struct event *ev;
	long hwm_bytes;
	int fds;
};

struct node_seen {
	uint64_t round;
	int rank, world;
	uint64_t join_ns; /* first round, from t0 */
	int reformed;
	int failed_phase; /* the phase its loop ended in; 0: it did not */
};

struct driver {
	const struct opts *o;
	struct event_base *base;
	struct proc procs[MAX_PROCS];
	int nprocs;
	struct node_seen *nodes;
	enum phase phase;
	int failed;
	char why[512];
	uint64_t t0_ns;
	int n_joined;
	int n_failed; /* nodes whose loop ended */
	uint64_t first_round;
	int world; /* of the first round */
	struct counters before, after;
	/* idle window */
	struct counters idle_after;
	uint64_t idle_t0_ns, idle_t1_ns;
	/* CPU seconds at the start, the first round, the idle window's end */
	double etcd_cpu[3], load_cpu[3];
	int idle_rounds; /* nodes given a new round while idle */
	/* takeover */
	struct agent_config obs_cfg;
	struct etcd_client *obs;
	struct etcd_call *obs_call;
	struct etcd_watch *obs_watch;
	int killed;
	char new_leader[64];
	uint64_t t_kill_ns, t_gone_ns, t_elected_ns, t_reformed_ns;
	int n_reformed;
	uint64_t new_round;
	struct event *timeout_ev, *next_ev, *idle_ev;
};

static const char *phase_name(int p)
{
	switch (p) {
	case PH_FIRST: return "first round";
	case PH_IDLE: return "idle";
	case PH_TAKEOVER: return "takeover";
	default: return "end";
	}
}

static void fail(struct driver *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail(struct driver *d, const char *fmt, ...)
{
	va_list ap;
	if (d->failed)
		return;
	d->failed = 1;
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	event_base_loopbreak(d->base);
}

static void phase_over(struct driver *d)
{
	event_active(d->next_ev, EV_TIMEOUT, 0);
}

/* survivors: the nodes that should be in a new round after the takeover */
static int survivors(const struct driver *d)
{
	return d->o->nodes - 1 - d->n_failed;
}

static void on_report(void *arg, char *line)
{
	struct driver *d = arg;
	unsigned long long round, t;
	int idx, rank, world, status;
	struct node_seen *n;
	if (sscanf(line, "F %d %d", &idx, &status) == 2 && idx >= 0 &&
	    idx < d->o->nodes) {
		/* a real agent would have exited: the others go on without
		 * it (min nodes is N-1), and the result says so */
		n = &d->nodes[idx];
		if (n->failed_phase)
			return;
		n->failed_phase = (int)d->phase;
		d->n_failed++;
		if (d->n_failed == 1)
			log_warn("node sim%05d ended (exit status %d) in phase "
				 "%d",
				 idx, status, (int)d->phase);
		if (d->phase == PH_FIRST && !n->join_ns &&
		    d->n_joined + d->n_failed == d->o->nodes)
			phase_over(d);
		else if (d->phase == PH_TAKEOVER && d->n_reformed > 0 &&
			 d->n_reformed >= survivors(d))
			phase_over(d);
		return;
	}
	if (sscanf(line, "J %d %llu %d %d %llu", &idx, &round, &rank, &world,
		   &t) != 5 ||
	    idx < 0 || idx >= d->o->nodes)
		return;
	n = &d->nodes[idx];
	n->round = round;
	n->rank = rank;
	n->world = world;
	if (d->phase == PH_FIRST) {
		if (!n->join_ns) {
			n->join_ns = t > d->t0_ns ? t - d->t0_ns : 1;
			if (++d->n_joined + d->n_failed == d->o->nodes)
				phase_over(d);
		}
	} else if (d->phase == PH_IDLE && round > d->first_round) {
		d->idle_rounds++;
	} else if (d->phase == PH_TAKEOVER && round > d->first_round &&
		   !n->reformed && idx != d->killed) {
		n->reformed = 1;
		if (!d->new_round)
			d->new_round = round;
		if (++d->n_reformed == survivors(d)) {
			d->t_reformed_ns = t;
			phase_over(d);
		}
	}
}

static struct driver *the_driver;

static void on_rep(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	(void)what;
	if (read_lines(fd, &p->in, on_report, the_driver) != 0) {
		event_del(p->ev);
		fail(the_driver, "simulated nodes %d-%d: their process ended",
		     p->lo, p->hi - 1);
	}
}

/* check_first: one round; its size W between the nodes that got it and N
 * (an agent whose loop ended may have been counted in before it ended);
 * ranks below W, each once */
static int check_first(struct driver *d)
{
	int ok = 1, world = 0;
	unsigned char *seen;
	if (d->n_joined == 0) {
		fail(d, "no node had a round (%d nodes' loops ended)",
		     d->n_failed);
		return 0;
	}
	seen = calloc((size_t)d->o->nodes, 1);
	if (!seen)
		die("out of memory");
	d->first_round = 0;
	for (int i = 0; i < d->o->nodes && ok; i++) {
		struct node_seen *s = &d->nodes[i];
		if (!s->join_ns)
			continue; /* it ended without a round */
		if (!d->first_round) {
			d->first_round = s->round;
			world = s->world;
		}
		if (s->round != d->first_round || s->world != world ||
		    world < d->n_joined || world > d->o->nodes || s->rank < 0 ||
		    s->rank >= world || seen[s->rank]) {
			fail(d,
			     "bad assignment: node sim%05d round %llu rank "
			     "%d of %d (the first node's round %llu of %d; %d "
			     "nodes had one)",
			     i, (unsigned long long)s->round, s->rank, s->world,
			     (unsigned long long)d->first_round, world,
			     d->n_joined);
			ok = 0;
		}
		seen[s->rank >= 0 && s->rank < d->o->nodes ? s->rank : 0] = 1;
	}
	free(seen);
	d->world = world;
	return ok;
}

static void on_leader_watch(void *arg, enum etcd_watch_what what,
			    const struct etcd_watch_response *w,
			    const char *error)
{
	struct driver *d = arg;
	uint64_t now = clock_now_ns();
	if (what != ETCD_WATCH_EVENTS) {
		fail(d, "watching the leader key: %s",
		     error ? error : "compacted");
		return;
	}
	for (size_t i = 0; i < w->n_events; i++) {
		const struct etcd_event *e = &w->events[i];
		const char *id;
		json_t *v;
		if (e->type == ETCD_EVENT_DELETE) {
			if (!d->t_gone_ns)
				d->t_gone_ns = now;
			continue;
		}
		if (d->t_elected_ns)
			continue;
		d->t_elected_ns = now;
		v = json_loadb(e->kv.value, e->kv.value_len, 0, NULL);
		id = json_string_value(json_object_get(v, "node_id"));
		snprintf(d->new_leader, sizeof(d->new_leader), "%s",
			 id ? id : "?");
		json_decref(v);
	}
}

static struct proc *owner(struct driver *d, int idx)
{
	for (int k = 0; k < d->nprocs; k++)
		if (idx >= d->procs[k].lo && idx < d->procs[k].hi)
			return &d->procs[k];
	return NULL;
}

/* on_leader: the leader key read; drop its holder and time the rest */
static void on_leader(void *arg, const struct etcd_answer *a)
{
	struct driver *d = arg;
	struct etcd_range_response r;
	char err[256], k[300];
	const char *id = NULL;
	json_t *v = NULL;
	int idx = -1;
	struct proc *p;
	d->obs_call = NULL;
	if (a->rc != 0 ||
	    etcd_parse_range(a->body, a->len, &r, err, sizeof(err)) != 0) {
		fail(d, "reading the leader key: %s", a->rc ? a->error : err);
		return;
	}
	if (r.n_kvs == 1)
		v = json_loadb(r.kvs[0].value, r.kvs[0].value_len, 0, NULL);
	id = json_string_value(json_object_get(v, "node_id"));
	if (!id || strncmp(id, "sim", 3) != 0 ||
	    parse_int(id + 3, 0, d->o->nodes - 1, &idx) != 0)
		idx = -1;
	json_decref(v);
	p = idx >= 0 ? owner(d, idx) : NULL;
	if (!p) {
		etcd_range_response_release(&r);
		fail(d, "no simulated node holds the leader key");
		return;
	}
	etcd_key(k, sizeof(k), d->o->prefix, ETCD_KEY_LEADER, NULL);
	d->obs_watch =
	    etcd_watch_new(d->obs, "leader watch", k, strlen(k), NULL, 0,
			   r.header.revision + 1, 0, on_leader_watch, d);
	etcd_range_response_release(&r);
	if (!d->obs_watch)
		die("out of memory");
	d->killed = idx;
	d->phase = PH_TAKEOVER;
	d->t_kill_ns = clock_now_ns();
	write_line(p->cmd_fd, "K %d\n", idx);
}

static void start_takeover(struct driver *d)
{
	char k[300], err[256];
	json_t *body = NULL;
	etcd_key(k, sizeof(k), d->o->prefix, ETCD_KEY_LEADER, NULL);
	if (etcd_client_new(d->base, &d->obs_cfg, &d->obs, err, sizeof(err)))
		die(err);
	if (etcd_build_range(k, strlen(k), NULL, 0, 0, 0, &body, err,
			     sizeof(err)) != 0)
		die(err);
	d->obs_call = etcd_call(d->obs, "leader read", "/v3/kv/range", body, 0,
				on_leader, d);
	json_decref(body);
	if (!d->obs_call)
		die("out of memory");
}

static void arm_timeout(struct driver *d)
{
	double s = d->o->timeout_s;
	struct timeval tv = {(time_t)s,
			     (suseconds_t)((s - (double)(time_t)s) * 1e6)};
	evtimer_add(d->timeout_ev, &tv);
}

/* cpu_s: user + system CPU seconds process pid has used, or 0 */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces */
	if (!p || sscanf(p + 2,
			 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu",
			 &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void sample_cpu(struct driver *d, int at)
{
	d->etcd_cpu[at] = 0;
	d->load_cpu[at] = 0;
	for (int i = 0; i < d->o->n_etcd_pids; i++)
		d->etcd_cpu[at] += cpu_s(d->o->etcd_pids[i]);
	for (int k = 0; k < d->nprocs; k++)
		d->load_cpu[at] += cpu_s(d->procs[k].pid);
	d->load_cpu[at] += cpu_s(getpid());
}

static void after_idle(struct driver *d);

static void on_idle_end(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	d->idle_t1_ns = clock_now_ns();
	sample_cpu(d, 2);
	if (scrape(d->o, &d->idle_after) != 0) {
		fail(d, "cannot read etcd's /metrics");
		return;
	}
	after_idle(d);
}

static void on_next(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	if (d->failed)
		return;
	if (d->phase == PH_FIRST) {
		sample_cpu(d, 1);
		if (!check_first(d))
			return;
		if (scrape(d->o, &d->after) != 0) {
			fail(d, "cannot read etcd's /metrics");
			return;
		}
		if (d->o->idle_ms) {
			struct timeval tv = {
			    (time_t)(d->o->idle_ms / 1000),
			    (suseconds_t)(d->o->idle_ms % 1000) * 1000};
			d->phase = PH_IDLE;
			evtimer_del(d->timeout_ev);
			d->idle_t0_ns = clock_now_ns();
			if (!d->idle_ev)
				d->idle_ev =
				    evtimer_new(d->base, on_idle_end, d);
			if (!d->idle_ev)
				die("out of memory");
			evtimer_add(d->idle_ev, &tv);
			return;
		}
		after_idle(d);
		return;
	}
	d->phase = PH_DONE;
	event_base_loopbreak(d->base);
}

/* after_idle: the takeover, or the end */
static void after_idle(struct driver *d)
{
	if (!d->o->takeover) {
		d->phase = PH_DONE;
		event_base_loopbreak(d->base);
		return;
	}
	arm_timeout(d);
	start_takeover(d);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct driver *d = arg;
	(void)fd;
	(void)what;
	if (d->phase == PH_FIRST)
		fail(d,
		     "%d of %d nodes had a round after %.0f s (%d nodes' "
		     "loops ended)",
		     d->n_joined, d->o->nodes, d->o->timeout_s, d->n_failed);
	else
		fail(d,
		     "takeover: %d of %d survivors in a new round after "
		     "%.0f s (leader key %s, new leader %s)",
		     d->n_reformed, survivors(d), d->o->timeout_s,
		     d->t_gone_ns ? "expired" : "not expired",
		     d->t_elected_ns ? d->new_leader : "none");
}

/* ------------------------------------------------------------- output */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double ms(uint64_t from, uint64_t to)
{
	return from && to ? (double)(to - from) / 1e6 : -1;
}

static long proc_status(pid_t pid, const char *field)
{
	char path[64], line[256];
	FILE *f;
	long v = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0 &&
		    line[strlen(field)] == ':')
			v = strtol(line + strlen(field) + 1, NULL, 10) * 1024;
	fclose(f);
	return v;
}

static int open_fds(pid_t pid)
{
	char path[64];
	DIR *dir;
	struct dirent *e;
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static void print_result(struct driver *d)
{
	const struct opts *o = d->o;
	json_t *r = json_object(), *t, *procs = json_array();
	uint64_t *sorted = malloc(sizeof(*sorted) * (size_t)o->nodes);
	long hwm = 0;
	int fds = 0;
	struct rlimit rl;
	if (!r || !procs || !sorted)
		die("out of memory");
	json_t *failed = json_array();
	size_t nj = 0;
	if (!failed)
		die("out of memory");
	for (int i = 0; i < o->nodes; i++) {
		if (d->nodes[i].join_ns)
			sorted[nj++] = d->nodes[i].join_ns;
		if (d->nodes[i].failed_phase) {
			char id[32];
			snprintf(id, sizeof(id), "sim%05d", i);
			json_array_append_new(
			    failed,
			    json_pack("{s:s, s:s}", "node", id, "phase",
				      phase_name(d->nodes[i].failed_phase)));
		}
	}
	qsort(sorted, nj, sizeof(*sorted), cmp_u64);
	getrlimit(RLIMIT_NOFILE, &rl);
	json_object_set_new(r, "nodes", json_integer(o->nodes));
	json_object_set_new(r, "min_nodes", json_integer(o->min_nodes));
	json_object_set_new(r, "lease_ttl_s", json_integer(o->lease_ttl_s));
	json_object_set_new(r, "last_call_ms",
			    json_integer((json_int_t)o->last_call_ms));
	json_object_set_new(r, "endpoints", json_string(o->endpoints));
	json_object_set_new(r, "rotate", json_boolean(o->rotate));
	json_object_set_new(
	    r, "simulated_node",
	    json_string("real: agent_rdzv_etcd_new + the agent's round loop "
			"(fsm.c), one etcd client per node"));
	json_object_set_new(r, "processes", json_integer(d->nprocs));
	json_object_set_new(r, "round",
			    json_integer((json_int_t)d->first_round));
	json_object_set_new(r, "nodes_joined", json_integer((json_int_t)nj));
	json_object_set_new(r, "world", json_integer(d->world));
	json_object_set_new(r, "nodes_failed", failed);
	json_object_set_new(r, "join_ms",
			    json_real((double)sorted[nj - 1] / 1e6));
	json_object_set_new(r, "join_first_ms",
			    json_real((double)sorted[0] / 1e6));
	json_object_set_new(r, "join_p50_ms",
			    json_real((double)sorted[nj / 2] / 1e6));
	json_object_set_new(r, "join_p99_ms",
			    json_real((double)sorted[nj * 99 / 100] / 1e6));
	json_object_set_new(r, "ranks_ok", json_true());
	json_object_set_new(r, "etcd_delta",
			    counters_delta(&d->before, &d->after));
	/* CPU time the first round took, which other load on the machine
	 * changes little (the wall time it changes a lot) */
	if (o->n_etcd_pids)
		json_object_set_new(r, "join_etcd_cpu_s",
				    json_real(d->etcd_cpu[1] - d->etcd_cpu[0]));
	json_object_set_new(r, "join_load_cpu_s",
			    json_real(d->load_cpu[1] - d->load_cpu[0]));
	if (o->idle_ms) {
		double secs = (double)(d->idle_t1_ns - d->idle_t0_ns) / 1e9;
		t = json_object();
		json_object_set_new(t, "seconds", json_real(secs));
		json_object_set_new(t, "nodes_given_a_new_round",
				    json_integer(d->idle_rounds));
		json_object_set_new(t, "etcd_delta",
				    counters_delta(&d->after, &d->idle_after));
		if (o->n_etcd_pids)
			json_object_set_new(
			    t, "etcd_cpu_s",
			    json_real(d->etcd_cpu[2] - d->etcd_cpu[1]));
		json_object_set_new(t, "load_cpu_s",
				    json_real(d->load_cpu[2] - d->load_cpu[1]));
		json_object_set_new(r, "idle", t);
	}
	if (o->takeover) {
		char killed[32];
		snprintf(killed, sizeof(killed), "sim%05d", d->killed);
		t = json_object();
		json_object_set_new(t, "killed", json_string(killed));
		json_object_set_new(t, "new_leader",
				    json_string(d->new_leader));
		json_object_set_new(t, "leader_key_gone_ms",
				    json_real(ms(d->t_kill_ns, d->t_gone_ns)));
		json_object_set_new(
		    t, "new_leader_ms",
		    json_real(ms(d->t_kill_ns, d->t_elected_ns)));
		json_object_set_new(
		    t, "reformed_ms",
		    json_real(ms(d->t_kill_ns, d->t_reformed_ns)));
		json_object_set_new(t, "round",
				    json_integer((json_int_t)d->new_round));
		json_object_set_new(t, "survivors", json_integer(survivors(d)));
		json_object_set_new(r, "takeover", t);
	}
	for (int k = 0; k < d->nprocs; k++) {
		hwm += d->procs[k].hwm_bytes;
		fds += d->procs[k].fds;
		json_array_append_new(
		    procs,
		    json_pack("{s:i, s:i, s:I, s:i}", "first", d->procs[k].lo,
			      "nodes", d->procs[k].hi - d->procs[k].lo,
			      "rss_hwm_bytes",
			      (json_int_t)d->procs[k].hwm_bytes, "fds",
			      d->procs[k].fds));
	}
	json_object_set_new(r, "per_process", procs);
	json_object_set_new(r, "rss_hwm_bytes", json_integer(hwm));
	json_object_set_new(r, "fds_open", json_integer(fds));
	json_object_set_new(r, "nofile_limit",
			    json_integer((json_int_t)rl.rlim_cur));
	json_dumpf(r, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
	fputc('\n', stdout);
	json_decref(r);
	free(sorted);
}

/* spawn forks the children, each with its share of the nodes */
static void spawn(struct driver *d)
{
	const struct opts *o = d->o;
	d->nprocs = o->procs;
	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		int cmd[2], rep[2];
		p->lo = (int)((long)o->nodes * k / d->nprocs);
		p->hi = (int)((long)o->nodes * (k + 1) / d->nprocs);
		if (pipe(cmd) != 0 || pipe(rep) != 0)
			die("pipe failed");
		fflush(NULL);
		p->pid = fork();
		if (p->pid < 0)
			die("fork failed");
		if (p->pid == 0) {
			close(cmd[1]);
			close(rep[0]);
			for (int j = 0; j < k; j++) {
				close(d->procs[j].cmd_fd);
				close(d->procs[j].rep_fd);
			}
			_exit(child_main(o, p->lo, p->hi, cmd[0], rep[1]));
		}
		close(cmd[0]);
		close(rep[1]);
		p->cmd_fd = cmd[1];
		p->rep_fd = rep[0];
	}
}

/* wait_ready: every child has made its nodes */
static void wait_ready(struct driver *d)
{
	for (int k = 0; k < d->nprocs; k++) {
		char c[2];
		if (read(d->procs[k].rep_fd, c, 2) != 2 || c[0] != 'R')
			die("a process of simulated nodes did not start");
	}
}

static int driver_main(const struct opts *o)
{
	static struct driver drv;
	struct driver *d = &drv;
	int rc;
	d->o = o;
	the_driver = d;
	d->nodes = calloc((size_t)o->nodes, sizeof(*d->nodes));
	if (!d->nodes)
		die("out of memory");
	d->killed = -1;
	spawn(d);
	log_set_level(o->level);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	d->base = event_base_new();
	if (!d->base)
		die("out of memory");
	d->timeout_ev = evtimer_new(d->base, on_timeout, d);
	d->next_ev = event_new(d->base, -1, 0, on_next, d);
	if (!d->timeout_ev || !d->next_ev)
		die("out of memory");
	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		p->ev = event_new(d->base, p->rep_fd, EV_READ | EV_PERSIST,
				  on_rep, p);
		if (!p->ev)
			die("out of memory");
	}
	base_config(o, &d->obs_cfg);

	wait_ready(d);
	for (int k = 0; k < d->nprocs; k++)
		event_add(d->procs[k].ev, NULL);
	if (scrape(o, &d->before) != 0)
		die("cannot read etcd's /metrics");
	d->phase = PH_FIRST;
	arm_timeout(d);
	sample_cpu(d, 0);
	d->t0_ns = clock_now_ns();
	for (int k = 0; k < d->nprocs; k++)
		write_line(d->procs[k].cmd_fd, "G\n");
	event_base_dispatch(d->base);

	for (int k = 0; k < d->nprocs; k++) {
		struct proc *p = &d->procs[k];
		p->hwm_bytes = proc_status(p->pid, "VmHWM");
		p->fds = open_fds(p->pid);
		write_line(p->cmd_fd, "Q\n");
	}
	for (int k = 0; k < d->nprocs; k++) {
		close(d->procs[k].cmd_fd);
		waitpid(d->procs[k].pid, NULL, 0);
	}
	rc = d->failed || d->phase != PH_DONE;
	if (rc)
		fprintf(stderr, "etcd_load: %s\n",
			d->failed ? d->why : "stopped early");
	else
		print_result(d);
	etcd_watch_free(d->obs_watch);
	etcd_cancel(d->obs_call);
	etcd_client_free(d->obs);
	for (int k = 0; k < d->nprocs; k++) {
		event_free(d->procs[k].ev);
		close(d->procs[k].rep_fd);
	}
	event_free(d->timeout_ev);
	event_free(d->next_ev);
	if (d->idle_ev)
		event_free(d->idle_ev);
	event_base_free(d->base);
	free(d->nodes);
	curl_global_cleanup();
	return rc;
}

/* ================================================================== main */

static void usage(void)
{
	fprintf(stderr,
		"usage: etcd_load --endpoints HOST:PORT[,...] --nodes N "
		"[--job NAME] [--min-nodes N]\n"
		"                 [--lease-ttl S] [--last-call-ms MS] "
		"[--timeout S] [--no-takeover]\n"
		"                 [--idle-ms MS] [--etcd-pids PID,...] "
		"[--procs P]\n"
		"                 [--rotate] [--log-level LEVEL]\n");
	exit(2);
}

/* raise_nofile: the soft limit up to the hard one; returns it */
static long raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	return rl.rlim_cur == RLIM_INFINITY ? 1L << 20 : (long)rl.rlim_cur;
}

static int parse_pids(struct opts *o, const char *list)
{
	char buf[512], *save = NULL;
	int pid;
	snprintf(buf, sizeof(buf), "%s", list);
	o->n_etcd_pids = 0;
	for (char *t = strtok_r(buf, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		if (o->n_etcd_pids == 16 || parse_int(t, 1, INT32_MAX, &pid))
			return -1;
		o->etcd_pids[o->n_etcd_pids++] = pid;
	}
	return 0;
}

static void parse_args(struct opts *o, int argc, char **argv)
{
	const char *eps = NULL;
	char err[256];
	int n;
	memset(o, 0, sizeof(*o));
	o->lease_ttl_s = 2;
	o->last_call_ms = 1000;
	o->timeout_s = 120;
	o->takeover = 1;
	o->level = LOG_WARN;
	snprintf(o->job, sizeof(o->job), "load%d", (int)getpid());
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = 0;
		if (strcmp(a, "--no-takeover") == 0) {
			o->takeover = 0;
			continue;
		}
		if (strcmp(a, "--rotate") == 0) {
			o->rotate = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--endpoints") == 0) {
			eps = v;
		} else if (strcmp(a, "--nodes") == 0) {
			rc = parse_int(v, 2, MAX_NODES, &o->nodes);
		} else if (strcmp(a, "--min-nodes") == 0) {
			rc = parse_int(v, 1, MAX_NODES, &o->min_nodes);
		} else if (strcmp(a, "--idle-ms") == 0) {
			rc = parse_u64(v, 0, 3600000, &o->idle_ms);
		} else if (strcmp(a, "--etcd-pids") == 0) {
			rc = parse_pids(o, v);
		} else if (strcmp(a, "--procs") == 0) {
			rc = parse_int(v, 1, MAX_PROCS, &o->procs);
		} else if (strcmp(a, "--job") == 0) {
			if (!parse_name_valid(v, 128))
				usage();
			snprintf(o->job, sizeof(o->job), "%s", v);
		} else if (strcmp(a, "--lease-ttl") == 0) {
			rc = parse_int(v, 2, 3600, &n);
			o->lease_ttl_s = (unsigned)n;
		} else if (strcmp(a, "--last-call-ms") == 0) {
			rc = parse_u64(v, 0, 3600000, &o->last_call_ms);
		} else if (strcmp(a, "--timeout") == 0) {
			rc = parse_double(v, 1, 3600, &o->timeout_s);
		} else if (strcmp(a, "--log-level") == 0) {
			rc = log_level_parse(v, &o->level);
		} else {
			usage();
		}
		if (rc != 0) {
			fprintf(stderr, "etcd_load: bad value for %s: %s\n", a,
				v);
			exit(2);
		}
	}
	if (!eps || o->nodes < 2)
		usage();
	if (!o->min_nodes)
		o->min_nodes = o->takeover ? o->nodes - 1 : o->nodes;
	if (o->min_nodes > o->nodes ||
	    (o->takeover && o->min_nodes >= o->nodes))
		die("--min-nodes must be below --nodes with a takeover");
	snprintf(o->endpoints, sizeof(o->endpoints), "%s", eps);
	if (agent_etcd_endpoints_parse(eps, NULL, &o->eps, err, sizeof(err)))
		die(err);
	etcd_job_prefix(o->prefix, sizeof(o->prefix), "/dlaunch", o->job);
}

int main(int argc, char **argv)
{
	static struct opts o;
	long limit;
	log_init("etcd_load");
	parse_args(&o, argc, argv);
	limit = raise_nofile();
	if (!o.procs) {
		long per = (limit - 256) / FDS_PER_NODE;
		if (per < 1)
			die("the open-file limit is too low");
		o.procs = (int)((o.nodes + per - 1) / per);
	}
	if (o.procs > MAX_PROCS || o.procs > o.nodes)
		die("too many processes for the open-file limit");
	signal(SIGPIPE, SIG_IGN);
	return driver_main(&o);
}
