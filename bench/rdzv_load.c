/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_load.c - load generator for dlaunch-rdzv: many simulated nodes
 * joining one job, then a sustained stream of heartbeats.
 *
 *   rdzv_load --endpoint 127.0.0.1:PORT --nodes 4096 [--job NAME]
 *             [--hb-conns 256] [--hb-depth 4] [--hb-seconds 3]
 *             [--token-file FILE] [--connect-parallel 128]
 *             [--join-timeout 120] [--no-join]
 *
 * One thread, one epoll loop, raw non-blocking sockets speaking HTTP/1.1
 * with keep-alive (docs/http-api.md is the contract). Every simulated node
 * has its own connection, as a real agent would, because a join long-polls
 * until the round closes: with min_nodes = max_nodes = N the round closes
 * only when the N-th join arrives, so N joins must be open at once.
 *
 * Phases:
 *   1. connect: open N connections (at most --connect-parallel handshakes in
 *      flight, so a full accept queue never costs a SYN retransmit inside
 *      the timed phase). Not timed as part of the join.
 *   2. join: write N join requests, then read until every node holds its
 *      assignment (200 with node_rank). join_ms is the time from the first
 *      request written to the last assignment read. The ranks are checked:
 *      each of 0..N-1 exactly once, world_size = N.
 *   3. heartbeat: --hb-conns of those connections each keep --hb-depth
 *      heartbeats in flight (HTTP pipelining when depth > 1), cycling over
 *      every node id, for --hb-seconds. Each is the body an agent sends
 *      once its workers run (node_id, incarnation, round, recovery,
 *      recovery_why). Answers other than 200 count as errors.
 *
 * --no-join skips phase 2: the heartbeats go out as soon as the
 * connections are open. It is for a server with no rendezvous behind it
 * (bench/bare_http.c, the limit the heartbeat path is measured against),
 * which answers every request alike, and for heartbeating a job that an
 * earlier run formed: --incarnation and --round then name its nodes'
 * incarnation and round (that run's output says them), so dlaunch-rdzv
 * and bare_http can take turns under the same load with one join.
 *
 * The line "rdzv_load: heartbeats start" on stderr marks the start of
 * phase 3 (bench.py samples the server's CPU time there and when the
 * result is printed). The result is one JSON object on stdout, printed
 * before the connections close. Exit status 0 when every phase
 * completed and was checked, 1 otherwise (with a message on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/parse.h"

#include "rdzv_load.h"

void die(const char *msg)
{
	fprintf(stderr, "rdzv_load: %s\n", msg);
	exit(1);
}

void die_errno(const char *what)
{
	fprintf(stderr, "rdzv_load: %s: %s\n", what, strerror(errno));
	exit(1);
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (q == NULL)
		die("out of memory");
	return q;
}

static int all_joined(struct load *L)
{
	return L->joined == L->nodes;
}

static int never(struct load *L)
{
	(void)L;
	return 0;
}

static void raise_nofile(unsigned want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want) {
		fprintf(stderr,
			"rdzv_load: open-file limit %llu is below the %u "
			"connections needed (ulimit -n)\n",
			(unsigned long long)rl.rlim_cur, want);
		exit(1);
	}
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: rdzv_load --endpoint HOST:PORT --nodes N [--job NAME]\n"
	    "                 [--hb-conns C] [--hb-depth D] [--hb-seconds S]\n"
	    "                 [--connect-parallel P] [--token-file FILE]\n"
	    "                 [--join-timeout S] [--no-join]\n"
	    "                 [--incarnation NAME] [--round N]\n"
	    "simulates N nodes joining one job (min = max = N) on "
	    "dlaunch-rdzv,\nthen heartbeats for S seconds; prints one JSON "
	    "object.\n");
}

static void parse_args(struct load *L, int argc, char **argv)
{
	const char *endpoint = NULL, *token_file = NULL;
	snprintf(L->job, sizeof(L->job), "load");
	L->nodes = 0;
	L->hb_conns = 256;
	L->hb_depth = 4;
	L->hb_seconds = 3.0;
	L->join_timeout_s = 120.0;
	L->connect_parallel = 128;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(a, "--no-join") == 0) {
			L->no_join = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "rdzv_load: %s needs a value\n", a);
			usage(stderr);
			exit(2);
		}
		const char *v = argv[++i];
		int rc = 0;
		if (strcmp(a, "--endpoint") == 0) {
			endpoint = v;
		} else if (strcmp(a, "--job") == 0) {
			if (strlen(v) >= sizeof(L->job))
				rc = -1;
			else
				snprintf(L->job, sizeof(L->job), "%s", v);
		} else if (strcmp(a, "--nodes") == 0) {
			int n;
			rc = parse_int(v, 1, (int)LOAD_MAX_NODES, &n);
			L->nodes = (unsigned)n;
		} else if (strcmp(a, "--hb-conns") == 0) {
			int n;
			rc = parse_int(v, 0, (int)LOAD_MAX_NODES, &n);
			L->hb_conns = (unsigned)n;
		} else if (strcmp(a, "--hb-depth") == 0) {
			int n;
			rc = parse_int(v, 1, 1024, &n);
			L->hb_depth = (unsigned)n;
		} else if (strcmp(a, "--hb-seconds") == 0) {
			rc = parse_double(v, 0.0, 3600.0, &L->hb_seconds);
		} else if (strcmp(a, "--join-timeout") == 0) {
			rc = parse_double(v, 0.1, 3600.0, &L->join_timeout_s);
		} else if (strcmp(a, "--connect-parallel") == 0) {
			int n;
			rc = parse_int(v, 1, 65536, &n);
			L->connect_parallel = (unsigned)n;
		} else if (strcmp(a, "--token-file") == 0) {
			token_file = v;
		} else if (strcmp(a, "--incarnation") == 0) {
			if (!parse_name_valid(v, sizeof(L->incarnation) - 1))
				rc = -1;
			else
				snprintf(L->incarnation, sizeof(L->incarnation),
					 "%s", v);
		} else if (strcmp(a, "--round") == 0) {
			int n;
			rc = parse_int(v, 0, 1 << 30, &n);
			L->round = (unsigned)n;
		} else {
			fprintf(stderr, "rdzv_load: unknown option %s\n", a);
			usage(stderr);
			exit(2);
		}
		if (rc != 0) {
			fprintf(stderr, "rdzv_load: bad value for %s: '%s'\n",
				a, v);
			exit(2);
		}
	}
	if (endpoint == NULL || L->nodes == 0) {
		usage(stderr);
		exit(2);
	}
	uint16_t port;
	if (parse_host_port(endpoint, 0, 0, L->host, sizeof(L->host), &port) !=
		0 ||
	    inet_pton(AF_INET, L->host, &L->addr.sin_addr) != 1) {
		fprintf(stderr,
			"rdzv_load: bad endpoint '%s' (want IPV4:PORT)\n",
			endpoint);
		exit(2);
	}
	L->addr.sin_family = AF_INET;
	L->addr.sin_port = htons(port);
	if (L->hb_conns > L->nodes)
		L->hb_conns = L->nodes;
	if (token_file != NULL) {
		char tok[512];
		FILE *f = fopen(token_file, "r");
		if (f == NULL)
			die_errno("token file");
		size_t n = fread(tok, 1, sizeof(tok) - 1, f);
		fclose(f);
		while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' ||
				 tok[n - 1] == ' '))
			n--;
		tok[n] = '\0';
		snprintf(L->auth_header, sizeof(L->auth_header),
			 "Authorization: Bearer %s\r\n", tok);
	}
}

int main(int argc, char **argv)
{
	struct load L;
	memset(&L, 0, sizeof(L));
	parse_args(&L, argc, argv);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile(L.nodes + 64);
	if (!L.incarnation[0])
		snprintf(L.incarnation, sizeof(L.incarnation), "inc%08x",
			 (unsigned)(clock_now_ns() & 0xffffffffu));

	L.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (L.epfd < 0)
		die_errno("epoll_create1");
	L.conns = calloc(L.nodes, sizeof(*L.conns));
	L.rank_seen = calloc(L.nodes, 1);
	if (L.conns == NULL || L.rank_seen == NULL)
		die("out of memory");
	for (unsigned i = 0; i < L.nodes; i++) {
		L.conns[i].node = i;
		L.conns[i].fd = -1;
	}

	uint64_t t_connect = clock_now_ns();
	connect_all(&L);
	uint64_t t_join = clock_now_ns();

	L.phase = 2;
	for (unsigned i = 0; i < L.nodes && !L.no_join; i++) {
		queue_join(&L, &L.conns[i]);
		conn_write(&L, &L.conns[i]);
		conn_update_events(&L, &L.conns[i]);
	}
	if (!L.no_join)
		run_loop(&L, t_join + (uint64_t)(L.join_timeout_s * 1e9),
			 all_joined);
	uint64_t t_joined = clock_now_ns();
	if (!L.no_join && L.joined != L.nodes) {
		fprintf(stderr,
			"rdzv_load: only %u of %u nodes got an assignment "
			"within %.0f s\n",
			L.joined, L.nodes, L.join_timeout_s);
		return 1;
	}

	L.phase = 3;
	/* a harness samples the server's CPU time from this line on */
	if (L.hb_conns > 0) {
		fprintf(stderr, "rdzv_load: heartbeats start\n");
		fflush(stderr);
	}
	uint64_t t_hb = clock_now_ns();
	for (unsigned i = 0; i < L.hb_conns; i++) {
		struct conn *c = &L.conns[i];
		while (c->inflight < L.hb_depth)
			queue_heartbeat(&L, c);
		conn_write(&L, c);
		conn_update_events(&L, c);
	}
	uint64_t hb_ns = (uint64_t)(L.hb_seconds * 1e9);
	if (L.hb_conns > 0)
		run_loop(&L, t_hb + hb_ns, never);
	uint64_t t_end = clock_now_ns();
	double hb_elapsed = (double)(t_end - t_hb) / 1e9;

	printf("{\"nodes\": %u, \"incarnation\": \"%s\", \"round\": %u, "
	       "\"connect_ms\": %.3f, \"join_ms\": %.3f, "
	       "\"join_retries\": %llu, \"hb_conns\": %u, \"hb_depth\": %u, "
	       "\"hb_seconds\": %.3f, \"heartbeats\": %llu, "
	       "\"heartbeat_errors\": %llu, \"heartbeats_per_s\": %.1f}\n",
	       L.nodes, L.incarnation, L.round,
	       (double)(t_join - t_connect) / 1e6,
	       (double)(t_joined - t_join) / 1e6,
	       (unsigned long long)L.join_retries, L.hb_conns, L.hb_depth,
	       hb_elapsed, (unsigned long long)L.hb_ok,
	       (unsigned long long)L.hb_errors,
	       hb_elapsed > 0 ? (double)L.hb_ok / hb_elapsed : 0.0);
	fflush(stdout);
	for (unsigned i = 0; i < L.nodes; i++) {
		if (L.conns[i].fd >= 0)
			close(L.conns[i].fd);
		free(L.conns[i].in);
		free(L.conns[i].out);
	}
	free(L.conns);
	free(L.rank_seen);
	close(L.epfd);
	if (L.failed || L.hb_errors > 0) {
		fprintf(stderr, "rdzv_load: %llu heartbeat errors\n",
			(unsigned long long)L.hb_errors);
		return 1;
	}
	return 0;
}
