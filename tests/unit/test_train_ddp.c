/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_train_ddp.c - the DDP layer in one process: bucket plans and the
 * host helpers (multi-rank behaviour is covered by tests/e2e/train_*.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../trainer/mlp.h"
#include "../../trainer/ddp.h"

static void test_ddp_bucket_plan(void **state)
{
	struct train_backend be;
	struct mlp_shape s;
	struct mlp *m = NULL;
	struct train_ddp *t = NULL;
	char err[128];
	double v[2] = {1.5, 2.5};
	uint64_t u = 7;

	(void)state;
	train_backend_cpu(&be, 1);
	assert_int_equal(
	    mlp_shape_parse("784-256-128-10", &s, err, sizeof(err)), 0);
	assert_int_equal(mlp_new(&s, &be, 4, &m), 0);
	/* 128 KiB: the 10-wide layer alone, the 128-wide alone, the first */
	assert_int_equal(train_ddp_new(NULL, m, &be, 128 * 1024, &t), 0);
	assert_int_equal(train_ddp_bucket_count(t), 3);
	train_ddp_free(t);
	/* a huge bucket holds everything */
	assert_int_equal(train_ddp_new(NULL, m, &be, 1u << 30, &t), 0);
	assert_int_equal(train_ddp_bucket_count(t), 1);
	assert_int_equal(train_ddp_world_size(t), 1);
	assert_int_equal(train_ddp_sum_host(t, v, 2), 0);
	assert_true(v[0] == 1.5 && v[1] == 2.5);
	assert_int_equal(train_ddp_broadcast_host(t, &u, 1), 0);
	assert_true(u == 7);
	train_ddp_free(t);
	/* a tiny one: one bucket per layer */
	assert_int_equal(train_ddp_new(NULL, m, &be, 4, &t), 0);
	assert_int_equal(train_ddp_bucket_count(t), 3);
	train_ddp_free(t);
	mlp_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ddp_bucket_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
