/*
 * mlp_cuda.cu - the GPU backend of the trainer's kernels (train_backend.h):
 * cuBLAS for the matrix products, small kernels for the rest, everything
 * ordered on one CUDA stream; NCCL runs on its own stream, ordered after
 * this one's work at each call (dist_set_stream, see ddp.c). The model
 * logic is the same as on the CPU (mlp.c); only these kernels differ.
 *
 * Reductions that feed parameters (bias and batch-norm sums) use one
 * thread per column looping over rows in order, so they are deterministic;
 * only the reported loss/accuracy sums use atomics.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "train_backend.h"
#include "dlaunch/error.h"
}

namespace
{

struct cuda_ctx {
	int device;
	cudaStream_t stream;
	cublasHandle_t blas;
};

const int THREADS = 256;

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
	if (bytes == 0)
		return 0;
	if (cudaMemcpyAsync(dst, src, bytes, kind, c->stream) != cudaSuccess)
		return DL_EIO;
	/* host buffers may be reused as soon as we return */
	if (kind != cudaMemcpyDeviceToDevice &&
	    cudaStreamSynchronize(c->stream) != cudaSuccess)
		return DL_EIO;
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
	cudaMemsetAsync(p, 0, bytes, ((cuda_ctx *)ctx)->stream);
}

int cu_sync(void *ctx)
{
	return cudaStreamSynchronize(((cuda_ctx *)ctx)->stream) == cudaSuccess
		   ? 0
		   : DL_EIO;
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

	cublasSgemm(cc->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
		    trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
		    ldb, a, lda, &beta, c, ldc);
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
		k_bias_add<<<blocks_for(n), THREADS, 0,
			     ((cuda_ctx *)ctx)->stream>>>(y, bias, n, cols);
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
	k_col_sum<<<blocks_for((size_t)cols), THREADS, 0,
		    ((cuda_ctx *)ctx)->stream>>>(db, dy, rows, cols);
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
		k_relu<<<blocks_for(n), THREADS, 0,
			 ((cuda_ctx *)ctx)->stream>>>(y, n);
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
		k_relu_backward<<<blocks_for(n), THREADS, 0,
				  ((cuda_ctx *)ctx)->stream>>>(dy, y, n);
}

__global__ void k_softmax_xent(const float *logits, const int32_t *labels,
			       int rows, int cols, float grad_scale,
			       float *dlogits, float *out)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;
	const float *z;
	float max, sum = 0.0f;
	int arg = 0, y;

	if (r >= rows)
		return;
	z = logits + (size_t)r * cols;
	y = labels[r];
	max = z[0];
	for (int c = 1; c < cols; c++)
		if (z[c] > max) {
			max = z[c];
			arg = c;
		}
	for (int c = 0; c < cols; c++)
		sum += expf(z[c] - max);
	atomicAdd(&out[0], logf(sum) - (z[y] - max));
	if (arg == y)
		atomicAdd(&out[1], 1.0f);
	if (dlogits) {
		float *d = dlogits + (size_t)r * cols;
		float inv = 1.0f / sum;

		for (int c = 0; c < cols; c++)
			d[c] = expf(z[c] - max) * inv * grad_scale;
		d[y] -= grad_scale;
	}
}

void cu_softmax_xent(void *ctx, const float *logits, const int32_t *labels,
		     int rows, int cols, float grad_scale, float *dlogits,
		     float *out)
{
	if (rows > 0)
		k_softmax_xent<<<blocks_for((size_t)rows), THREADS, 0,
				 ((cuda_ctx *)ctx)->stream>>>(
		    logits, labels, rows, cols, grad_scale, dlogits, out);
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
		k_sgd<<<blocks_for(n), THREADS, 0, ((cuda_ctx *)ctx)->stream>>>(
		    p, grad, m, n, lr, momentum, weight_decay, first);
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
	k_bn_stats<<<blocks_for((size_t)cols), THREADS, 0,
		     ((cuda_ctx *)ctx)->stream>>>(x, rows, cols, sums);
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
	k_bn_finalize<<<blocks_for((size_t)cols), THREADS, 0,
			((cuda_ctx *)ctx)->stream>>>(sums, n, cols, eps,
						     momentum, mean, invstd,
						     running_mean, running_var);
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
		k_bn_forward<<<blocks_for(n), THREADS, 0,
			       ((cuda_ctx *)ctx)->stream>>>(
		    x, xhat, mean, invstd, gamma, beta, n, cols);
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
	k_bn_backward_sums<<<blocks_for((size_t)cols), THREADS, 0,
			     ((cuda_ctx *)ctx)->stream>>>(dy, xhat, rows, cols,
							  sums);
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
		k_bn_backward<<<blocks_for(total), THREADS, 0,
				((cuda_ctx *)ctx)->stream>>>(
		    dy, xhat, gamma, invstd, sums, n, total, cols);
}

void cu_destroy(void *ctx)
{
	cuda_ctx *c = (cuda_ctx *)ctx;

	if (c == NULL)
		return;
	cudaStreamSynchronize(c->stream);
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
	if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
		snprintf(err, err_size, "cuda device %d: cannot start cuBLAS",
			 device);
		cudaStreamDestroy(c->stream);
		free(c);
		return DL_ESYS;
	}
	cublasSetStream(c->blas, c->stream);
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
