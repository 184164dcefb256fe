/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist_nccl.c - the NCCL backend: its absence (a clear error) in a
 * build without CUDA, and where the build has CUDA and the machine GPUs,
 * every operation of dist_bodies.c on device memory at each world size
 * the devices allow (one device per rank; skipped otherwise).
 *
 * CUDA is only ever used in the forked ranks: CUDA initialised in this
 * process would not survive into the ranks it forks later.
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

#ifdef DLAUNCH_HAVE_CUDA
#include <cuda_runtime.h> /* counting the devices */
#endif

#include "dist_fix.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"

/* rank_nccl_init: a world of one on the NCCL backend. */
static int rank_nccl_init(const struct dist_config *cfg, int listen_fd,
			  void *arg)
{
	struct dist *d = NULL;
	char err[256] = "";
	(void)arg;
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
#ifdef DLAUNCH_HAVE_CUDA
	/* this build has NCCL; without a GPU the init fails cleanly */
	if (rc == 0) {
		CHECK(dist_get_backend(d) == DIST_BACKEND_NCCL);
		dist_free(d);
		return 0;
	}
	CHECK(err[0] != 0);
#else
	CHECK(rc == DL_ENOTSUP);
	CHECK(strstr(err, "nccl") != NULL);
	CHECK(strstr(err, "without CUDA") != NULL);
#endif
	CHECK(d == NULL);
	return 0;
}

/* In a child, like every use of CUDA here: CUDA initialised in this
 * process would not survive into the ranks it forks later. */
static void test_nccl_backend(void **state)
{
	struct dist_config cfg = make_cfg(0, 0, 1, NCCL_TIMEOUT_MS);
	pid_t pid;
	int code;
	(void)state;
	cfg.backend = DIST_BACKEND_NCCL;
	pid = spawn(&cfg, -1, rank_nccl_init, NULL);
	reap(&pid, 1, &code, clock_now_ms() + GROUP_DEADLINE_MS);
	assert_int_equal(code, 0);
}

/* ---- the NCCL backend on device memory (skipped without a GPU) ---- */

#ifdef DLAUNCH_HAVE_CUDA
static int rank_count_gpus(const struct dist_config *cfg, int listen_fd,
			   void *arg)
{
	int n = 0;
	(void)cfg;
	(void)listen_fd;
	(void)arg;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n < 100 ? n : 100;
}
#endif

/* gpu_count: how many CUDA devices the ranks could use (0 in a build
 * without CUDA), asked once, in a child: this process must not
 * initialise CUDA before it forks the ranks. */
static int gpu_count(void)
{
	static int count = -1;
#ifdef DLAUNCH_HAVE_CUDA
	if (count < 0) {
		struct dist_config cfg = make_cfg(0, 0, 1, 1000);
		pid_t pid = spawn(&cfg, -1, rank_count_gpus, NULL);
		reap(&pid, 1, &count, clock_now_ms() + 60000);
		if (count > 100) {
			fprintf(stderr, "counting CUDA devices failed (%d)\n",
				count);
			count = 0;
		}
	}
#endif
	return count < 0 ? 0 : count;
}

/* nccl_worlds: runs body on the NCCL backend at each world size from
 * min_world to 4 that the devices allow (one device per rank); skips
 * the test when there are fewer than min_world devices. */
static void nccl_worlds(int min_world, body_fn body, void *arg)
{
	int gpus = gpu_count();
	if (gpus < min_world) {
		fprintf(stderr, "%d CUDA device(s), %d needed: skipped\n", gpus,
			min_world);
		skip();
	}
	for (int w = min_world; w <= 4 && w <= gpus; w++)
		run_group_on(DIST_BACKEND_NCCL, w, NCCL_TIMEOUT_MS, body, arg);
}

static void test_nccl_all_reduce(void **state)
{
	(void)state;
	nccl_worlds(1, body_all_reduce_matrix, NULL);
	nccl_worlds(1, body_all_reduce_large, NULL);
}

static void test_nccl_broadcast(void **state)
{
	(void)state;
	nccl_worlds(1, body_broadcast, NULL);
}

static void test_nccl_reduce(void **state)
{
	(void)state;
	nccl_worlds(1, body_reduce, NULL);
}

static void test_nccl_all_gather(void **state)
{
	(void)state;
	nccl_worlds(1, body_all_gather, NULL);
}

static void test_nccl_send_recv(void **state)
{
	(void)state;
	nccl_worlds(2, body_send_recv, NULL);
}

/* the crossing order: every rank posts its isend before its irecv */
static void test_nccl_isend_irecv(void **state)
{
	(void)state;
	nccl_worlds(2, body_isend_irecv, NULL);
}

static void test_nccl_async(void **state)
{
	(void)state;
	nccl_worlds(1, body_async, NULL);
}

static void test_nccl_barrier(void **state)
{
	int *arrived = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	(void)state;
	assert_true(arrived != MAP_FAILED);
	if (gpu_count() < 2) {
		munmap(arrived, 4096);
		fprintf(stderr, "%d CUDA device(s), 2 needed: skipped\n",
			gpu_count());
		skip();
	}
	for (int w = 2; w <= 4 && w <= gpu_count(); w++) {
		memset(arrived, 0, 4096);
		run_group_on(DIST_BACKEND_NCCL, w, NCCL_TIMEOUT_MS,
			     body_barrier, arrived);
	}
	munmap(arrived, 4096);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nccl_backend),
	    cmocka_unit_test(test_nccl_all_reduce),
	    cmocka_unit_test(test_nccl_broadcast),
	    cmocka_unit_test(test_nccl_reduce),
	    cmocka_unit_test(test_nccl_all_gather),
	    cmocka_unit_test(test_nccl_send_recv),
	    cmocka_unit_test(test_nccl_isend_irecv),
	    cmocka_unit_test(test_nccl_async),
	    cmocka_unit_test(test_nccl_barrier),
	};
	log_init("test_dist_nccl");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
