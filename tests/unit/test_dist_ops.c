/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist_ops.c - every collective and point-to-point operation of the
 * collective library on the TCP backend, checked against a serial
 * reference at world sizes 1 to 4 (2 to 4 for point to point), from one
 * element through small odd counts to one case of more than 10 MiB per
 * operation (and reduction op) and world size, a count that no world
 * size or chunk size divides. The bodies are dist_bodies.c's; the
 * harness is dist_fix.c's.
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

/* ---- tests ---- */

static void test_all_reduce_matrix(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_all_reduce_matrix, NULL);
}

static void test_all_reduce_bits(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_all_reduce_bits, NULL);
}

static void test_all_reduce_large(void **state)
{
	struct large_case c2 = {10u << 20, DIST_SUM}; /* 40 MB, even */
	(void)state;
	tcp_worlds(1, 30000, body_all_reduce_large, NULL);
	run_group(2, 30000, body_all_reduce_one, &c2);
}

static void test_broadcast(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_broadcast, NULL);
}

static void test_reduce(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_reduce, NULL);
}

static void test_all_gather(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_all_gather, NULL);
}

static void test_send_recv(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_send_recv, NULL);
}

static void test_isend_irecv(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_isend_irecv, NULL);
}

static void test_async(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_async, NULL);
}

static void test_barrier(void **state)
{
	(void)state;
	for (int w = 2; w <= 4; w++) {
		int *arrived = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		assert_true(arrived != MAP_FAILED);
		run_group(w, 20000, body_barrier, arrived);
		munmap(arrived, 4096);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_reduce_matrix),
	    cmocka_unit_test(test_all_reduce_bits),
	    cmocka_unit_test(test_all_reduce_large),
	    cmocka_unit_test(test_broadcast),
	    cmocka_unit_test(test_reduce),
	    cmocka_unit_test(test_all_gather),
	    cmocka_unit_test(test_send_recv),
	    cmocka_unit_test(test_isend_irecv),
	    cmocka_unit_test(test_async),
	    cmocka_unit_test(test_barrier),
	};
	log_init("test_dist_ops");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
