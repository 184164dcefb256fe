/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_fix.h - the fixture the test_dist_* programs share: the process
 * harness, the data and serial references, the test buffers and the
 * collective bodies (dist_fix.c, dist_bodies.c).
 *
 * Each group test forks one process per rank on loopback. The parent binds
 * rank 0's bootstrap listener on 127.0.0.1 port 0 before forking and rank
 * 0 inherits it (dist_init_listener), so tests never collide on ports.
 * Children report through their exit status (0: every check passed; the
 * failing check is printed on stderr); the parent waits for them with a
 * deadline and kills what is left.
 *
 * The data is a fixed function of rank, index and seed; every operation
 * is checked against a serial reference.
 */
#ifndef DLAUNCH_TEST_DIST_FIX_H
#define DLAUNCH_TEST_DIST_FIX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../../trainer/dist/dist.h"
#include "dlaunch/error.h"

#define MAX_WORLD	  8
#define GROUP_DEADLINE_MS 90000
#define NCCL_TIMEOUT_MS	  60000 /* communicator set-up takes seconds */

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr,                                        \
				"rank %d: check failed at %s:%d: %s\n",        \
				test_rank, __FILE__, __LINE__, #cond);         \
			return 1;                                              \
		}                                                              \
	} while (0)

#define CHECK_RC(expr)                                                         \
	do {                                                                   \
		int check_rc_ = (expr);                                        \
		if (check_rc_ != 0) {                                          \
			fprintf(stderr, "rank %d: %s at %s:%d returned %s\n",  \
				test_rank, #expr, __FILE__, __LINE__,          \
				dl_strerror(check_rc_));                       \
			return 1;                                              \
		}                                                              \
	} while (0)

extern int test_rank; /* in a child: its rank, for messages */
/* in a child on the NCCL backend: operations work on device memory */
extern int on_device;

/* ---- process harness (dist_fix.c) ---- */

typedef int (*rank_fn)(const struct dist_config *cfg, int listen_fd, void *arg);
typedef int (*body_fn)(struct dist *d, void *arg);

struct body_call {
	body_fn body;
	void *arg;
};

/* listen_loopback: a listening socket on 127.0.0.1, port 0; *port gets
 * the port it got. */
int listen_loopback(uint16_t *port);
/* make_cfg: a TCP configuration of rank in world, master at port. */
struct dist_config make_cfg(uint16_t port, int rank, int world,
			    uint64_t timeout_ms);
/* spawn: forks a child that runs fn and exits with its result. */
pid_t spawn(const struct dist_config *cfg, int listen_fd, rank_fn fn,
	    void *arg);
/* reap: waits for n children until the deadline; codes[i] gets the exit
 * status (or 200 + signal, or 255 when killed at the deadline). */
void reap(pid_t *pids, int n, int *codes, uint64_t deadline_ms);
/* run_body: a rank_fn whose arg is a struct body_call: joins the group
 * (100 when that fails) and runs the body on it. */
int run_body(const struct dist_config *cfg, int listen_fd, void *arg);
/* run_group_on: world ranks each run body on a fresh group of the
 * backend; asserts that every one of them passed. */
void run_group_on(enum dist_backend backend, int world, uint64_t timeout_ms,
		  body_fn body, void *arg);
/* run_group: run_group_on on the TCP backend. */
void run_group(int world, uint64_t timeout_ms, body_fn body, void *arg);
/* tcp_worlds: runs body on the TCP backend at each world size from
 * min_world to 4 (test_dist_nccl's nccl_worlds is its GPU counterpart) */
void tcp_worlds(int min_world, uint64_t timeout_ms, body_fn body, void *arg);

/* ---- data and serial references (dist_fix.c) ---- */

/* fill_input: buf[0, count) gets rank's input for seed. */
void fill_input(enum dist_dtype dtype, void *buf, size_t count, int rank,
		unsigned seed);
/* large_count: a count of elements of es bytes that makes more than
 * 10 MiB and that no world size from 2 to 4 divides. */
size_t large_count(size_t es);
/* expected_ok: whether element i of got is the serial reduction of every
 * rank's input (within rounding for NCCL's AVG of floats). */
int expected_ok(enum dist_dtype dtype, enum dist_op op, int world,
		const void *got, size_t i, unsigned seed);
/* check_reduced: got[0, n) against the serial reduction of every rank's
 * input; names the first wrong element. 0 when all are right. */
int check_reduced(const char *what, enum dist_dtype dtype, enum dist_op op,
		  int world, const void *got, size_t n, unsigned seed);
/* check_input: got[0, n) is exactly rank's input (seed), what a
 * broadcast, a gather or a receive must deliver. 0 when it is. */
int check_input(const char *what, enum dist_dtype dtype, const void *got,
		size_t n, int rank, unsigned seed);

extern const enum dist_dtype all_dtypes[5];
extern const enum dist_op all_ops[4];
/* the dtype each op's large case uses: every dtype appears somewhere */
extern const enum dist_dtype large_dtypes[4];

/* ---- buffers (dist_fix.c) ---- */

/* The memory an operation works on (op) and the host copy the checks
 * read (host). On the TCP backend they are the same memory, and put and
 * get do nothing; on NCCL (on_device) op is device memory and put and
 * get copy. Bodies fill host, put, run, get and check host. */
struct tbuf {
	unsigned char *host;
	unsigned char *op;
	size_t bytes;
};

/* tbuf_put: host to op, the device synchronised after. 0 on success. */
int tbuf_put(struct tbuf *b);
/* tbuf_get: op to host, once the device has finished everything. */
int tbuf_get(struct tbuf *b);
/* tbuf_new: bytes of memory (at least one), filled with a pattern that
 * no input holds, so that bytes an operation failed to write show. */
int tbuf_new(struct tbuf *b, size_t bytes);
void tbuf_free(struct tbuf *b);

/* ---- memory shared across the ranks of a failure case (dist_fix.c) ---- */

struct fail_shared {
	int iters[MAX_WORLD];
	int done;
	int started;
};

/* shared_new: a zeroed struct fail_shared in anonymous shared memory
 * (never unmapped: the test process ends soon after). */
struct fail_shared *shared_new(void);
/* wait_shared: polls *flag (set by another process) until it reaches
 * value or the deadline passes; returns whether it did. */
int wait_shared(int *flag, int value, uint64_t timeout_ms);

/* ---- collective bodies (dist_bodies.c); arg NULL unless said ---- */

/* One float32 all-reduce of lc->count elements (body_all_reduce_one). */
struct large_case {
	size_t count;
	enum dist_op op;
};

int body_all_reduce_matrix(struct dist *d, void *arg);
int body_all_reduce_bits(struct dist *d, void *arg);
int body_all_reduce_large(struct dist *d, void *arg);
int body_all_reduce_one(struct dist *d, void *arg); /* arg: large_case */
int body_broadcast(struct dist *d, void *arg);
int body_reduce(struct dist *d, void *arg);
int body_all_gather(struct dist *d, void *arg);
int body_send_recv(struct dist *d, void *arg);
int body_isend_irecv(struct dist *d, void *arg);
int body_async(struct dist *d, void *arg);
/* arg: int[20] in memory shared by the ranks, zeroed */
int body_barrier(struct dist *d, void *arg);

#endif
