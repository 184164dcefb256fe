/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h - the kernels the trainer's model code runs on.
 *
 * The MLP (mlp.c) is written once against this table; trainer/mlp_cpu.c
 * implements it on the host with a CPU BLAS, trainer/mlp_cuda.cu on a GPU
 * with cuBLAS. Every pointer an operation takes lives in the backend's
 * memory (host memory for the CPU backend, device memory for CUDA); only
 * upload/download cross that line. Matrices are row-major. Operations are
 * ordered: a later call sees the results of earlier ones; sync() waits until
 * all have finished (a no-op on the CPU).
 */
#ifndef DLAUNCH_TRAIN_BACKEND_H
#define DLAUNCH_TRAIN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct train_backend {
	const char *name; /* "cpu" or "cuda" */
	int on_device;	  /* buffers are device memory */
	void *ctx;	  /* backend state, passed to every call */

	/* memory: alloc returns zeroed memory or NULL */
	void *(*alloc)(void *ctx, size_t bytes);
	void (*release)(void *ctx, void *p);
	int (*upload)(void *ctx, void *dst, const void *src, size_t bytes);
	int (*download)(void *ctx, void *dst, const void *src, size_t bytes);
	int (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
	void (*zero)(void *ctx, void *p, size_t bytes);
	int (*sync)(void *ctx);
	/* stream: the CUDA stream the kernels run on (NULL on the CPU) */
	void *(*stream)(void *ctx);

	/* c[m x n] = alpha * op(a) * op(b) + beta * c; op(a) is m x k and
	 * op(b) is k x n; trans_* transposes the stored matrix. */
	void (*gemm)(void *ctx, int trans_a, int trans_b, int m, int n, int k,
		     float alpha, const float *a, int lda, const float *b,
		     int ldb, float beta, float *c, int ldc);
	/* y[r][c] += bias[c] */
	void (*bias_add)(void *ctx, float *y, const float *bias, int rows,
			 int cols);
	/* db[c] = sum over r of dy[r][c] (overwrites db) */
	void (*bias_grad)(void *ctx, float *db, const float *dy, int rows,
			  int cols);
	/* y = max(y, 0) in place */
	void (*relu)(void *ctx, float *y, size_t n);
	/* dy = y > 0 ? dy : 0, where y is the relu's output */
	void (*relu_backward)(void *ctx, float *dy, const float *y, size_t n);
	/* Softmax cross-entropy over rows of logits with labels in
	 * [0, cols): dlogits = (softmax - onehot) * grad_scale (dlogits may be
	 * NULL: no gradient); out[0] += sum of the rows' losses, out[1] +=
	 * number of rows whose argmax is the label. */
	void (*softmax_xent)(void *ctx, const float *logits,
			     const int32_t *labels, int rows, int cols,
			     float grad_scale, float *dlogits, float *out);
	/* SGD with momentum and weight decay, PyTorch semantics:
	 * g = grad + wd * p; m = first ? g : momentum * m + g; p -= lr * m.
	 * With momentum 0 the buffer is not touched (may be NULL). */
	void (*sgd)(void *ctx, float *p, const float *grad, float *m, size_t n,
		    float lr, float momentum, float weight_decay, int first);

	/* Batch norm over the rows of x[rows x cols].
	 * bn_stats: sums[c] = sum x[.][c], sums[cols + c] = sum x[.][c]^2. */
	void (*bn_stats)(void *ctx, const float *x, int rows, int cols,
			 float *sums);
	/* bn_finalize turns the global sums over n rows into mean and
	 * invstd (biased variance, eps) and, when momentum > 0, updates the
	 * running mean / variance (unbiased) the way PyTorch does. */
	void (*bn_finalize)(void *ctx, const float *sums, float n, int cols,
			    float eps, float momentum, float *mean,
			    float *invstd, float *running_mean,
			    float *running_var);
	/* bn_forward: xhat = (x - mean) * invstd; x = gamma * xhat + beta
	 * (x overwritten). xhat may be NULL (evaluation). */
	void (*bn_forward)(void *ctx, float *x, float *xhat, const float *mean,
			   const float *invstd, const float *gamma,
			   const float *beta, int rows, int cols);
	/* bn_backward_sums: sums[c] = sum dy, sums[cols + c] = sum dy*xhat */
	void (*bn_backward_sums)(void *ctx, const float *dy, const float *xhat,
				 int rows, int cols, float *sums);
	/* bn_backward: dy becomes the gradient w.r.t. the bn input, given
	 * the global sums over n rows:
	 * dx = gamma * invstd * (dy - sums[c] / n - xhat * sums[cols+c] / n) */
	void (*bn_backward)(void *ctx, float *dy, const float *xhat,
			    const float *gamma, const float *invstd,
			    const float *sums, float n, int rows, int cols);

	void (*destroy)(void *ctx);
};

/* train_backend_cpu fills be with the host backend (BLAS); threads > 0 sets
 * the BLAS thread count. Always succeeds. */
void train_backend_cpu(struct train_backend *be, int threads);

/* train_backend_cpu_better_core: when the BLAS fell back to its generic
 * (SSE3) kernels because it did not recognise the CPU model (common in
 * virtual machines), the OPENBLAS_CORETYPE value that matches the CPU's
 * features, for the caller to set before re-executing itself; NULL when
 * the BLAS chose well or OPENBLAS_CORETYPE is already set. */
const char *train_backend_cpu_better_core(void);

/* train_backend_cuda_available: the number of CUDA devices (0 in builds
 * without CUDA or when none is usable). */
int train_backend_cuda_available(void);

/* train_backend_cuda fills be with the GPU backend on device; 0,
 * DL_ENOTSUP (no CUDA in this build) or DL_ESYS with err filled. */
int train_backend_cuda(struct train_backend *be, int device, char *err,
		       size_t err_size);

/* train_backend_release calls destroy (if any) and clears be. */
void train_backend_release(struct train_backend *be);

#endif
