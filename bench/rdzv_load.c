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

#define LOAD_MAX_RESPONSE_BYTES (64u * 1024 * 1024)
#define LOAD_MAX_NODES		1000000u

enum conn_state {
	CONN_CONNECTING = 0,
	CONN_OPEN = 1,
	CONN_CLOSED = 2,
};

/* One simulated node's connection: pending output and the bytes read so
 * far of the answers to its in-flight requests (answers arrive in request
 * order on one connection). */
struct conn {
	int fd;
	enum conn_state state;
	unsigned node;	   /* the node this connection joins for */
	int joined;	   /* holds its assignment */
	unsigned inflight; /* requests written (or queued) but not answered */
	char *out;
	size_t out_len, out_off, out_cap;
	char *in;
	size_t in_len, in_cap;
};

struct load {
	struct sockaddr_in addr;
	char host[256];
	char job[129];
	char incarnation[32];
	char auth_header[600];
	unsigned nodes;
	unsigned connect_parallel;
	unsigned hb_conns, hb_depth;
	double hb_seconds;
	int no_join; /* --no-join: phase 3 right after phase 1 */
	double join_timeout_s;
	int epfd;
	struct conn *conns;
	unsigned char *rank_seen;
	unsigned joined;
	unsigned round;
	int phase; /* 2 join, 3 heartbeat */
	unsigned hb_next_node;
	uint64_t hb_ok, hb_errors, join_errors, join_retries;
	uint64_t hb_status_other;
	int failed;
};

static void die(const char *msg)
{
	fprintf(stderr, "rdzv_load: %s\n", msg);
	exit(1);
}

static void die_errno(const char *what)
{
	fprintf(stderr, "rdzv_load: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (q == NULL)
		die("out of memory");
	return q;
}

/* conn_queue appends a request to the connection's output buffer. */
static void conn_queue(struct conn *c, const char *data, size_t len)
{
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 1024;
		while (cap < c->out_len + len)
			cap *= 2;
		c->out = xrealloc(c->out, cap);
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	c->inflight++;
}

static void conn_update_events(struct load *L, struct conn *c)
{
	struct epoll_event ev = {0};
	ev.events = EPOLLIN;
	if (c->out_off < c->out_len || c->state == CONN_CONNECTING)
		ev.events |= EPOLLOUT;
	ev.data.ptr = c;
	if (epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		die_errno("epoll_ctl");
}

static void request(struct load *L, struct conn *c, const char *method,
		    const char *path, const char *body)
{
	char req[2048];
	size_t blen = strlen(body);
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: %s\r\n%s"
			 "Content-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 method, path, L->host, L->auth_header, blen, body);
	if (n < 0 || (size_t)n >= sizeof(req))
		die("request too long");
	conn_queue(c, req, (size_t)n);
}

static void node_id(unsigned node, char *out, size_t size)
{
	snprintf(out, size, "load-node-%07u", node);
}

static void queue_join(struct load *L, struct conn *c)
{
	char path[300], body[1024], id[64];
	node_id(c->node, id, sizeof(id));
	snprintf(path, sizeof(path), "/v1/jobs/%s/join", L->job);
	/* Heartbeat timeout far beyond the run: the benchmark measures the
	 * server's throughput, not evictions of nodes that only join. */
	snprintf(body, sizeof(body),
		 "{\"node_id\": \"%s\", \"incarnation\": \"%s\", "
		 "\"addr\": \"127.0.0.1\", \"nproc\": 1, "
		 "\"master_port\": 29500, \"min_nodes\": %u, "
		 "\"max_nodes\": %u, \"max_restarts\": 0, "
		 "\"join_timeout\": 600, \"last_call_timeout\": 600, "
		 "\"heartbeat_interval\": 1, \"heartbeat_timeout\": 3600, "
		 "\"wait_ms\": 30000}",
		 id, L->incarnation, L->nodes, L->nodes);
	request(L, c, "POST", path, body);
}

static void queue_heartbeat(struct load *L, struct conn *c)
{
	char path[300], body[512], id[64];
	node_id(L->hb_next_node, id, sizeof(id));
	L->hb_next_node = (L->hb_next_node + 1) % L->nodes;
	snprintf(path, sizeof(path), "/v1/jobs/%s/heartbeat", L->job);
	/* what an agent sends once its workers run (agent/rdzv_http.c) */
	snprintf(body, sizeof(body),
		 "{\"node_id\":\"%s\",\"incarnation\":\"%s\","
		 "\"round\":%u,\"recovery\":\"started\","
		 "\"recovery_why\":\"the first round of this node\"}",
		 id, L->incarnation, L->round);
	request(L, c, "POST", path, body);
}

/* json_top_int finds "key" among the members of the top-level object of
 * body (nested objects and arrays skipped, strings with escapes handled)
 * and parses its integer value. 0 when found, -1 otherwise. Linear: a join
 * answer may list every member, and this runs once per node. */
static int json_top_int(const char *body, size_t len, const char *key,
			long long *out)
{
	size_t klen = strlen(key);
	int depth = 0;
	size_t i = 0;
	while (i < len) {
		char ch = body[i];
		if (ch == '"') {
			size_t start = ++i;
			while (i < len && body[i] != '"') {
				if (body[i] == '\\')
					i++;
				i++;
			}
			if (i >= len)
				return -1;
			size_t slen = i - start;
			i++;
			if (depth != 1 || slen != klen ||
			    memcmp(body + start, key, klen) != 0)
				continue;
			while (i < len && (body[i] == ' ' || body[i] == '\t' ||
					   body[i] == '\r' || body[i] == '\n'))
				i++;
			if (i >= len || body[i] != ':')
				continue;
			i++;
			while (i < len && (body[i] == ' ' || body[i] == '\t'))
				i++;
			char num[32];
			size_t n = 0;
			while (i < len && n + 1 < sizeof(num) &&
			       (body[i] == '-' ||
				(body[i] >= '0' && body[i] <= '9')))
				num[n++] = body[i++];
			num[n] = '\0';
			int64_t v;
			if (parse_i64(num, INT64_MIN, INT64_MAX, &v) != 0)
				return -1;
			*out = v;
			return 0;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if (ch == '}' || ch == ']')
			depth--;
		i++;
	}
	return -1;
}

/* http_parse looks for one complete response at the start of buf.
 * Returns the number of bytes it spans (0: incomplete, -1: malformed) and
 * sets *status, the body (decoded in place when chunked) and *close. */
static long http_parse(char *buf, size_t len, int *status, char **body,
		       size_t *body_len, int *close_after)
{
	char *end = memmem(buf, len, "\r\n\r\n", 4);
	if (end == NULL)
		return len > 65536 ? -1 : 0;
	size_t hdr_len = (size_t)(end - buf) + 4;
	if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0)
		return -1;
	char code[4] = {buf[9], buf[10], buf[11], '\0'};
	int st;
	if (parse_int(code, 100, 599, &st) != 0)
		return -1;
	*status = st;
	*close_after = 0;
	long long clen = -1;
	int chunked = 0;
	char *line = memchr(buf, '\n', hdr_len);
	while (line != NULL && line + 1 < end) {
		line++;
		char *eol = memchr(line, '\r', (size_t)(end + 2 - line));
		if (eol == NULL)
			break;
		size_t ll = (size_t)(eol - line);
		if (ll > 15 && strncasecmp(line, "content-length:", 15) == 0) {
			char num[24];
			size_t k = 15;
			while (k < ll && line[k] == ' ')
				k++;
			size_t nl =
			    ll - k < sizeof(num) - 1 ? ll - k : sizeof(num) - 1;
			memcpy(num, line + k, nl);
			num[nl] = '\0';
			uint64_t v;
			if (parse_u64(num, 0, LOAD_MAX_RESPONSE_BYTES, &v) != 0)
				return -1;
			clen = (long long)v;
		} else if (ll > 18 &&
			   strncasecmp(line, "transfer-encoding:", 18) == 0) {
			if (memmem(line, ll, "chunked", 7) != NULL)
				chunked = 1;
		} else if (ll > 11 &&
			   strncasecmp(line, "connection:", 11) == 0) {
			if (memmem(line, ll, "close", 5) != NULL)
				*close_after = 1;
		}
		line = memchr(eol, '\n', (size_t)(end + 4 - eol));
	}
	if (!chunked) {
		if (clen < 0)
			clen =
			    0; /* no body framing: none (keep-alive server) */
		if (len - hdr_len < (size_t)clen)
			return 0;
		*body = buf + hdr_len;
		*body_len = (size_t)clen;
		return (long)(hdr_len + (size_t)clen);
	}
	/* Chunked: first make sure every chunk is here (without touching the
	 * buffer, which is read again when more bytes arrive), then decode
	 * in place behind the headers. */
	size_t pos = hdr_len, total = 0;
	for (int pass = 0; pass < 2; pass++) {
		size_t out = hdr_len;
		pos = hdr_len;
		for (;;) {
			char *crlf = memmem(buf + pos, len - pos, "\r\n", 2);
			if (crlf == NULL)
				return 0;
			unsigned long long csize = 0;
			for (char *p = buf + pos; p < crlf && *p != ';'; p++) {
				int d;
				if (*p >= '0' && *p <= '9')
					d = *p - '0';
				else if (*p >= 'a' && *p <= 'f')
					d = *p - 'a' + 10;
				else if (*p >= 'A' && *p <= 'F')
					d = *p - 'A' + 10;
				else
					return -1;
				csize = csize * 16 + (unsigned)d;
				if (csize > LOAD_MAX_RESPONSE_BYTES)
					return -1;
			}
			size_t data = (size_t)(crlf - buf) + 2;
			if (csize == 0) {
				if (len - data < 2)
					return 0;
				total = data + 2;
				*body = buf + hdr_len;
				*body_len = out - hdr_len;
				break;
			}
			if (len - data < csize + 2)
				return 0;
			if (pass == 1)
				memmove(buf + out, buf + data, csize);
			out += csize;
			pos = data + csize + 2;
		}
	}
	return (long)total;
}

static void on_join_answer(struct load *L, struct conn *c, int status,
			   const char *body, size_t blen)
{
	long long rank, world, round;
	if (status == 202) {
		L->join_retries++;
		queue_join(L, c);
		return;
	}
	if (status != 200) {
		fprintf(stderr,
			"rdzv_load: join of node %u answered %d: %.*s\n",
			c->node, status, (int)(blen > 300 ? 300 : blen), body);
		L->join_errors++;
		L->failed = 1;
		return;
	}
	if (json_top_int(body, blen, "node_rank", &rank) != 0 ||
	    json_top_int(body, blen, "world_size", &world) != 0 ||
	    json_top_int(body, blen, "round", &round) != 0) {
		fprintf(stderr,
			"rdzv_load: join answer of node %u lacks node_rank, "
			"world_size or round\n",
			c->node);
		L->join_errors++;
		L->failed = 1;
		return;
	}
	if (rank < 0 || rank >= L->nodes || L->rank_seen[rank] ||
	    world != (long long)L->nodes) {
		fprintf(stderr,
			"rdzv_load: node %u got node_rank %lld world_size "
			"%lld (nodes %u): duplicate or out of range\n",
			c->node, rank, world, L->nodes);
		L->join_errors++;
		L->failed = 1;
		return;
	}
	L->rank_seen[rank] = 1;
	L->round = (unsigned)round;
	c->joined = 1;
	L->joined++;
}

/* conn_read drains the socket and handles every complete answer. */
static void conn_read(struct load *L, struct conn *c)
{
	for (;;) {
		if (c->in_cap - c->in_len < 65536) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 131072;
			if (cap > LOAD_MAX_RESPONSE_BYTES + 65536)
				die("answer over the response limit");
			c->in = xrealloc(c->in, cap);
			c->in_cap = cap;
		}
		ssize_t n =
		    read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			fprintf(stderr, "rdzv_load: read from server: %s\n",
				strerror(errno));
			L->failed = 1;
			c->state = CONN_CLOSED;
			return;
		}
		if (n == 0) {
			if (c->inflight > 0) {
				fprintf(stderr,
					"rdzv_load: server closed a connection "
					"with %u requests unanswered\n",
					c->inflight);
				L->failed = 1;
			}
			c->state = CONN_CLOSED;
			return;
		}
		c->in_len += (size_t)n;
	}
	size_t off = 0;
	for (;;) {
		int status, close_after;
		char *body = NULL;
		size_t blen = 0;
		long used = http_parse(c->in + off, c->in_len - off, &status,
				       &body, &blen, &close_after);
		if (used < 0) {
			fprintf(stderr, "rdzv_load: malformed HTTP answer\n");
			L->failed = 1;
			c->state = CONN_CLOSED;
			return;
		}
		if (used == 0)
			break;
		off += (size_t)used;
		if (c->inflight > 0)
			c->inflight--;
		if (L->phase == 2) {
			on_join_answer(L, c, status, body, blen);
		} else {
			if (status == 200) {
				L->hb_ok++;
			} else {
				if (L->hb_errors == 0)
					fprintf(stderr,
						"rdzv_load: heartbeat answered "
						"%d: %.*s\n",
						status,
						(int)(blen > 300 ? 300 : blen),
						body);
				L->hb_errors++;
			}
		}
		if (close_after) {
			c->state = CONN_CLOSED;
			break;
		}
	}
	if (off > 0) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
}

static void conn_write(struct load *L, struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			fprintf(stderr, "rdzv_load: write to server: %s\n",
				strerror(errno));
			L->failed = 1;
			c->state = CONN_CLOSED;
			return;
		}
		c->out_off += (size_t)n;
	}
	(void)L;
}

static int conn_open(struct load *L, struct conn *c)
{
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die_errno("socket (raise the open-file limit: ulimit -n)");
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = CONN_CONNECTING;
	if (connect(c->fd, (struct sockaddr *)&L->addr, sizeof(L->addr)) < 0 &&
	    errno != EINPROGRESS)
		die_errno("connect to the server");
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
	if (epoll_ctl(L->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die_errno("epoll_ctl");
	return 0;
}

/* connect_all opens every node's connection, at most connect_parallel
 * handshakes at a time; returns when all are established. */
static void connect_all(struct load *L)
{
	unsigned next = 0, pending = 0, done = 0;
	struct epoll_event evs[512];
	uint64_t deadline = clock_now_ms() + 120000;
	while (done < L->nodes) {
		while (next < L->nodes && pending < L->connect_parallel) {
			conn_open(L, &L->conns[next++]);
			pending++;
		}
		int n = epoll_wait(L->epfd, evs, 512, 1000);
		if (n < 0 && errno != EINTR)
			die_errno("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (c->state != CONN_CONNECTING)
				continue;
			int err = 0;
			socklen_t el = sizeof(err);
			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
			if (err != 0) {
				errno = err;
				die_errno("connect to the server");
			}
			c->state = CONN_OPEN;
			pending--;
			done++;
			struct epoll_event ev = {.events = EPOLLIN,
						 .data.ptr = c};
			if (epoll_ctl(L->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
				die_errno("epoll_ctl");
		}
		if (clock_now_ms() > deadline)
			die("connecting took over 120 s");
	}
}

/* run_loop services connections until done() says so or the deadline. */
static void run_loop(struct load *L, uint64_t deadline_ns,
		     int (*done)(struct load *))
{
	struct epoll_event evs[1024];
	while (!done(L) && !L->failed) {
		uint64_t now = clock_now_ns();
		if (now >= deadline_ns)
			return;
		int ms = (int)((deadline_ns - now) / 1000000) + 1;
		int n = epoll_wait(L->epfd, evs, 1024, ms > 1000 ? 1000 : ms);
		if (n < 0 && errno != EINTR)
			die_errno("epoll_wait");
		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			if (c->state == CONN_CLOSED)
				continue;
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				conn_read(L, c);
			if (c->state == CONN_CLOSED) {
				epoll_ctl(L->epfd, EPOLL_CTL_DEL, c->fd, NULL);
				continue;
			}
			if (L->phase == 3)
				while (c->inflight < L->hb_depth)
					queue_heartbeat(L, c);
			if (c->out_off < c->out_len)
				conn_write(L, c);
			if (c->state != CONN_CLOSED)
				conn_update_events(L, c);
		}
	}
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
