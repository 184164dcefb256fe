/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ddp.c - DDP for dlaunch-train: the bucket plan, the gradient all-reduce
 * issued from the model's backward hooks, and the parameter broadcast.
 */
#include <stdlib.h>
#include <string.h>

#include "ddp.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define HOST_SCRATCH_MAX 16

struct train_ddp {
	struct dist *d; /* NULL: one process */
	struct mlp *m;
	const struct train_backend *be;
	struct mlp_hooks hooks;
	int n_layers;
	/* closes[l]: the bucket layer l completes (its lowest layer), or -1 */
	int closes[MLP_MAX_LAYERS];
	size_t bucket_begin[MLP_MAX_LAYERS], bucket_end[MLP_MAX_LAYERS];
	int n_buckets;
	struct dist_req *pending[MLP_MAX_LAYERS];
	int n_pending;
	int error;     /* first error of this step */
	void *scratch; /* HOST_SCRATCH_MAX 8-byte values, backend memory */
};

static int ddp_sum_stats(void *ctx, float *buf, size_t n)
{
	struct train_ddp *t = ctx;
	struct dist_req *req = NULL;
	int rc;

	if (t->d == NULL)
		return 0;
	/* through the same ordered queue as the pending gradient buckets */
	rc = dist_iall_reduce(t->d, buf, n, DIST_FLOAT32, DIST_SUM, &req);
	if (rc == 0)
		rc = dist_wait(req);
	return rc;
}

static int ddp_grads_ready(void *ctx, int layer)
{
	struct train_ddp *t = ctx;
	int b = t->closes[layer];
	struct dist_req *req = NULL;
	int rc;

	if (t->d == NULL || b < 0)
		return 0;
	/* on a GPU, NCCL is ordered after the compute stream's work so far
	 * (train_ddp_new's dist_set_stream), so after the kernels that wrote
	 * these gradients, and runs beside the backward kernels that follow */
	rc = dist_iall_reduce(t->d, mlp_grads(t->m) + t->bucket_begin[b],
			      t->bucket_end[b] - t->bucket_begin[b],
			      DIST_FLOAT32, DIST_SUM, &req);
	if (rc != 0) {
		if (t->error == 0)
			t->error = rc;
		return rc;
	}
	t->pending[t->n_pending++] = req;
	return 0;
}

int train_ddp_new(struct dist *d, struct mlp *m, const struct train_backend *be,
		  size_t bucket_bytes, struct train_ddp **out)
{
	const struct mlp_shape *s = mlp_shape(m);
	struct train_ddp *t = calloc(1, sizeof(*t));
	size_t begin, end, cur_end;
	int l;

	if (t == NULL)
		return DL_ENOMEM;
	t->d = d;
	t->m = m;
	t->be = be;
	t->n_layers = s->n_layers;
	t->hooks.ctx = t;
	t->hooks.sum_stats = ddp_sum_stats;
	t->hooks.grads_ready = ddp_grads_ready;
	t->scratch = be->alloc(be->ctx, HOST_SCRATCH_MAX * 8);
	if (t->scratch == NULL) {
		free(t);
		return DL_ENOMEM;
	}
	/* plan: walk from the last layer down, closing a bucket when the next
	 * layer would take it past bucket_bytes */
	for (l = 0; l < s->n_layers; l++)
		t->closes[l] = -1;
	mlp_layer_range(s, s->n_layers - 1, &begin, &cur_end);
	for (l = s->n_layers - 1; l >= 0; l--) {
		size_t nb, ne;

		mlp_layer_range(s, l, &begin, &end);
		if (l == 0) {
			t->closes[0] = t->n_buckets;
			t->bucket_begin[t->n_buckets] = 0;
			t->bucket_end[t->n_buckets++] = cur_end;
			break;
		}
		mlp_layer_range(s, l - 1, &nb, &ne);
		if ((cur_end - nb) * sizeof(float) > bucket_bytes) {
			t->closes[l] = t->n_buckets;
			t->bucket_begin[t->n_buckets] = begin;
			t->bucket_end[t->n_buckets++] = cur_end;
			cur_end = begin;
		}
	}
	if (d)
		dist_set_stream(d, be->stream(be->ctx));
	*out = t;
	return 0;
}

void train_ddp_free(struct train_ddp *t)
{
	if (t == NULL)
		return;
	train_ddp_finish(t);
	t->be->release(t->be->ctx, t->scratch);
	free(t);
}

int train_ddp_rank(const struct train_ddp *t)
{
	return t->d ? dist_rank(t->d) : 0;
}

int train_ddp_world_size(const struct train_ddp *t)
{
	return t->d ? dist_world_size(t->d) : 1;
}

int train_ddp_bucket_count(const struct train_ddp *t)
{
	return t->n_buckets;
}

const struct mlp_hooks *train_ddp_hooks(struct train_ddp *t)
{
	return &t->hooks;
}

int train_ddp_finish(struct train_ddp *t)
{
	int rc = t->error;

	for (int i = 0; i < t->n_pending; i++) {
		int r = dist_wait(t->pending[i]);

		if (rc == 0)
			rc = r;
	}
	t->n_pending = 0;
	t->error = 0;
	return rc;
}

int train_ddp_broadcast_model(struct train_ddp *t)
{
	const struct mlp_shape *s = mlp_shape(t->m);
	size_t nb = mlp_buffer_count(s);
	int rc;

	if (t->d == NULL)
		return 0;
	rc = dist_broadcast(t->d, mlp_params(t->m), mlp_param_count(s),
			    DIST_FLOAT32, 0);
	if (rc == 0 && nb)
		rc = dist_broadcast(t->d, mlp_buffers(t->m), nb, DIST_FLOAT32,
				    0);
	return rc;
}

/* host_collective runs one collective on n 8-byte host values, staged
 * through backend memory when the backend is a device (NCCL). */
static int host_collective(struct train_ddp *t, void *v, size_t n,
			   enum dist_dtype dtype, int broadcast)
{
	void *buf = t->be->on_device ? t->scratch : v;
	int rc = 0;

	if (t->d == NULL)
		return 0;
	if (n > HOST_SCRATCH_MAX)
		return DL_EINVAL;
	if (t->be->on_device)
		rc = t->be->upload(t->be->ctx, buf, v, n * 8);
	if (rc == 0)
		rc = broadcast
			 ? dist_broadcast(t->d, buf, n, dtype, 0)
			 : dist_all_reduce(t->d, buf, buf, n, dtype, DIST_SUM);
	if (rc == 0 && t->be->on_device)
		rc = t->be->download(t->be->ctx, v, buf, n * 8);
	return rc;
}

int train_ddp_sum_host(struct train_ddp *t, double *v, size_t n)
{
	return host_collective(t, v, n, DIST_FLOAT64, 0);
}

int train_ddp_broadcast_host(struct train_ddp *t, uint64_t *v, size_t n)
{
	return host_collective(t, v, n, DIST_INT64, 1);
}
