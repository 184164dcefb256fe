/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp_cuda.cu - the GPU backend of the trainer's kernels (backend.h):
 * cuBLAS for the matrix products, small kernels for the rest, everything
 * ordered on one CUDA stream; NCCL runs on its own stream, ordered after
 * this one's work at each call (dist_set_stream, see ddp.c). The model
 * logic is the same as on the CPU (mlp.c); only these kernels differ.
 *
 * Every sum is taken in a fixed order, so a run gives the same bits each
 * time (and a resumed run the same as an uninterrupted one): the ones that
 * feed parameters (bias and batch-norm sums) with one thread per column
 * looping over rows in order; the loss and accuracy sums with a fixed
 * grid whose blocks reduce as a tree into per-block partial sums, added
 * up in order by one thread. No atomics.
 *
 * Errors are sticky: every kernel launch (cudaGetLastError), runtime and
 * cuBLAS call is checked; the first failure is logged with the call that
 * caused it (a build without code for this GPU shows up here as "no
 * kernel image"), no further work is queued, and every later call that
 * returns a status (upload, download, copy, sync) returns DL_EIO, so the
 * run ends with a non-zero exit instead of training with kernels that
 * did not run.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backend.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
}

namespace
{

struct cuda_ctx {
	int device;
	cudaStream_t stream;
	cublasHandle_t blas;
	float *partials; /* 2 x XENT_MAX_BLOCKS: k_softmax_xent's block sums */
	int failed;	 /* DL_EIO once a call failed (sticky) */
};

const int THREADS = 256; /* a power of two: the tree reductions need it */
const int XENT_MAX_BLOCKS = 1024;

/* fail: records the first failure of the context and logs it with the
 * call that caused it; later ones follow from it and are not logged. */
void fail(cuda_ctx *c, const char *call, const char *detail, const char *hint)
{
	if (c->failed)
		return;
	c->failed = DL_EIO;
	log_error("cuda device %d: %s failed: %s%s", c->device, call, detail,
		  hint);
}

bool cuda_ok(cuda_ctx *c, const char *call, cudaError_t ce)
{
	if (ce == cudaSuccess)
		return true;
	fail(c, call, cudaGetErrorString(ce),
	     ce == cudaErrorNoKernelImageForDevice
		 ? " (this dlaunch-train has no code for this GPU: rebuild "
		   "it with NVCCFLAGS naming the GPU's architecture)"
		 : "");
	return false;
}

bool blas_ok(cuda_ctx *c, const char *call, cublasStatus_t st)
{
	if (st == CUBLAS_STATUS_SUCCESS)
		return true;
	fail(c, call, cublasGetStatusString(st), "");
	return false;
}

/* ready: whether work may be queued (nothing after a failure). It clears
 * an error another part of this thread left behind (NCCL's calls, for
 * one), so that the next launch's check does not blame it on a kernel;
 * an error that corrupted the context comes back at that launch anyway. */
bool ready(cuda_ctx *c)
{
	if (c->failed)
		return false;
	(void)cudaGetLastError();
	return true;
}

/* LAUNCH queues a kernel on the context's stream and checks the launch */
#define LAUNCH(c, kernel, blocks, ...)                                         \
	do {                                                                   \
		if (ready(c)) {                                                \
			kernel<<<(blocks), THREADS, 0, (c)->stream>>>(         \
			    __VA_ARGS__);                                      \
			cuda_ok((c), #kernel, cudaGetLastError());             \
		}                                                              \
	} while (0)

unsigned blocks_for(size_t n)
{
	return (unsigned)((n + THREADS - 1) / THREADS);
}

void *cu_alloc(void *ctx, size_t bytes)
{
	cuda_ctx *c = (cuda_ctx *)ctx;
	void *p = NULL;

	if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
		return NULL;
	if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->stream) !=
	    cudaSuccess) {
		cudaFree(p);
		return NULL;
	}
	return p;
}

void cu_release(void *ctx, void *p)
{
	(void)ctx;
	if (p)
		cudaFree(p);
}

int cu_memcpy(cuda_ctx *c, void *dst, const void *src, size_t bytes,
	      cudaMemcpyKind kind)
{
	if (!ready(c))
		return c->failed;
	if (bytes == 0)
		return 0;
	if (!cuda_ok(c, "cudaMemcpyAsync",
		     cudaMemcpyAsync(dst, src, bytes, kind, c->stream)))
		return c->failed;
	/* host buffers may be reused as soon as we return; a kernel that
	 * failed while running shows up here */
	if (kind != cudaMemcpyDeviceToDevice &&
	    !cuda_ok(c, "cudaStreamSynchronize (after the copy)",
		     cudaStreamSynchronize(c->stream)))
		return c->failed;
	return 0;
}

int cu_upload(void *ctx, void *dst, const void *src, size_t bytes)
{
	return cu_memcpy((cuda_ctx *)ctx, dst, src, bytes,
			 cudaMemcpyHostToDevice);
}

int cu_download(void *ctx, void *dst, const void *src, size_t bytes)
{
	return cu_memcpy((cuda_ctx *)ctx, dst, src, bytes,
			 cudaMemcpyDeviceToHost);
}

int cu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
	return cu_memcpy((cuda_ctx *)ctx, dst, src, bytes,
			 cudaMemcpyDeviceToDevice);
}

void cu_zero(void *ctx, void *p, size_t bytes)
{
	cuda_ctx *c = (cuda_ctx *)ctx;

	if (ready(c) && bytes)
		cuda_ok(c, "cudaMemsetAsync",
			cudaMemsetAsync(p, 0, bytes, c->stream));
}

/* cu_sync: 0 once the stream's work is done; DL_EIO when it or anything
 * before it failed */
int cu_sync(void *ctx)
{
	cuda_ctx *c = (cuda_ctx *)ctx;

	if (ready(c))
		cuda_ok(c, "cudaStreamSynchronize",
			cudaStreamSynchronize(c->stream));
	return c->failed;
}

void *cu_stream(void *ctx)
{
	return (void *)((cuda_ctx *)ctx)->stream;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap
 * the operands and the m/n roles instead of transposing anything. */
void cu_gemm(void *ctx, int trans_a, int trans_b, int m, int n, int k,
	     float alpha, const float *a, int lda, const float *b, int ldb,
	     float beta, float *c, int ldc)
{
	cuda_ctx *cc = (cuda_ctx *)ctx;

	if (ready(cc))
		blas_ok(cc, "cublasSgemm",
			cublasSgemm(cc->blas,
				    trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
				    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
				    k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

__global__ void k_bias_add(float *y, const float *bias, size_t n, int cols)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] += bias[i % (size_t)cols];
}

void cu_bias_add(void *ctx, float *y, const float *bias, int rows, int cols)
{
	size_t n = (size_t)rows * (size_t)cols;

	if (n)
		LAUNCH((cuda_ctx *)ctx, k_bias_add, blocks_for(n), y, bias, n,
		       cols);
}

__global__ void k_col_sum(float *out, const float *x, int rows, int cols)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0.0f;

	if (c >= cols)
		return;
	for (int r = 0; r < rows; r++)
		s += x[(size_t)r * cols + c];
	out[c] = s;
}

void cu_bias_grad(void *ctx, float *db, const float *dy, int rows, int cols)
{
	LAUNCH((cuda_ctx *)ctx, k_col_sum, blocks_for((size_t)cols), db, dy,
	       rows, cols);
}

__global__ void k_relu(float *y, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && !(y[i] > 0.0f))
		y[i] = 0.0f;
}

void cu_relu(void *ctx, float *y, size_t n)
{
	if (n)
		LAUNCH((cuda_ctx *)ctx, k_relu, blocks_for(n), y, n);
}

__global__ void k_relu_backward(float *dy, const float *y, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && !(y[i] > 0.0f))
		dy[i] = 0.0f;
}

void cu_relu_backward(void *ctx, float *dy, const float *y, size_t n)
{
	if (n)
		LAUNCH((cuda_ctx *)ctx, k_relu_backward, blocks_for(n), dy, y,
		       n);
}

/* k_softmax_xent: each thread takes rows r, r + grid, r + 2 grid, ... in
 * order; each block sums its threads' losses and hits as a tree and
 * writes them to partials[block] and partials[gridDim.x + block]. The
 * grid is a function of rows alone, so the order of every addition is. */
__global__ void k_softmax_xent(const float *logits, const int32_t *labels,
			       int rows, int cols, float grad_scale,
			       float *dlogits, float *partials)
{
	__shared__ float loss_s[THREADS], hit_s[THREADS];
	int t = threadIdx.x;
	float loss = 0.0f, hit = 0.0f;

	for (int r = blockIdx.x * blockDim.x + t; r < rows;
	     r += gridDim.x * blockDim.x) {
		const float *z = logits + (size_t)r * cols;
		float max = z[0], sum = 0.0f;
		int arg = 0, y = labels[r];

		for (int c = 1; c < cols; c++)
			if (z[c] > max) {
				max = z[c];
				arg = c;
			}
		for (int c = 0; c < cols; c++)
			sum += expf(z[c] - max);
		loss += logf(sum) - (z[y] - max);
		if (arg == y)
			hit += 1.0f;
		if (dlogits) {
			float *d = dlogits + (size_t)r * cols;
			float inv = 1.0f / sum;

			for (int c = 0; c < cols; c++)
				d[c] = expf(z[c] - max) * inv * grad_scale;
			d[y] -= grad_scale;
		}
	}
	loss_s[t] = loss;
	hit_s[t] = hit;
	__syncthreads();
	for (int half = THREADS / 2; half > 0; half /= 2) {
		if (t < half) {
			loss_s[t] += loss_s[t + half];
			hit_s[t] += hit_s[t + half];
		}
		__syncthreads();
	}
	if (t == 0) {
		partials[blockIdx.x] = loss_s[0];
		partials[gridDim.x + blockIdx.x] = hit_s[0];
	}
}

/* k_add_partials: out[0] += the blocks' loss sums, out[1] += their hits,
 * in block order (one thread) */
__global__ void k_add_partials(const float *partials, int blocks, float *out)
{
	float loss = 0.0f, hit = 0.0f;

	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	for (int b = 0; b < blocks; b++) {
		loss += partials[b];
		hit += partials[blocks + b];
	}
	out[0] += loss;
	out[1] += hit;
}

void cu_softmax_xent(void *ctx, const float *logits, const int32_t *labels,
		     int rows, int cols, float grad_scale, float *dlogits,
		     float *out)
{
	cuda_ctx *c = (cuda_ctx *)ctx;
	unsigned blocks = blocks_for((size_t)(rows > 0 ? rows : 0));

	if (rows <= 0)
		return;
	if (blocks > (unsigned)XENT_MAX_BLOCKS)
		blocks = XENT_MAX_BLOCKS;
	LAUNCH(c, k_softmax_xent, blocks, logits, labels, rows, cols,
	       grad_scale, dlogits, c->partials);
	/* one block, of which one thread works */
	LAUNCH(c, k_add_partials, 1u, c->partials, (int)blocks, out);
}

__global__ void k_sgd(float *p, const float *grad, float *m, size_t n, float lr,
		      float momentum, float wd, int first)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	float g;

	if (i >= n)
		return;
	g = grad[i] + wd * p[i];
	if (momentum != 0.0f) {
		m[i] = first ? g : momentum * m[i] + g;
		g = m[i];
	}
	p[i] -= lr * g;
}

void cu_sgd(void *ctx, float *p, const float *grad, float *m, size_t n,
	    float lr, float momentum, float weight_decay, int first)
{
	if (n)
		LAUNCH((cuda_ctx *)ctx, k_sgd, blocks_for(n), p, grad, m, n, lr,
		       momentum, weight_decay, first);
}

__global__ void k_bn_stats(const float *x, int rows, int cols, float *sums)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0.0f, q = 0.0f;

	if (c >= cols)
		return;
	for (int r = 0; r < rows; r++) {
		float v = x[(size_t)r * cols + c];

		s += v;
		q += v * v;
	}
	sums[c] = s;
	sums[cols + c] = q;
}

void cu_bn_stats(void *ctx, const float *x, int rows, int cols, float *sums)
{
	LAUNCH((cuda_ctx *)ctx, k_bn_stats, blocks_for((size_t)cols), x, rows,
	       cols, sums);
}

__global__ void k_bn_finalize(const float *sums, float n, int cols, float eps,
			      float momentum, float *mean, float *invstd,
			      float *running_mean, float *running_var)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float mu, var;

	if (c >= cols)
		return;
	mu = sums[c] / n;
	var = sums[cols + c] / n - mu * mu;
	if (var < 0.0f)
		var = 0.0f;
	mean[c] = mu;
	invstd[c] = 1.0f / sqrtf(var + eps);
	if (momentum > 0.0f) {
		float unbiased = n > 1.0f ? var * n / (n - 1.0f) : var;

		running_mean[c] =
		    (1.0f - momentum) * running_mean[c] + momentum * mu;
		running_var[c] =
		    (1.0f - momentum) * running_var[c] + momentum * unbiased;
	}
}

void cu_bn_finalize(void *ctx, const float *sums, float n, int cols, float eps,
		    float momentum, float *mean, float *invstd,
		    float *running_mean, float *running_var)
{
	LAUNCH((cuda_ctx *)ctx, k_bn_finalize, blocks_for((size_t)cols), sums,
	       n, cols, eps, momentum, mean, invstd, running_mean, running_var);
}

__global__ void k_bn_forward(float *x, float *xhat, const float *mean,
			     const float *invstd, const float *gamma,
			     const float *beta, size_t n, int cols)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int c;
	float h;

	if (i >= n)
		return;
	c = (int)(i % (size_t)cols);
	h = (x[i] - mean[c]) * invstd[c];
	if (xhat)
		xhat[i] = h;
	x[i] = gamma[c] * h + beta[c];
}

void cu_bn_forward(void *ctx, float *x, float *xhat, const float *mean,
		   const float *invstd, const float *gamma, const float *beta,
		   int rows, int cols)
{
	size_t n = (size_t)rows * (size_t)cols;

	if (n)
		LAUNCH((cuda_ctx *)ctx, k_bn_forward, blocks_for(n), x, xhat,
		       mean, invstd, gamma, beta, n, cols);
}

__global__ void k_bn_backward_sums(const float *dy, const float *xhat, int rows,
				   int cols, float *sums)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0.0f, q = 0.0f;

	if (c >= cols)
		return;
	for (int r = 0; r < rows; r++) {
		size_t i = (size_t)r * cols + c;

		s += dy[i];
		q += dy[i] * xhat[i];
	}
	sums[c] = s;
	sums[cols + c] = q;
}

void cu_bn_backward_sums(void *ctx, const float *dy, const float *xhat,
			 int rows, int cols, float *sums)
{
	LAUNCH((cuda_ctx *)ctx, k_bn_backward_sums, blocks_for((size_t)cols),
	       dy, xhat, rows, cols, sums);
}

__global__ void k_bn_backward(float *dy, const float *xhat, const float *gamma,
			      const float *invstd, const float *sums, float n,
			      size_t total, int cols)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int c;

	if (i >= total)
		return;
	c = (int)(i % (size_t)cols);
	dy[i] = gamma[c] * invstd[c] *
		(dy[i] - sums[c] / n - xhat[i] * sums[cols + c] / n);
}

void cu_bn_backward(void *ctx, float *dy, const float *xhat, const float *gamma,
		    const float *invstd, const float *sums, float n, int rows,
		    int cols)
{
	size_t total = (size_t)rows * (size_t)cols;

	if (total)
		LAUNCH((cuda_ctx *)ctx, k_bn_backward, blocks_for(total), dy,
		       xhat, gamma, invstd, sums, n, total, cols);
}

void cu_destroy(void *ctx)
{
	cuda_ctx *c = (cuda_ctx *)ctx;

	if (c == NULL)
		return;
	/* errors here change nothing: the run's status is already known */
	cudaStreamSynchronize(c->stream);
	cudaFree(c->partials);
	cublasDestroy(c->blas);
	cudaStreamDestroy(c->stream);
	free(c);
}

} /* namespace */

extern "C" int train_backend_cuda_available(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n;
}

extern "C" int train_backend_cuda(struct train_backend *be, int device,
				  char *err, size_t err_size)
{
	cuda_ctx *c;
	cudaError_t ce;
	cublasStatus_t st;

	memset(be, 0, sizeof(*be));
	ce = cudaSetDevice(device);
	if (ce != cudaSuccess) {
		snprintf(err, err_size, "cuda device %d: %s", device,
			 cudaGetErrorString(ce));
		return DL_ESYS;
	}
	/* calloc, not new: the binary links no C++ runtime */
	c = (cuda_ctx *)calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, err_size, "cuda device %d: out of memory",
			 device);
		return DL_ENOMEM;
	}
	c->device = device;
	ce = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
	if (ce != cudaSuccess) {
		snprintf(err, err_size,
			 "cuda device %d: cannot create a "
			 "stream: %s",
			 device, cudaGetErrorString(ce));
		free(c);
		return DL_ESYS;
	}
	ce = cudaMalloc((void **)&c->partials,
			2 * XENT_MAX_BLOCKS * sizeof(float));
	if (ce != cudaSuccess) {
		snprintf(err, err_size, "cuda device %d: cudaMalloc: %s",
			 device, cudaGetErrorString(ce));
		cudaStreamDestroy(c->stream);
		free(c);
		return DL_ENOMEM;
	}
	st = cublasCreate(&c->blas);
	if (st == CUBLAS_STATUS_SUCCESS) {
		st = cublasSetStream(c->blas, c->stream);
		if (st != CUBLAS_STATUS_SUCCESS)
			cublasDestroy(c->blas);
	}
	if (st != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, err_size,
			 "cuda device %d: cannot start cuBLAS: %s", device,
			 cublasGetStatusString(st));
		cudaFree(c->partials);
		cudaStreamDestroy(c->stream);
		free(c);
		return DL_ESYS;
	}
	be->name = "cuda";
	be->on_device = 1;
	be->ctx = c;
	be->alloc = cu_alloc;
	be->release = cu_release;
	be->upload = cu_upload;
	be->download = cu_download;
	be->copy = cu_copy;
	be->zero = cu_zero;
	be->sync = cu_sync;
	be->stream = cu_stream;
	be->gemm = cu_gemm;
	be->bias_add = cu_bias_add;
	be->bias_grad = cu_bias_grad;
	be->relu = cu_relu;
	be->relu_backward = cu_relu_backward;
	be->softmax_xent = cu_softmax_xent;
	be->sgd = cu_sgd;
	be->bn_stats = cu_bn_stats;
	be->bn_finalize = cu_bn_finalize;
	be->bn_forward = cu_bn_forward;
	be->bn_backward_sums = cu_bn_backward_sums;
	be->bn_backward = cu_bn_backward;
	be->destroy = cu_destroy;
	return 0;
}
