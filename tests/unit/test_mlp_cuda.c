/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mlp_cuda.c - the GPU backend (trainer/mlp_cuda.cu) against the CPU
 * backend, which test_mlp.c checks against finite differences: one
 * training step of the same model from the same parameters, with and
 * without batch norm, must give the same forward loss and accuracy, every
 * gradient, the batch-norm running statistics and the SGD update (two
 * steps: the first initialises momentum, the second uses it), within
 *     |cuda - cpu| <= TOL_ABS + TOL_REL * |cpu|
 * (fp32 on both; the sums run in other orders, so the last bits differ).
 * The GPU must also repeat itself bit for bit (fixed-order sums), and a
 * failed cuBLAS call or kernel launch must stick: logged once with the
 * call, and every later status DL_EIO.
 *
 * Needs a CUDA build and a visible GPU; elsewhere every case is skipped
 * with one line saying why.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trainer/mlp.h"
#include "../../trainer/optim.h"
#include "../../trainer/rng.h"
#include "dlaunch/error.h"

#define TOL_ABS 1e-5
#define TOL_REL 1e-4
#define ROWS	64

static const char *no_gpu; /* why every case is skipped, or NULL */

static void need_gpu(void)
{
	if (no_gpu)
		skip();
}

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

/* close_all: every a[i] is within the tolerance of b[i]; prints the
 * worst one of what (to stderr) when not */
static int close_all(const char *what, const float *a, const float *b, size_t n)
{
	size_t worst = 0;
	double worst_excess = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		double excess = d - (TOL_ABS + TOL_REL * fabs((double)b[i]));

		if (isnan(a[i]) || excess > worst_excess) {
			worst = i;
			worst_excess = isnan(a[i]) ? INFINITY : excess;
		}
	}
	if (worst_excess > 0)
		fprintf(stderr, "%s[%zu]: cuda %.9g, cpu %.9g\n", what, worst,
			(double)a[worst], (double)b[worst]);
	return worst_excess <= 0;
}

struct side {
	struct train_backend be;
	struct mlp *m;
	struct train_optim opt;
	float *grads, *params, *buffers; /* host copies */
};

static void side_open(struct side *s, const struct mlp_shape *shape, int gpu,
		      const float *params, const float *buffers)
{
	char err[256];
	size_t n = mlp_param_count(shape), nb = mlp_buffer_count(shape);

	memset(s, 0, sizeof(*s));
	if (gpu) {
		int rc = train_backend_cuda(&s->be, 0, err, sizeof(err));

		if (rc != 0)
			fail_msg("train_backend_cuda: %s", err);
	} else {
		train_backend_cpu(&s->be, 1);
	}
	assert_int_equal(mlp_new(shape, &s->be, ROWS, &s->m), 0);
	assert_int_equal(mlp_set_params(s->m, params, buffers), 0);
	assert_int_equal(
	    train_optim_init(&s->opt, &s->be, n, 0.05f, 0.9f, 5e-4f), 0);
	s->grads = calloc(n, sizeof(float));
	s->params = calloc(n, sizeof(float));
	s->buffers = calloc(nb ? nb : 1, sizeof(float));
	assert_true(s->grads && s->params && s->buffers);
}

static void side_close(struct side *s)
{
	train_optim_release(&s->opt);
	mlp_free(s->m);
	train_backend_release(&s->be);
	free(s->grads);
	free(s->params);
	free(s->buffers);
}

/* side_step: one training step (loss and hits into stats), its gradients
 * copied to the host, the SGD update, and the parameters and buffers
 * after it copied to the host */
static void side_step(struct side *s, const float *x, const int32_t *y,
		      double stats[2])
{
	size_t n = mlp_param_count(mlp_shape(s->m));

	stats[0] = stats[1] = 0;
	assert_int_equal(mlp_train_step(s->m, x, y, ROWS, ROWS, NULL, stats),
			 0);
	assert_int_equal(s->be.download(s->be.ctx, s->grads, mlp_grads(s->m),
					n * sizeof(float)),
			 0);
	train_optim_step(&s->opt, mlp_params(s->m), mlp_grads(s->m), 0.05f);
	assert_int_equal(mlp_get_params(s->m, s->params, s->buffers), 0);
	assert_int_equal(s->be.sync(s->be.ctx), 0);
}

static void step_matches_cpu(int batch_norm)
{
	struct mlp_shape shape;
	struct side cpu, gpu, again;
	char err[128];
	float *params, *buffers, x[ROWS * 20];
	int32_t y[ROWS];
	size_t n, nb;

	need_gpu();
	assert_int_equal(
	    mlp_shape_parse("20-32-16-5", &shape, err, sizeof(err)), 0);
	shape.batch_norm = batch_norm;
	n = mlp_param_count(&shape);
	nb = mlp_buffer_count(&shape);
	params = calloc(n, sizeof(float));
	buffers = calloc(nb ? nb : 1, sizeof(float));
	assert_true(params && buffers);
	mlp_init_params(&shape, 7, params, buffers);
	side_open(&cpu, &shape, 0, params, buffers);
	side_open(&gpu, &shape, 1, params, buffers);
	side_open(&again, &shape, 1, params, buffers);
	for (int step = 0; step < 2; step++) {
		double sc[2], sg[2], sa[2];

		random_batch(100 + (uint64_t)step, x, y, ROWS, 20, 5);
		side_step(&cpu, x, y, sc);
		side_step(&gpu, x, y, sg);
		side_step(&again, x, y, sa);
		fprintf(stderr, "step %d: loss sum cpu %.9g cuda %.9g\n", step,
			sc[0], sg[0]);
		assert_true(fabs(sg[0] - sc[0]) <=
			    TOL_ABS * ROWS + TOL_REL * fabs(sc[0]));
		assert_true(sg[1] == sc[1]); /* the same hits */
		assert_true(close_all("gradient", gpu.grads, cpu.grads, n));
		assert_true(close_all("parameter after sgd", gpu.params,
				      cpu.params, n));
		if (nb)
			assert_true(close_all("running statistic", gpu.buffers,
					      cpu.buffers, nb));
		/* the GPU repeats itself bit for bit */
		assert_memory_equal(sa, sg, sizeof(sg));
		assert_memory_equal(again.grads, gpu.grads, n * sizeof(float));
		assert_memory_equal(again.params, gpu.params,
				    n * sizeof(float));
	}
	/* evaluation (running statistics for batch norm) agrees too */
	{
		double ec[2] = {0, 0}, eg[2] = {0, 0};

		random_batch(999, x, y, ROWS, 20, 5);
		assert_int_equal(mlp_evaluate(cpu.m, x, y, ROWS, ec), 0);
		assert_int_equal(mlp_evaluate(gpu.m, x, y, ROWS, eg), 0);
		assert_true(fabs(eg[0] - ec[0]) <=
			    TOL_ABS * ROWS + TOL_REL * fabs(ec[0]));
		assert_true(eg[1] == ec[1]);
	}
	side_close(&cpu);
	side_close(&gpu);
	side_close(&again);
	free(params);
	free(buffers);
}

static void test_cuda_step_plain(void **state)
{
	(void)state;
	step_matches_cpu(0);
}

static void test_cuda_step_batch_norm(void **state)
{
	(void)state;
	step_matches_cpu(1);
}

/* stderr_to / stderr_back: catch what the backend logs */
static int stderr_to(FILE *f)
{
	int saved = dup(2);

	fflush(stderr);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(f), 2) == 2);
	return saved;
}

static void stderr_back(int saved, FILE *f, char *text, size_t size)
{
	size_t got;

	fflush(stderr);
	assert_true(dup2(saved, 2) == 2);
	close(saved);
	rewind(f);
	got = fread(text, 1, size - 1, f);
	text[got] = '\0';
	fclose(f);
}

/* sticky: after the first failure nothing more is queued, every status
 * is DL_EIO and only that failure is logged, naming its call */
static void expect_sticky(struct train_backend *be, float *dev,
			  const char *text, const char *call)
{
	float host[4] = {1, 2, 3, 4};

	fprintf(stderr, "logged: %s", text);
	assert_non_null(strstr(text, call));
	assert_non_null(strstr(text, "failed"));
	assert_int_equal(be->sync(be->ctx), DL_EIO);
	assert_int_equal(be->upload(be->ctx, dev, host, sizeof(host)), DL_EIO);
	assert_int_equal(be->download(be->ctx, host, dev, sizeof(host)),
			 DL_EIO);
}

static void test_cuda_errors_stick(void **state)
{
	struct train_backend be;
	char err[256], text[2048];
	float *dev;
	FILE *f;
	int saved;

	(void)state;
	need_gpu();
	/* cuBLAS: ldc 0 is an invalid argument */
	assert_int_equal(train_backend_cuda(&be, 0, err, sizeof(err)), 0);
	dev = be.alloc(be.ctx, 64 * sizeof(float));
	assert_non_null(dev);
	assert_int_equal(be.sync(be.ctx), 0);
	f = tmpfile();
	assert_non_null(f);
	saved = stderr_to(f);
	be.gemm(be.ctx, 0, 0, 4, 4, 4, 1.0f, dev, 4, dev, 4, 0.0f, dev, 0);
	be.relu(be.ctx, dev, 16); /* not queued, not logged */
	stderr_back(saved, f, text, sizeof(text));
	expect_sticky(&be, dev, text, "cublasSgemm");
	assert_null(strstr(text, "k_relu"));
	be.release(be.ctx, dev);
	train_backend_release(&be);

	/* a kernel launch: 2^31 blocks is past the grid's limit, so the
	 * launch fails before touching memory */
	assert_int_equal(train_backend_cuda(&be, 0, err, sizeof(err)), 0);
	dev = be.alloc(be.ctx, 64 * sizeof(float));
	assert_non_null(dev);
	f = tmpfile();
	assert_non_null(f);
	saved = stderr_to(f);
	be.relu(be.ctx, dev, (size_t)1 << 39);
	stderr_back(saved, f, text, sizeof(text));
	expect_sticky(&be, dev, text, "k_relu");
	be.release(be.ctx, dev);
	train_backend_release(&be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cuda_step_plain),
	    cmocka_unit_test(test_cuda_step_batch_norm),
	    cmocka_unit_test(test_cuda_errors_stick),
	};
	int gpus = train_backend_cuda_available();

	if (gpus <= 0) {
#ifdef DLAUNCH_HAVE_CUDA
		no_gpu = "no CUDA device visible";
#else
		no_gpu = "a build without CUDA";
#endif
		printf("skip - test_mlp_cuda: %s (the GPU backend is compared "
		       "with the CPU's only on a GPU)\n",
		       no_gpu);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
