/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_load_node.c - rdzv_load's simulated nodes: one non-blocking
 * connection each, the join and heartbeat requests they queue (pipelined
 * on keep-alive), the answers they read, and the epoll loop that serves
 * them until a phase is done.
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

void conn_update_events(struct load *L, struct conn *c)
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

void queue_join(struct load *L, struct conn *c)
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

void queue_heartbeat(struct load *L, struct conn *c)
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

void conn_write(struct load *L, struct conn *c)
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
void connect_all(struct load *L)
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
void run_loop(struct load *L, uint64_t deadline_ns, int (*done)(struct load *))
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
