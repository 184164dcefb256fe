/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mlp.c - the trainer's model and optimizer on the CPU backend:
 * shape parsing, gradients against finite differences (with and without
 * batch norm), batch splitting, SGD semantics, and learning on synthetic data.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../trainer/data.h"
#include "../../trainer/mlp.h"
#include "../../trainer/optim.h"
#include "../../trainer/rng.h"
#include "dlaunch/error.h"

static void test_shape_parse(void **state)
{
	struct mlp_shape s;
	char err[256], text[64];

	(void)state;
	assert_int_equal(
	    mlp_shape_parse("784-256-128-10", &s, err, sizeof(err)), 0);
	assert_int_equal(s.n_layers, 3);
	assert_int_equal(s.widths[0], 784);
	assert_int_equal(s.widths[3], 10);
	assert_int_equal(mlp_param_count(&s),
			 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
	mlp_shape_format(&s, text, sizeof(text));
	assert_string_equal(text, "784-256-128-10");
	s.batch_norm = 1;
	assert_int_equal(mlp_param_count(&s), 784 * 256 + 256 + 256 * 128 +
						  128 + 128 * 10 + 10 +
						  2 * (256 + 128));
	assert_int_equal(mlp_buffer_count(&s), 2 * (256 + 128));

	const char *bad[] = {"",	 "784",	    "784-",
			     "-10",	 "784--10", "784-x-10",
			     "784-0-10", "784-1",   "784-99999999-10",
			     "7 84-10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_not_equal(
		    mlp_shape_parse(bad[i], &s, err, sizeof(err)), 0);
		assert_non_null(strstr(err, "model"));
	}
}

/* random_batch fills x with normals and labels in [0, classes). */
static void random_batch(uint64_t seed, float *x, int32_t *y, int rows, int dim,
			 int classes)
{
	struct train_rng rng;

	train_rng_seed(&rng, seed, 1);
	for (int i = 0; i < rows * dim; i++)
		x[i] = train_rng_normal(&rng);
	for (int i = 0; i < rows; i++)
		y[i] = (int32_t)train_rng_below(&rng, (uint64_t)classes);
}

static void gradient_check(int batch_norm)
{
	struct train_backend be;
	struct mlp_shape s;
	struct mlp *m = NULL;
	char err[128];
	const int rows = 8;
	float x[8 * 6], *p, *g, *q;
	int32_t y[8];
	size_t n;
	double loss, lp, lm, worst = 0;

	train_backend_cpu(&be, 1);
	assert_int_equal(mlp_shape_parse("6-7-5-3", &s, err, sizeof(err)), 0);
	s.batch_norm = batch_norm;
	n = mlp_param_count(&s);
	p = malloc(n * sizeof(float));
	g = malloc(n * sizeof(float));
	q = malloc(n * sizeof(float));
	assert_non_null(p);
	assert_non_null(g);
	assert_non_null(q);
	mlp_init_params(&s, 7, p, NULL);
	/* move gamma/beta off 1/0 so their gradients are exercised fully */
	for (size_t i = 0; i < n; i++)
		p[i] *= 1.5f;
	random_batch(3, x, y, rows, 6, 3);
	assert_int_equal(mlp_new(&s, &be, rows, &m), 0);
	assert_int_equal(mlp_set_params(m, p, NULL), 0);
	assert_int_equal(mlp_loss_host(m, x, y, rows, &loss, g), 0);
	assert_true(loss > 0);
	for (size_t i = 0; i < n; i++) {
		const float h = 1e-3f; /* small: fewer relu kinks crossed */
		double numeric, diff, scale;

		memcpy(q, p, n * sizeof(float));
		q[i] = p[i] + h;
		assert_int_equal(mlp_set_params(m, q, NULL), 0);
		assert_int_equal(mlp_loss_host(m, x, y, rows, &lp, NULL), 0);
		q[i] = p[i] - h;
		assert_int_equal(mlp_set_params(m, q, NULL), 0);
		assert_int_equal(mlp_loss_host(m, x, y, rows, &lm, NULL), 0);
		numeric = (lp - lm) / (2.0 * ((double)(p[i] + h) - p[i]));
		diff = fabs(numeric - g[i]);
		scale = fmax(1e-2, fabs(numeric) + fabs(g[i]));
		if (diff / scale > worst)
			worst = diff / scale;
		if (diff > 2e-3 && diff / scale > 2e-2)
			fail_msg("param %zu: analytic %g numeric %g", i,
				 (double)g[i], numeric);
	}
	print_message("gradient check%s: worst relative error %.2e over %zu "
		      "parameters\n",
		      batch_norm ? " (batch norm)" : "", worst, n);
	mlp_free(m);
	free(p);
	free(g);
	free(q);
}

static void test_gradient_check(void **state)
{
	(void)state;
	gradient_check(0);
}

static void test_gradient_check_batch_norm(void **state)
{
	(void)state;
	gradient_check(1);
}

/* Two halves of a batch, each scaled by the global row count, sum to the
 * gradient of the whole batch: what DDP's all-reduce relies on. */
static void test_split_batch_sums(void **state)
{
	struct train_backend be;
	struct mlp_shape s;
	struct mlp *m = NULL;
	char err[128];
	float x[10 * 4], *p, *whole, *part;
	int32_t y[10];
	double st[2] = {0, 0}, st2[2] = {0, 0};
	size_t n;

	(void)state;
	train_backend_cpu(&be, 1);
	assert_int_equal(mlp_shape_parse("4-9-3", &s, err, sizeof(err)), 0);
	n = mlp_param_count(&s);
	p = malloc(n * sizeof(float));
	whole = malloc(n * sizeof(float));
	part = calloc(n, sizeof(float));
	mlp_init_params(&s, 11, p, NULL);
	random_batch(5, x, y, 10, 4, 3);
	assert_int_equal(mlp_new(&s, &be, 10, &m), 0);
	assert_int_equal(mlp_set_params(m, p, NULL), 0);
	assert_int_equal(mlp_train_step(m, x, y, 10, 10, NULL, st), 0);
	memcpy(whole, mlp_grads(m), n * sizeof(float));
	/* uneven split 3 + 7, and a rank with nothing */
	assert_int_equal(mlp_train_step(m, x, y, 3, 10, NULL, st2), 0);
	for (size_t i = 0; i < n; i++)
		part[i] += mlp_grads(m)[i];
	assert_int_equal(mlp_train_step(m, x + 3 * 4, y + 3, 7, 10, NULL, st2),
			 0);
	for (size_t i = 0; i < n; i++)
		part[i] += mlp_grads(m)[i];
	assert_int_equal(mlp_train_step(m, x, y, 0, 10, NULL, st2), 0);
	for (size_t i = 0; i < n; i++) {
		assert_true(mlp_grads(m)[i] == 0.0f);
		assert_true(fabsf(part[i] - whole[i]) <= 1e-5f);
	}
	assert_true(fabs(st[0] - st2[0]) < 1e-4);
	assert_true(st[1] == st2[1]);
	assert_int_equal(mlp_train_step(m, x, y, 11, 10, NULL, st2), DL_EINVAL);
	mlp_free(m);
	free(p);
	free(whole);
	free(part);
}

static void test_sgd_semantics(void **state)
{
	struct train_backend be;
	struct train_optim o;
	float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f}, m[2];

	(void)state;
	train_backend_cpu(&be, 1);
	assert_int_equal(train_optim_init(&o, &be, 2, 0.1f, 0.9f, 0.01f), 0);
	/* step 1: buf = g + wd p; p -= lr buf */
	train_optim_step(&o, p, g, 0.1f);
	assert_float_equal(p[0], 1.0f - 0.1f * (0.5f + 0.01f), 1e-6);
	assert_float_equal(p[1], -2.0f - 0.1f * (0.25f - 0.02f), 1e-6);
	assert_int_equal(train_optim_get(&o, m), 0);
	assert_float_equal(m[0], 0.51f, 1e-6);
	/* step 2: buf = 0.9 buf + g + wd p */
	{
		float p0 = p[0], expect_buf = 0.9f * 0.51f + 0.5f + 0.01f * p0;

		train_optim_step(&o, p, g, 0.1f);
		assert_float_equal(p[0], p0 - 0.1f * expect_buf, 1e-6);
	}
	train_optim_release(&o);
}

static void test_learns_synthetic(void **state)
{
	struct train_backend be;
	struct mlp_shape s;
	struct dataset train, test;
	struct mlp *m = NULL;
	struct train_optim o;
	char err[128];
	float *p, x[32 * 20];
	int32_t y[32];
	uint32_t idx[32];
	double first = 0, last = 0, eval[2] = {0, 0};
	const int steps = 300;

	(void)state;
	train_backend_cpu(&be, 1);
	assert_int_equal(mlp_shape_parse("20-32-4", &s, err, sizeof(err)), 0);
	assert_int_equal(data_synthetic(2000, 20, 4, 9, &train, &test), 0);
	p = malloc(mlp_param_count(&s) * sizeof(float));
	mlp_init_params(&s, 1, p, NULL);
	assert_int_equal(mlp_new(&s, &be, 32, &m), 0);
	assert_int_equal(mlp_set_params(m, p, NULL), 0);
	assert_int_equal(
	    train_optim_init(&o, &be, mlp_param_count(&s), 0.05f, 0.9f, 0.0f),
	    0);
	for (int step = 0; step < steps; step++) {
		double st[2] = {0, 0};

		for (int i = 0; i < 32; i++)
			idx[i] = (uint32_t)((step * 32 + i) % 2000);
		data_gather(&train, idx, 32, x, y);
		assert_int_equal(mlp_train_step(m, x, y, 32, 32, NULL, st), 0);
		train_optim_step(&o, mlp_params(m), mlp_grads(m), 0.05f);
		if (step < 10)
			first += st[0] / 32;
		if (step >= steps - 10)
			last += st[0] / 32;
	}
	assert_int_equal(
	    mlp_evaluate(m, test.f32, test.labels, (int)test.n, eval), 0);
	print_message("synthetic: loss %.3f -> %.3f, test accuracy %.3f\n",
		      first / 10, last / 10, eval[1] / (double)test.n);
	assert_true(last < 0.5 * first);
	assert_true(eval[1] / (double)test.n > 0.8);
	train_optim_release(&o);
	mlp_free(m);
	free(p);
	data_release(&train);
	data_release(&test);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shape_parse),
	    cmocka_unit_test(test_gradient_check),
	    cmocka_unit_test(test_gradient_check_batch_norm),
	    cmocka_unit_test(test_split_batch_sums),
	    cmocka_unit_test(test_sgd_semantics),
	    cmocka_unit_test(test_learns_synthetic),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
