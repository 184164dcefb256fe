/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist_config.c - the collective library's configuration and
 * arguments, in this process: DLAUNCH_DIST_* and torchrun's variables
 * read from the environment, a world of one (every operation local, bad
 * arguments refused) and a master port someone else holds.
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

/* ---- configuration and arguments (in this process, no sockets) ---- */

static void clear_env(void)
{
	const char *vars[] = {"RANK",	     "WORLD_SIZE",
			      "LOCAL_RANK",  "MASTER_ADDR",
			      "MASTER_PORT", "DLAUNCH_DIST_TIMEOUT"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_config_from_env(void **state)
{
	struct dist_config cfg;
	char err[256];
	(void)state;
	clear_env();
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.rank, 0);
	assert_int_equal(cfg.world_size, 1);
	assert_int_equal(cfg.backend, DIST_BACKEND_TCP);
	assert_true(cfg.timeout_ms == 300000);

	setenv("RANK", "1", 1);
	setenv("WORLD_SIZE", "4", 1);
	setenv("LOCAL_RANK", "3", 1);
	setenv("MASTER_ADDR", "head.example", 1);
	setenv("MASTER_PORT", "29500", 1);
	setenv("DLAUNCH_DIST_TIMEOUT", "5s", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.rank, 1);
	assert_int_equal(cfg.world_size, 4);
	assert_int_equal(cfg.cuda_device, 3);
	assert_string_equal(cfg.master_addr, "head.example");
	assert_int_equal(cfg.master_port, 29500);
	assert_true(cfg.timeout_ms == 5000);

	setenv("RANK", "4", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_ERANGE);
	assert_non_null(strstr(err, "RANK=4"));
	setenv("RANK", "x1", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "RANK"));
	setenv("RANK", "1", 1);
	setenv("MASTER_PORT", "70000", 1);
	assert_int_not_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "MASTER_PORT"));
	unsetenv("MASTER_PORT");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "MASTER_PORT"));
	setenv("MASTER_PORT", "29500", 1);
	unsetenv("MASTER_ADDR");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "MASTER_ADDR"));
	setenv("MASTER_ADDR", "head.example", 1);
	setenv("DLAUNCH_DIST_TIMEOUT", "soon", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "DLAUNCH_DIST_TIMEOUT"));
	unsetenv("DLAUNCH_DIST_TIMEOUT");
	unsetenv("WORLD_SIZE");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "WORLD_SIZE"));
	clear_env();
}

/* A world of one: every operation is local; bad arguments are refused. */
static void test_world_one_and_bad_args(void **state)
{
	struct dist_config cfg = make_cfg(0, 0, 1, 1000);
	struct dist *d = NULL;
	struct dist_req *req = NULL;
	char err[256];
	float a[3] = {1, 2, 3}, b[3] = {0}, g[3] = {0};
	(void)state;
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), 0);
	assert_int_equal(dist_rank(d), 0);
	assert_int_equal(dist_world_size(d), 1);
	assert_int_equal(dist_get_backend(d), DIST_BACKEND_TCP);
	assert_int_equal(dist_all_reduce(d, a, b, 3, DIST_FLOAT32, DIST_AVG),
			 0);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(dist_broadcast(d, a, 3, DIST_FLOAT32, 0), 0);
	assert_int_equal(dist_reduce(d, a, g, 3, DIST_FLOAT32, DIST_MAX, 0), 0);
	assert_memory_equal(a, g, sizeof(a));
	memset(g, 0, sizeof(g));
	assert_int_equal(dist_all_gather(d, a, g, 3, DIST_FLOAT32), 0);
	assert_memory_equal(a, g, sizeof(a));
	assert_int_equal(dist_barrier(d), 0);
	assert_int_equal(
	    dist_iall_reduce(d, a, 3, DIST_FLOAT32, DIST_SUM, &req), 0);
	assert_int_equal(dist_wait(req), 0);
	assert_int_equal(dist_all_reduce(d, a, b, 0, DIST_FLOAT32, DIST_SUM),
			 0);

	/* refused, nothing done */
	assert_int_equal(dist_send(d, a, 3, DIST_FLOAT32, 0), DL_EINVAL);
	assert_int_equal(dist_recv(d, a, 3, DIST_FLOAT32, 1), DL_EINVAL);
	req = (struct dist_req *)&req;
	assert_int_equal(dist_isend(d, a, 3, DIST_FLOAT32, -1, &req),
			 DL_EINVAL);
	assert_int_equal(dist_broadcast(d, a, 3, DIST_FLOAT32, 1), DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, 3, (enum dist_dtype)9, DIST_SUM),
	    DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, 3, DIST_FLOAT32, (enum dist_op)7),
	    DL_EINVAL);
	assert_int_equal(dist_all_reduce(d, NULL, b, 3, DIST_FLOAT32, DIST_SUM),
			 DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, SIZE_MAX / 2, DIST_FLOAT32, DIST_SUM),
	    DL_ERANGE);
	assert_int_equal(dist_wait(NULL), DL_EINVAL);
	dist_free(d);
	dist_free(NULL);

	/* configurations that cannot form a group */
	cfg = make_cfg(0, 0, 0, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ERANGE);
	assert_null(d);
	assert_non_null(strstr(err, "world size"));
	cfg = make_cfg(1234, 2, 2, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ERANGE);
	assert_non_null(strstr(err, "rank 2"));
	cfg = make_cfg(0, 0, 2, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_EINVAL);
	assert_non_null(strstr(err, "port"));
}

/* The master port taken by someone else: a clear error at once. */
static void test_master_port_busy(void **state)
{
	uint16_t port;
	int lfd = listen_loopback(&port);
	struct dist_config cfg = make_cfg(port, 0, 2, 5000);
	struct dist *d = NULL;
	char err[256];
	(void)state;
	uint64_t start = clock_now_ms();
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ESYS);
	assert_true(clock_now_ms() - start < 2000);
	assert_non_null(strstr(err, "cannot listen"));
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_from_env),
	    cmocka_unit_test(test_world_one_and_bad_args),
	    cmocka_unit_test(test_master_port_busy),
	};
	log_init("test_dist_config");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
