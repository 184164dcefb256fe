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
 * the open-file limit allows; a node holds about 13.5 descriptors (890
 * for 64 nodes, 702 before the keep-alive stream): its client's curl
 * multi handles (one per endpoint, and one for its keep-alive stream),
 * each with its wake-up socket pair, and its connections, watch streams
 * and the keep-alive stream among them). This process forks
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
 *      the leases' keep-alives, for MS after a warm-up of one lease TTL
 *      (every node's keep-alive stream open): etcd's counters over that window
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

#include "etcd_load.h"

void die(const char *msg)
{
	fprintf(stderr, "etcd_load: %s\n", msg);
	exit(1);
}

/* write_line writes one line whole (a pipe write under PIPE_BUF is) */
void write_line(int fd, const char *fmt, ...)
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

/* read_lines reads what fd has and calls fn on each whole line; returns
 * 0, or -1 at the end of the stream */
int read_lines(int fd, struct lines *in, void (*fn)(void *, char *), void *arg)
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
