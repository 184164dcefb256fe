/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist_flight.c - what stops or watches a group from outside:
 * dist_abort from another thread (and a bootstrap cancelled through
 * cfg.cancel), the flight recorder of the last collectives, and the hang
 * hooks a hung rank's watcher reads.
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

#include "../../trainer/dist/dist_flight.h"

#include "dist_fix.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"

/* ---- dist_abort: cancels what is in flight, from another thread ---- */

struct abort_after {
	struct dist *d;
	int delay_ms;
	uint64_t at_ms; /* when dist_abort was called */
};

static void *abort_thread(void *arg)
{
	struct abort_after *a = arg;
	struct timespec ts = {a->delay_ms / 1000,
			      (long)(a->delay_ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
	a->at_ms = clock_now_ms();
	dist_abort(a->d);
	return NULL;
}

/* Rank 2 never joins the all-reduce, so ranks 0 and 1 block in it (the
 * group's timeout is 60 s). Rank 0 aborts from another thread: its
 * all-reduce returns DL_ECLOSED at once (whenever the abort came: before
 * the operation starts or during it), every later operation too, and the
 * peers' operations fail as well, since rank 0's sockets are gone. */
static int body_abort(struct dist *d, void *arg)
{
	size_t n = 1u << 20; /* a ring all-reduce */
	float *buf = calloc(n, sizeof(float));
	int rc, token = 0;
	(void)arg;
	if (buf == NULL)
		return 1;
	if (dist_rank(d) == 2) {
		/* never sent: this fails when rank 0 leaves */
		rc = dist_recv(d, &token, 1, DIST_INT32, 0);
		free(buf);
		return rc == DL_ECLOSED ? 0 : 2;
	}
	if (dist_rank(d) == 1) {
		rc = dist_all_reduce(d, buf, buf, n, DIST_FLOAT32, DIST_SUM);
		free(buf);
		return rc == DL_ECLOSED && !dist_aborted(d) ? 0 : 3;
	}
	struct abort_after a = {d, 200, 0};
	pthread_t th;
	if (pthread_create(&th, NULL, abort_thread, &a) != 0)
		return 4;
	rc = dist_all_reduce(d, buf, buf, n, DIST_FLOAT32, DIST_SUM);
	uint64_t returned = clock_now_ms();
	pthread_join(th, NULL);
	free(buf);
	if (rc != DL_ECLOSED || !dist_aborted(d))
		return 5;
	if (returned - a.at_ms > 2000) /* bounded: far below the timeout */
		return 6;
	dist_abort(d); /* idempotent */
	if (dist_barrier(d) != DL_ECLOSED)
		return 7;
	return 0;
}

/* a bootstrap no longer wanted is cancelled through cfg.cancel: rank 0
 * waiting for a peer that never comes, and a rank retrying a master that
 * is not there, both give up at once (the timeout is 60 s) */
struct raise_after {
	atomic_int *flag;
	uint64_t at_ms;
};

static void *raise_thread(void *arg)
{
	struct raise_after *a = arg;
	struct timespec ts = {0, 200000000L};

	nanosleep(&ts, NULL);
	a->at_ms = clock_now_ms();
	atomic_store(a->flag, 1);
	return NULL;
}

static void cancel_case(int rank, int listen_fd, uint16_t port)
{
	atomic_int flag = 0;
	struct raise_after a = {&flag, 0};
	struct dist_config cfg = make_cfg(port, rank, 2, 60000);
	struct dist *d = NULL;
	char err[512] = "";
	pthread_t th;

	cfg.cancel = &flag;
	assert_int_equal(pthread_create(&th, NULL, raise_thread, &a), 0);
	int rc = dist_init_listener(&cfg, listen_fd, &d, err, sizeof(err));
	uint64_t returned = clock_now_ms();
	pthread_join(th, NULL);
	assert_int_equal(rc, DL_ECLOSED);
	assert_null(d);
	assert_non_null(strstr(err, "cancelled"));
	assert_true(returned - a.at_ms < 1000);
}

static void test_init_cancel(void **state)
{
	uint16_t port;
	int lfd;

	(void)state;
	lfd = listen_loopback(&port);
	cancel_case(0, lfd, port); /* owns lfd */
	lfd = listen_loopback(&port);
	close(lfd); /* nothing listens there now */
	cancel_case(1, -1, port);
}

static void test_abort(void **state)
{
	(void)state;
	run_group(3, 60000, body_abort, NULL);
}

/* ---- the flight recorder and the hang hooks ---- */

/* run_recorded: a group with a recorder of 8 entries runs 9 collectives
 * of every kind (and point-to-point transfers, not recorded); the ring
 * holds the last 8, numbered 2 to 9 on every rank, all finished. */
static int run_recorded(const struct dist_config *cfg, int listen_fd, void *arg)
{
	static const enum dist_flight_op want[] = {
	    DIST_FLIGHT_BROADCAST,  DIST_FLIGHT_BARRIER,
	    DIST_FLIGHT_ALL_GATHER, DIST_FLIGHT_REDUCE,
	    DIST_FLIGHT_ALL_REDUCE, DIST_FLIGHT_ALL_REDUCE,
	    DIST_FLIGHT_ALL_REDUCE, DIST_FLIGHT_ALL_REDUCE};
	const size_t big = 20000; /* doubles: the ring algorithm */
	struct dist_config c = *cfg;
	struct dist_flight *f = dist_flight_new(8);
	struct dist_flight_entry e[8];
	struct dist_req *req[3];
	struct dist *d = NULL;
	double *x = calloc(big * MAX_WORLD, sizeof(double));
	char err[512];
	int w = cfg->world_size, r = cfg->rank;

	(void)arg;
	CHECK(f != NULL && x != NULL);
	c.flight = f;
	CHECK_RC(dist_init_listener(&c, listen_fd, &d, err, sizeof(err)));
	dist_flight_set_step(f, 11);
	CHECK_RC(dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM));
	CHECK_RC(dist_broadcast(d, x, 3, DIST_FLOAT64, w - 1));
	CHECK_RC(dist_barrier(d));
	CHECK_RC(dist_all_gather(d, x, x + big, 5, DIST_FLOAT64));
	CHECK_RC(dist_reduce(d, x, x + big, 6, DIST_FLOAT64, DIST_SUM, 0));
	if (r < 2) /* not recorded: the ranks would not agree on numbers */
		CHECK_RC(r == 0 ? dist_send(d, x, 2, DIST_FLOAT64, 1)
				: dist_recv(d, x, 2, DIST_FLOAT64, 0));
	for (int i = 0; i < 3; i++)
		CHECK_RC(dist_iall_reduce(d, x + i * 100, 7, DIST_FLOAT64,
					  DIST_SUM, &req[i]));
	for (int i = 2; i >= 0; i--)
		CHECK_RC(dist_wait(req[i]));
	CHECK_RC(dist_all_reduce(d, x, x, big, DIST_FLOAT64, DIST_SUM));
	CHECK(dist_flight_snapshot(f, e, 8) == 8);
	for (int i = 0; i < 8; i++) {
		CHECK(e[i].seq == (uint64_t)i + 2);
		CHECK(e[i].op == want[i]);
		CHECK(e[i].finished && e[i].done_ms >= e[i].t_ms);
		CHECK(e[i].step == 11);
	}
	CHECK(e[0].bytes == 3 * 8 && e[1].bytes == 0 && e[2].bytes == 5 * 8);
	CHECK(e[3].bytes == 6 * 8 && e[4].bytes == 7 * 8);
	CHECK(e[7].bytes == big * 8);
	CHECK(dist_flight_rank(f) == r);
	dist_free(d);
	/* a new group numbers from 1 again */
	dist_flight_begin_group(f, r);
	CHECK(dist_flight_snapshot(f, e, 8) == 0);
	dist_flight_free(f);
	free(x);
	return 0;
}

static void test_flight_recorded(void **state)
{
	(void)state;
	for (int w = 2; w <= 4; w++) {
		pid_t pids[4];
		int codes[4];
		uint16_t port;
		int lfd = listen_loopback(&port);
		for (int r = 0; r < w; r++) {
			struct dist_config cfg = make_cfg(port, r, w, 20000);
			pids[r] = spawn(&cfg, lfd, run_recorded, NULL);
		}
		close(lfd);
		reap(pids, w, codes, clock_now_ms() + GROUP_DEADLINE_MS);
		for (int r = 0; r < w; r++)
			assert_int_equal(codes[r], 0);
	}
}

struct hang_case {
	const char *kind; /* DLAUNCH_DIST_FAULT=2:kind for rank 1 */
	struct fail_shared *sh;
	struct dist_flight *f;
};

/* hang_watch: in the hung rank, a thread of its own reads the recorder
 * once rank 0 has given up, and ends the process (its main thread never
 * comes back): exit 0 when the hung all-reduce was never recorded */
static void *hang_watch(void *arg)
{
	struct hang_case *hc = arg;
	struct dist_flight_entry e[4];
	int ok = wait_shared(&hc->sh->done, 1, 30000);
	size_t n = dist_flight_snapshot(hc->f, e, 4);

	ok = ok && n == 1 && e[0].seq == 1 && e[0].finished;
	if (!ok)
		fprintf(stderr, "rank 1: %zu entries recorded, want 1\n", n);
	fflush(NULL);
	_exit(ok ? 0 : 1);
}

/* run_hang: rank 1 hangs before its second all-reduce; rank 0 times out
 * inside it, where its recorder shows it entered and not finished */
static int run_hang(const struct dist_config *cfg, int listen_fd, void *arg)
{
	struct hang_case *hc = arg;
	struct dist_config c = *cfg;
	struct dist_flight_entry e[4];
	struct dist *d = NULL;
	char err[512], fault[32];
	double x[4] = {0};
	pthread_t t;
	int rc;

	snprintf(fault, sizeof(fault), "2:%s", hc->kind);
	setenv("DLAUNCH_DIST_FAULT", fault, 1);
	setenv("DLAUNCH_DIST_FAULT_RANK", "1", 1);
	hc->f = dist_flight_new(4);
	CHECK(hc->f != NULL);
	c.flight = hc->f;
	CHECK_RC(dist_init_listener(&c, listen_fd, &d, err, sizeof(err)));
	CHECK_RC(dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM));
	if (cfg->rank == 1) {
		CHECK(pthread_create(&t, NULL, hang_watch, hc) == 0);
		dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM);
		fprintf(stderr, "rank 1: the hang (%s) returned\n", hc->kind);
		return 1;
	}
	rc = dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM);
	CHECK(dist_flight_snapshot(hc->f, e, 4) == 2);
	__atomic_store_n(&hc->sh->done, 1, __ATOMIC_SEQ_CST);
	CHECK(rc == DL_ETIMEDOUT);
	CHECK(e[0].seq == 1 && e[0].finished);
	CHECK(e[1].seq == 2 && !e[1].finished);
	dist_free(d);
	dist_flight_free(hc->f);
	return 0;
}

static void test_hang_hooks(void **state)
{
	static const char *kinds[] = {"sleep", "loop", "read"};

	(void)state;
	for (size_t k = 0; k < 3; k++) {
		struct hang_case hc = {kinds[k], shared_new(), NULL};
		pid_t pids[2];
		int codes[2];
		uint16_t port;
		int lfd = listen_loopback(&port);
		for (int r = 0; r < 2; r++) {
			struct dist_config cfg = make_cfg(port, r, 2, 1000);
			pids[r] = spawn(&cfg, lfd, run_hang, &hc);
		}
		close(lfd);
		reap(pids, 2, codes, clock_now_ms() + 30000);
		if (codes[0] || codes[1])
			fprintf(stderr, "%s: exit codes %d %d\n", kinds[k],
				codes[0], codes[1]);
		assert_int_equal(codes[0], 0);
		assert_int_equal(codes[1], 0);
		munmap(hc.sh, sizeof(*hc.sh));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_abort),
	    cmocka_unit_test(test_init_cancel),
	    cmocka_unit_test(test_flight_recorded),
	    cmocka_unit_test(test_hang_hooks),
	};
	log_init("test_dist_flight");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
