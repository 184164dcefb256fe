/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp_cpu.c - the host backend of the trainer's kernels: cblas sgemm for the
 * matrix products, plain loops (which the compiler vectorises) for the rest.
 * Every loop runs in a fixed order, so results are bit-reproducible for a
 * given BLAS thread count.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend.h"

static void *cpu_alloc(void *ctx, size_t bytes)
{
	void *p = NULL;

	(void)ctx;
	/* 64-byte alignment keeps BLAS and vector loops on full lines */
	if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void cpu_release(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static int cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
	(void)ctx;
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

static void cpu_zero(void *ctx, void *p, size_t bytes)
{
	(void)ctx;
	memset(p, 0, bytes);
}

static int cpu_sync(void *ctx)
{
	(void)ctx;
	return 0;
}

static void *cpu_stream(void *ctx)
{
	(void)ctx;
	return NULL;
}

static void cpu_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k,
		     float alpha, const float *a, int lda, const float *b,
		     int ldb, float beta, float *c, int ldc)
{
	(void)ctx;
	cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
		    trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda,
		    b, ldb, beta, c, ldc);
}

static void cpu_bias_add(void *ctx, float *y, const float *bias, int rows,
			 int cols)
{
	(void)ctx;
	for (int r = 0; r < rows; r++) {
		float *row = y + (size_t)r * (size_t)cols;

		for (int c = 0; c < cols; c++)
			row[c] += bias[c];
	}
}

static void cpu_bias_grad(void *ctx, float *db, const float *dy, int rows,
			  int cols)
{
	(void)ctx;
	memset(db, 0, (size_t)cols * sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float *row = dy + (size_t)r * (size_t)cols;

		for (int c = 0; c < cols; c++)
			db[c] += row[c];
	}
}

static void cpu_relu(void *ctx, float *y, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

static void cpu_relu_backward(void *ctx, float *dy, const float *y, size_t n)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

static void cpu_softmax_xent(void *ctx, const float *logits,
			     const int32_t *labels, int rows, int cols,
			     float grad_scale, float *dlogits, float *out)
{
	float loss_sum = 0.0f, correct = 0.0f;

	(void)ctx;
	for (int r = 0; r < rows; r++) {
		const float *z = logits + (size_t)r * (size_t)cols;
		int y = labels[r], arg = 0;
		float max = z[0], sum = 0.0f;

		for (int c = 1; c < cols; c++)
			if (z[c] > max) {
				max = z[c];
				arg = c;
			}
		for (int c = 0; c < cols; c++)
			sum += expf(z[c] - max);
		loss_sum += logf(sum) - (z[y] - max);
		correct += arg == y ? 1.0f : 0.0f;
		if (dlogits) {
			float *d = dlogits + (size_t)r * (size_t)cols;
			float inv = 1.0f / sum;

			for (int c = 0; c < cols; c++)
				d[c] = expf(z[c] - max) * inv * grad_scale;
			d[y] -= grad_scale;
		}
	}
	out[0] += loss_sum;
	out[1] += correct;
}

static void cpu_sgd(void *ctx, float *p, const float *grad, float *m, size_t n,
		    float lr, float momentum, float weight_decay, int first)
{
	(void)ctx;
	if (momentum == 0.0f) {
		for (size_t i = 0; i < n; i++)
			p[i] -= lr * (grad[i] + weight_decay * p[i]);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		float g = grad[i] + weight_decay * p[i];

		m[i] = first ? g : momentum * m[i] + g;
		p[i] -= lr * m[i];
	}
}

static void cpu_bn_stats(void *ctx, const float *x, int rows, int cols,
			 float *sums)
{
	(void)ctx;
	memset(sums, 0, 2 * (size_t)cols * sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float *row = x + (size_t)r * (size_t)cols;

		for (int c = 0; c < cols; c++) {
			sums[c] += row[c];
			sums[cols + c] += row[c] * row[c];
		}
	}
}

static void cpu_bn_finalize(void *ctx, const float *sums, float n, int cols,
			    float eps, float momentum, float *mean,
			    float *invstd, float *running_mean,
			    float *running_var)
{
	(void)ctx;
	for (int c = 0; c < cols; c++) {
		float mu = sums[c] / n;
		float var = sums[cols + c] / n - mu * mu;

		if (var < 0.0f)
			var = 0.0f;
		mean[c] = mu;
		invstd[c] = 1.0f / sqrtf(var + eps);
		if (momentum > 0.0f) {
			float unbiased = n > 1.0f ? var * n / (n - 1.0f) : var;

			running_mean[c] =
			    (1.0f - momentum) * running_mean[c] + momentum * mu;
			running_var[c] = (1.0f - momentum) * running_var[c] +
					 momentum * unbiased;
		}
	}
}

static void cpu_bn_forward(void *ctx, float *x, float *xhat, const float *mean,
			   const float *invstd, const float *gamma,
			   const float *beta, int rows, int cols)
{
	(void)ctx;
	for (int r = 0; r < rows; r++) {
		float *row = x + (size_t)r * (size_t)cols;
		float *hrow = xhat ? xhat + (size_t)r * (size_t)cols : NULL;

		for (int c = 0; c < cols; c++) {
			float h = (row[c] - mean[c]) * invstd[c];

			if (hrow)
				hrow[c] = h;
			row[c] = gamma[c] * h + beta[c];
		}
	}
}

static void cpu_bn_backward_sums(void *ctx, const float *dy, const float *xhat,
				 int rows, int cols, float *sums)
{
	(void)ctx;
	memset(sums, 0, 2 * (size_t)cols * sizeof(float));
	for (int r = 0; r < rows; r++) {
		const float *d = dy + (size_t)r * (size_t)cols;
		const float *h = xhat + (size_t)r * (size_t)cols;

		for (int c = 0; c < cols; c++) {
			sums[c] += d[c];
			sums[cols + c] += d[c] * h[c];
		}
	}
}

static void cpu_bn_backward(void *ctx, float *dy, const float *xhat,
			    const float *gamma, const float *invstd,
			    const float *sums, float n, int rows, int cols)
{
	(void)ctx;
	for (int r = 0; r < rows; r++) {
		float *d = dy + (size_t)r * (size_t)cols;
		const float *h = xhat + (size_t)r * (size_t)cols;

		for (int c = 0; c < cols; c++)
			d[c] = gamma[c] * invstd[c] *
			       (d[c] - sums[c] / n - h[c] * sums[cols + c] / n);
	}
}

void train_backend_cpu(struct train_backend *be, int threads)
{
	memset(be, 0, sizeof(*be));
	if (threads > 0)
		openblas_set_num_threads(threads);
	be->name = "cpu";
	be->alloc = cpu_alloc;
	be->release = cpu_release;
	be->upload = cpu_copy;
	be->download = cpu_copy;
	be->copy = cpu_copy;
	be->zero = cpu_zero;
	be->sync = cpu_sync;
	be->stream = cpu_stream;
	be->gemm = cpu_gemm;
	be->bias_add = cpu_bias_add;
	be->bias_grad = cpu_bias_grad;
	be->relu = cpu_relu;
	be->relu_backward = cpu_relu_backward;
	be->softmax_xent = cpu_softmax_xent;
	be->sgd = cpu_sgd;
	be->bn_stats = cpu_bn_stats;
	be->bn_finalize = cpu_bn_finalize;
	be->bn_forward = cpu_bn_forward;
	be->bn_backward_sums = cpu_bn_backward_sums;
	be->bn_backward = cpu_bn_backward;
}

const char *train_backend_cpu_better_core(void)
{
	const char *name;

	if (getenv("OPENBLAS_CORETYPE") != NULL)
		return NULL;
	name = openblas_get_corename();
	if (name == NULL || strcasecmp(name, "prescott") != 0)
		return NULL;
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
	return NULL;
}

void train_backend_release(struct train_backend *be)
{
	if (be->destroy)
		be->destroy(be->ctx);
	memset(be, 0, sizeof(*be));
}
