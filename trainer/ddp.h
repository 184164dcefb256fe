/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ddp.h - data parallelism for dlaunch-train on top of dist.h.
 *
 * Parameters are broadcast from rank 0 at start. During backward the
 * model reports each layer whose gradients are final (mlp_hooks); layers
 * are grouped, from the last one down, into buckets of at most
 * bucket_bytes (at least one layer each), and a bucket's in-place
 * all-reduce (sum) is issued with dist_iall_reduce as soon as its lowest
 * layer is ready, so the reduction of late layers overlaps the backward of
 * early ones. train_ddp_finish waits for all of them before the optimizer
 * step. The model scales its loss by 1/global batch, so the sum is the
 * gradient of the global batch's mean loss however the batch is split.
 * Batch-norm statistics (SyncBatchNorm) go through the same ordered queue.
 *
 * With d == NULL (one process) every operation is local and immediate.
 */
#ifndef DLAUNCH_TRAIN_DDP_H
#define DLAUNCH_TRAIN_DDP_H

#include <stddef.h>
#include <stdint.h>

#include "dist/dist.h"
#include "mlp.h"

#define TRAIN_DDP_BUCKET_DEFAULT (128u * 1024u)

struct train_ddp;

/* train_ddp_new: d and m are borrowed and must outlive the object. */
int train_ddp_new(struct dist *d, struct mlp *m, const struct train_backend *be,
		  size_t bucket_bytes, struct train_ddp **out);
void train_ddp_free(struct train_ddp *t);

int train_ddp_rank(const struct train_ddp *t);
int train_ddp_world_size(const struct train_ddp *t);
/* buckets of the plan, for logs and tests */
int train_ddp_bucket_count(const struct train_ddp *t);

/* the hooks to pass to mlp_train_step (valid while t lives) */
const struct mlp_hooks *train_ddp_hooks(struct train_ddp *t);

/* train_ddp_finish waits for every all-reduce issued in this step and
 * returns the first error (all are waited for regardless). */
int train_ddp_finish(struct train_ddp *t);

/* train_ddp_broadcast_model copies rank 0's parameters and buffers to
 * every rank. */
int train_ddp_broadcast_model(struct train_ddp *t);

/* host-memory helpers: sum n doubles, broadcast n u64 from rank 0 */
int train_ddp_sum_host(struct train_ddp *t, double *v, size_t n);
int train_ddp_broadcast_host(struct train_ddp *t, uint64_t *v, size_t n);

#endif
