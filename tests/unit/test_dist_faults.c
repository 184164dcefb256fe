/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist_faults.c - failures across processes: a peer killed or
 * silent, a rank that never arrives, strangers and bad hellos on the
 * bootstrap port, a master that starts late, larger worlds with random
 * sizes, dist_free with a send pending, and IPv6.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_fix.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"

/* Survivors of a peer killed mid-loop: all-reduce until it fails; the
 * failure must come quickly and be ECLOSED or ETIMEDOUT, and sticky. */
static int body_until_peer_dies(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	size_t n = 256 << 10;
	float *x = calloc(n, sizeof(float));
	int rc = 0;
	CHECK(x != NULL);
	for (int i = 0; i < 5000; i++) {
		uint64_t start = clock_now_ms();
		rc = dist_all_reduce(d, x, x, n, DIST_FLOAT32, DIST_SUM);
		if (rc != 0) {
			CHECK(clock_now_ms() - start < 5000 + 2000);
			break;
		}
		__atomic_store_n(&sh->iters[dist_rank(d)], i + 1,
				 __ATOMIC_SEQ_CST);
	}
	free(x);
	if (dist_rank(d) == 1)
		return 0; /* not reached: killed */
	CHECK(rc == DL_ECLOSED || rc == DL_ETIMEDOUT);
	CHECK(dist_barrier(d) == rc);
	return 0;
}

static void test_peer_dies(void **state)
{
	struct fail_shared *sh = shared_new();
	struct body_call call = {body_until_peer_dies, sh};
	pid_t pids[3];
	int codes[3];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 3; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 5000);
		pids[r] = spawn(&cfg, lfd, run_body, &call);
	}
	close(lfd);
	assert_true(wait_shared(&sh->iters[1], 5, 30000));
	kill(pids[1], SIGKILL);
	reap(pids, 3, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 200 + SIGKILL);
	assert_int_equal(codes[2], 0);
	munmap(sh, sizeof(*sh));
}

/* A peer that stays connected but never takes part: DL_ETIMEDOUT after
 * the group's timeout, not a hang. */
static int body_silent_peer(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	float x[1000] = {0};
	if (dist_rank(d) == 1) {
		/* hold the connections open until rank 0 has given up */
		CHECK(wait_shared(&sh->done, 1, 30000));
		return 0;
	}
	uint64_t start = clock_now_ms();
	int rc = dist_all_reduce(d, x, x, 1000, DIST_FLOAT32, DIST_SUM);
	uint64_t took = clock_now_ms() - start;
	__atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
	CHECK(rc == DL_ETIMEDOUT);
	CHECK(took >= 900 && took < 5000);
	CHECK(dist_broadcast(d, x, 10, DIST_FLOAT32, 0) == DL_ETIMEDOUT);
	return 0;
}

static void test_peer_silent(void **state)
{
	struct fail_shared *sh = shared_new();
	(void)state;
	run_group(2, 1000, body_silent_peer, sh);
	munmap(sh, sizeof(*sh));
}

/* init that must fail: exits 0 when dist_init returned want (and, for
 * rank 0, its message names the missing rank). */
struct init_expect {
	int want;
	const char *needle;
	uint64_t min_ms, max_ms;
};

static int rank_init_fails(const struct dist_config *cfg, int listen_fd,
			   void *arg)
{
	struct init_expect *ex = arg;
	struct dist *d = NULL;
	char err[512] = "";
	uint64_t start = clock_now_ms();
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
	uint64_t took = clock_now_ms() - start;
	fprintf(stderr, "rank %d: init: %s: %s\n", cfg->rank, dl_strerror(rc),
		err);
	dist_free(d);
	/* a rank waiting on rank 0 may instead see rank 0 give up first */
	CHECK(rc == ex->want ||
	      (cfg->rank != 0 && ex->want == DL_ETIMEDOUT && rc == DL_ECLOSED));
	CHECK(took >= ex->min_ms && took <= ex->max_ms);
	CHECK(cfg->rank != 0 || ex->needle == NULL ||
	      strstr(err, ex->needle) != NULL);
	return 0;
}

static void test_rank_never_arrives(void **state)
{
	struct init_expect ex = {DL_ETIMEDOUT, "rank 2", 900, 5000};
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 2; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 1000);
		pids[r] = spawn(&cfg, lfd, rank_init_fails, &ex);
	}
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
}

static int body_one_all_reduce(struct dist *d, void *arg)
{
	int64_t x[5];
	(void)arg;
	fill_input(DIST_INT64, x, 5, dist_rank(d), 77);
	CHECK_RC(dist_all_reduce(d, x, x, 5, DIST_INT64, DIST_SUM));
	for (size_t i = 0; i < 5; i++)
		CHECK(expected_ok(DIST_INT64, DIST_SUM, dist_world_size(d), x,
				  i, 77));
	return 0;
}

static int connect_loopback(uint16_t port)
{
	struct sockaddr_in sin = {0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Strangers on the bootstrap port (an HTTP request, a silent connection,
 * a short one) and a rank of another world size are turned away; the
 * real group still forms. */
static void test_bootstrap_strangers(void **state)
{
	const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
			    "0123456789012345678901234567890123456789";
	struct body_call call = {body_one_all_reduce, NULL};
	struct init_expect ex = {DL_ECONFLICT, NULL, 0, 10000};
	pid_t pids[2], impostor;
	int codes[2], code;
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	int c1 = connect_loopback(port), c2 = connect_loopback(port);
	int c3 = connect_loopback(port);
	assert_int_equal(write(c1, http, sizeof(http) - 1),
			 (ssize_t)sizeof(http) - 1);
	assert_int_equal(write(c3, "DLDI", 4), 4);
	close(c3);
	struct dist_config cfg = make_cfg(port, 0, 2, 10000);
	pids[0] = spawn(&cfg, lfd, run_body, &call);
	cfg = make_cfg(port, 1, 3, 10000);
	impostor = spawn(&cfg, lfd, rank_init_fails, &ex);
	reap(&impostor, 1, &code, clock_now_ms() + 30000);
	assert_int_equal(code, 0);
	cfg = make_cfg(port, 1, 2, 10000);
	pids[1] = spawn(&cfg, lfd, run_body, &call);
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	close(c1);
	close(c2);
}

/* Rank 0 starting after the others: they retry until it listens. */
static int rank_late_master(const struct dist_config *cfg, int listen_fd,
			    void *arg)
{
	struct fail_shared *sh = arg;
	struct body_call call = {body_one_all_reduce, NULL};
	if (cfg->rank == 1)
		__atomic_store_n(&sh->started, 1, __ATOMIC_SEQ_CST);
	return run_body(cfg, listen_fd, &call);
}

static void test_master_starts_late(void **state)
{
	struct fail_shared *sh = shared_new();
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	(void)state;
	close(listen_loopback(&port)); /* a port that was free just now */
	struct dist_config cfg = make_cfg(port, 1, 2, 20000);
	pids[1] = spawn(&cfg, -1, rank_late_master, sh);
	assert_true(wait_shared(&sh->started, 1, 10000));
	cfg = make_cfg(port, 0, 2, 20000);
	pids[0] = spawn(&cfg, -1, rank_late_master, sh);
	reap(pids, 2, codes, clock_now_ms() + 40000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	munmap(sh, sizeof(*sh));
}

/* Random sizes around every threshold on larger worlds (more ranks than
 * cores here), all ops on float64 and int32. */
static int body_random_sizes(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	unsigned rng = 12345; /* same sequence on every rank */
	(void)arg;
	for (int iter = 0; iter < 12; iter++) {
		rng = rng * 1103515245u + 12345u;
		size_t n = (rng >> 8) % (iter < 6 ? 40000 : 400000);
		enum dist_dtype dt = iter & 1 ? DIST_INT32 : DIST_FLOAT64;
		enum dist_op op = all_ops[iter % 4];
		size_t es = dist_dtype_size(dt);
		unsigned char *x = malloc(n * es + 1);
		CHECK(x != NULL);
		fill_input(dt, x, n, r, (unsigned)iter);
		CHECK_RC(dist_all_reduce(d, x, x, n, dt, op));
		for (size_t i = 0; i < n; i++)
			if (!expected_ok(dt, op, w, x, i, (unsigned)iter)) {
				fprintf(stderr,
					"rank %d: n %zu op %d element %zu\n", r,
					n, (int)op, i);
				free(x);
				return 1;
			}
		free(x);
	}
	return 0;
}

static void test_larger_worlds(void **state)
{
	(void)state;
	run_group(5, 20000, body_random_sizes, NULL);
	run_group(8, 20000, body_random_sizes, NULL);
}

/* dist_free with an isend nobody receives: returns at once (the request
 * is cancelled), does not wait out the timeout, leaks nothing. */
static int body_free_pending(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	if (dist_rank(d) == 1)
		return wait_shared(&sh->done, 1, 30000) ? 0 : 1;
	size_t n = 32u << 20;
	unsigned char *b = calloc(n, 1);
	struct dist_req *req = NULL;
	CHECK(b != NULL);
	CHECK_RC(dist_isend(d, b, n, DIST_UINT8, 1, &req));
	uint64_t start = clock_now_ms();
	dist_free(d);
	CHECK(clock_now_ms() - start < 5000);
	__atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
	free(b);
	return 0;
}

static int rank_free_pending(const struct dist_config *cfg, int listen_fd,
			     void *arg)
{
	struct dist *d = NULL;
	char err[512] = "";
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "rank %d: init: %s\n", cfg->rank, err);
		return 100;
	}
	rc = body_free_pending(d, arg);
	if (cfg->rank == 1)
		dist_free(d);
	return rc;
}

static void test_free_with_pending(void **state)
{
	struct fail_shared *sh = shared_new();
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 2; r++) {
		struct dist_config cfg = make_cfg(port, r, 2, 20000);
		pids[r] = spawn(&cfg, lfd, rank_free_pending, sh);
	}
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	munmap(sh, sizeof(*sh));
}

/* A raw bootstrap hello (the wire format of dist_net.c, big-endian):
 * magic, version, kind, rank, world, backend, target, nonce, port,
 * family, pad, address. */
static void craft_hello(unsigned char *p, uint32_t version, uint32_t rank,
			uint32_t world, uint32_t backend)
{
	uint32_t words[7] = {0x444c4449u, version, 1, rank, world, backend, 0};
	memset(p, 0, 56);
	for (int i = 0; i < 7; i++) {
		uint32_t be = htonl(words[i]);
		memcpy(p + 4 * i, &be, 4);
	}
	p[36] = 0x12; /* port 0x1234 */
	p[37] = 0x34;
	p[38] = 4;
	p[40] = 127;
	p[43] = 1;
}

/* hello_answer: sends a crafted hello; returns the status in rank 0's
 * reply, or 1 when it closed the connection without one. */
static int hello_answer(uint16_t port, uint32_t version, uint32_t rank,
			uint32_t world, uint32_t backend)
{
	unsigned char buf[56 + 512];
	int fd = connect_loopback(port);
	craft_hello(buf, version, rank, world, backend);
	assert_int_equal(write(fd, buf, 56), 56);
	size_t got = 0;
	while (got < 28) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got < 28)
		return 1;
	uint32_t status;
	memcpy(&status, buf + 8, 4);
	return (int)(int32_t)ntohl(status);
}

/* Hellos that are well formed but wrong are answered with the reason
 * (or dropped), and do not disturb the group. */
static void test_bootstrap_bad_hellos(void **state)
{
	struct body_call call = {body_one_all_reduce, NULL};
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	struct dist_config cfg = make_cfg(port, 0, 2, 10000);
	pids[0] = spawn(&cfg, lfd, run_body, &call);
	assert_int_equal(hello_answer(port, 99, 1, 2, 0), DL_ENOTSUP);
	assert_int_equal(hello_answer(port, 1, 5, 2, 0), DL_ERANGE);
	assert_int_equal(hello_answer(port, 1, 0, 2, 0), DL_ECONFLICT);
	assert_int_equal(hello_answer(port, 1, 1, 2, 1), DL_ECONFLICT);
	assert_int_equal(hello_answer(port, 1, 1, 7, 0), DL_ECONFLICT);
	cfg = make_cfg(port, 1, 2, 10000);
	pids[1] = spawn(&cfg, lfd, run_body, &call);
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
}

/* IPv6: MASTER_ADDR ::1, rank 0 binding MASTER_PORT itself, then a
 * group of three over the v6 loopback. */
static void test_ipv6(void **state)
{
	struct body_call call = {body_one_all_reduce, NULL};
	struct sockaddr_in6 sin6 = {0};
	socklen_t len = sizeof(sin6);
	pid_t pids[3];
	int codes[3];
	(void)state;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_addr = in6addr_loopback;
	if (bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) != 0) {
		close(fd);
		skip(); /* no IPv6 loopback on this host */
	}
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin6, &len), 0);
	uint16_t port = ntohs(sin6.sin6_port);
	for (int r = 0; r < 3; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 10000);
		snprintf(cfg.master_addr, sizeof(cfg.master_addr), "::1");
		pids[r] = spawn(&cfg, fd, run_body, &call);
	}
	close(fd);
	reap(pids, 3, codes, clock_now_ms() + 30000);
	for (int r = 0; r < 3; r++)
		assert_int_equal(codes[r], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_peer_dies),
	    cmocka_unit_test(test_peer_silent),
	    cmocka_unit_test(test_rank_never_arrives),
	    cmocka_unit_test(test_bootstrap_strangers),
	    cmocka_unit_test(test_master_starts_late),
	    cmocka_unit_test(test_larger_worlds),
	    cmocka_unit_test(test_free_with_pending),
	    cmocka_unit_test(test_bootstrap_bad_hellos),
	    cmocka_unit_test(test_ipv6),
	};
	log_init("test_dist_faults");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
