/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_load.h - what the files of rdzv_load share (rdzv_load.c says what
 * the program does): a simulated node's connection and the state of the
 * whole load.
 *
 *   rdzv_load.c        the command line, the phases, the result, main
 *   rdzv_load_node.c   the simulated nodes: their connections, requests
 *                      and answers, and the loop that serves them
 *   rdzv_load_http.c   reading an HTTP/1.1 answer and a JSON integer
 */
#ifndef DLAUNCH_BENCH_RDZV_LOAD_H
#define DLAUNCH_BENCH_RDZV_LOAD_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- rdzv_load.c ---- */

/* die, die_errno: the message (with errno's) on stderr, exit status 1;
 * xrealloc: realloc or die. */
void die(const char *msg);
void die_errno(const char *what);
void *xrealloc(void *p, size_t n);

/* ---- rdzv_load_node.c: the simulated nodes ---- */

/* conn_update_events: the connection's epoll interest, write too while
 * it has output pending. */
void conn_update_events(struct load *L, struct conn *c);
/* queue_join, queue_heartbeat: one request of the node's (a heartbeat
 * for the next node id in turn) queued on the connection. */
void queue_join(struct load *L, struct conn *c);
void queue_heartbeat(struct load *L, struct conn *c);
/* conn_write: writes what the connection can take of its output. */
void conn_write(struct load *L, struct conn *c);
/* connect_all opens every node's connection, at most connect_parallel
 * handshakes at a time; returns when all are established. */
void connect_all(struct load *L);
/* run_loop services connections until done() says so or the deadline. */
void run_loop(struct load *L, uint64_t deadline_ns, int (*done)(struct load *));

/* ---- rdzv_load_http.c: answers ---- */

/* json_top_int finds "key" among the members of the top-level object of
 * body (nested objects and arrays skipped, strings with escapes handled)
 * and parses its integer value. 0 when found, -1 otherwise. Linear: a join
 * answer may list every member, and this runs once per node. */
int json_top_int(const char *body, size_t len, const char *key, long long *out);
/* http_parse looks for one complete response at the start of buf.
 * Returns the number of bytes it spans (0: incomplete, -1: malformed) and
 * sets *status, the body (decoded in place when chunked) and *close. */
long http_parse(char *buf, size_t len, int *status, char **body,
		size_t *body_len, int *close_after);

#endif
