/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp.h - the trainer's model: a multi-layer perceptron of any widths with
 * ReLU between layers, optional batch norm after each hidden layer
 * (Linear -> BatchNorm -> ReLU) and softmax cross-entropy on the output.
 *
 * All parameters live in one flat array in layer order
 *   W0 [out x in], b0 [out], (gamma0 [out], beta0 [out]), W1, b1, ...
 * with gradients in a second array of the same layout, so that a layer's
 * gradients form one contiguous range (what DDP buckets) and checkpoints
 * and broadcasts are single copies. Batch-norm running statistics are
 * "buffers" (not trained): mean0, var0, mean1, var1, ... The arrays live in
 * the backend's memory (see backend.h).
 */
#ifndef DLAUNCH_MLP_H
#define DLAUNCH_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define MLP_MAX_LAYERS 16
#define MLP_MAX_WIDTH  65536

struct mlp_shape {
	int n_layers;			/* linear layers (>= 1) */
	int widths[MLP_MAX_LAYERS + 1]; /* input, hidden..., classes */
	int batch_norm;			/* bn after each hidden layer */
};

/* mlp_shape_parse reads "784-256-128-10" (2 to MLP_MAX_LAYERS + 1 widths
 * in [1, MLP_MAX_WIDTH], at least 2 classes); batch_norm is left 0. */
int mlp_shape_parse(const char *spec, struct mlp_shape *out, char *err,
		    size_t err_size);
/* mlp_shape_format writes "784-256-128-10" (plus "+bn") into out. */
void mlp_shape_format(const struct mlp_shape *s, char *out, size_t out_size);
int mlp_shape_equal(const struct mlp_shape *a, const struct mlp_shape *b);

size_t mlp_param_count(const struct mlp_shape *s);
size_t mlp_buffer_count(const struct mlp_shape *s);
/* mlp_layer_range: the parameters of linear layer l (and its bn) are
 * params[*begin, *end). */
void mlp_layer_range(const struct mlp_shape *s, int layer, size_t *begin,
		     size_t *end);

/* mlp_init_params fills host arrays the way PyTorch initialises Linear
 * (weights and biases uniform in +-1/sqrt(fan_in)) from seed; gamma = 1,
 * beta = 0, running mean 0 and variance 1. buffers may be NULL. */
void mlp_init_params(const struct mlp_shape *s, uint64_t seed, float *params,
		     float *buffers);

/*
 * Hooks through which data parallelism enters the model without the model
 * knowing about it. sum_stats all-reduces (sums) n floats in place across
 * ranks (batch-norm statistics; SyncBatchNorm semantics); grads_ready is
 * called in backward as soon as linear layer l's parameter gradients are
 * final, from the last layer down to 0. Either may be NULL (one process).
 */
struct mlp_hooks {
	void *ctx;
	int (*sum_stats)(void *ctx, float *buf, size_t n);
	int (*grads_ready)(void *ctx, int layer);
};

struct mlp;

/* mlp_new allocates the model for batches of at most max_batch rows on
 * be (borrowed; must outlive the model). Parameters are zero until set. */
int mlp_new(const struct mlp_shape *s, const struct train_backend *be,
	    int max_batch, struct mlp **out);
void mlp_free(struct mlp *m);

const struct mlp_shape *mlp_shape(const struct mlp *m);
/* backend-memory arrays of the model (borrowed) */
float *mlp_params(struct mlp *m);
float *mlp_grads(struct mlp *m);
float *mlp_buffers(struct mlp *m);

/* mlp_set_params / mlp_get_params copy host arrays in and out (buffers
 * may be NULL). */
int mlp_set_params(struct mlp *m, const float *params, const float *buffers);
int mlp_get_params(struct mlp *m, float *params, float *buffers);

/*
 * mlp_train_step: forward and backward over rows samples (x: host
 * [rows x in], labels: host [rows]) whose loss enters the global mean with
 * weight 1/global_rows: the gradients written are d(sum of these rows'
 * losses / global_rows), so summing them over ranks gives the gradient of
 * the mean loss over the global batch. Batch-norm statistics are over
 * global_rows rows (via hooks->sum_stats). rows may be 0 (a rank with no
 * samples still joins the collectives). Adds the rows' loss sum and
 * number of correct predictions to stats[0], stats[1].
 */
int mlp_train_step(struct mlp *m, const float *x, const int32_t *labels,
		   int rows, int global_rows, const struct mlp_hooks *hooks,
		   double stats[2]);

/* mlp_evaluate: inference (batch norm with running statistics) over rows
 * samples in chunks; adds loss sum and correct count to stats. */
int mlp_evaluate(struct mlp *m, const float *x, const int32_t *labels, int rows,
		 double stats[2]);

/* mlp_loss_host: loss and gradient of sum(losses)/rows at params on the
 * host, for gradient checks (uses batch statistics for batch norm, single
 * process). grads may be NULL. Returns the mean loss in *loss. */
int mlp_loss_host(struct mlp *m, const float *x, const int32_t *labels,
		  int rows, double *loss, float *grads_host);

#endif
