/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mlp.c - the trainer's model: shape parsing, initialisation and the
 * forward/backward pass, written once against the kernel table of
 * backend.h so that the CPU and GPU paths share every decision.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "rng.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"

#define BN_EPS	    1e-5f
#define BN_MOMENTUM 0.1f

struct mlp {
	struct mlp_shape shape;
	const struct train_backend *be;
	int max_batch;
	size_t n_params, n_buffers;
	float *params, *grads, *buffers;
	size_t w_off[MLP_MAX_LAYERS], b_off[MLP_MAX_LAYERS];
	size_t gamma_off[MLP_MAX_LAYERS], beta_off[MLP_MAX_LAYERS];
	size_t rmean_off[MLP_MAX_LAYERS], rvar_off[MLP_MAX_LAYERS];
	/* per layer: output after bias (bn) (relu), rows x width */
	float *act[MLP_MAX_LAYERS];
	/* per hidden bn layer */
	float *xhat[MLP_MAX_LAYERS], *mean[MLP_MAX_LAYERS];
	float *invstd[MLP_MAX_LAYERS], *sums[MLP_MAX_LAYERS];
	float *delta[2];   /* backward scratch, max_batch x max width */
	float *input;	   /* device copy of the batch (device backends) */
	int32_t *labels;   /* device copy of the labels */
	float *loss_stats; /* [2]: loss sum, correct count */
};

int mlp_shape_parse(const char *spec, struct mlp_shape *out, char *err,
		    size_t err_size)
{
	struct mlp_shape s;
	char part[32];
	const char *p = spec;
	int n = 0;

	memset(&s, 0, sizeof(s));
	if (spec == NULL || *spec == '\0') {
		snprintf(err, err_size,
			 "model: empty shape (want e.g. "
			 "784-256-128-10)");
		return DL_EINVAL;
	}
	while (*p != '\0') {
		const char *dash = strchr(p, '-');
		size_t len = dash ? (size_t)(dash - p) : strlen(p);
		int w;

		if (len == 0 || len >= sizeof(part)) {
			snprintf(err, err_size,
				 "model '%s': malformed width list (want e.g. "
				 "784-256-128-10)",
				 spec);
			return DL_EINVAL;
		}
		if (n >= MLP_MAX_LAYERS + 1) {
			snprintf(err, err_size,
				 "model '%s': more than %d layers", spec,
				 MLP_MAX_LAYERS);
			return DL_ELIMIT;
		}
		memcpy(part, p, len);
		part[len] = '\0';
		if (parse_int(part, 1, MLP_MAX_WIDTH, &w) != 0) {
			snprintf(err, err_size,
				 "model '%s': width '%s' is not a number in "
				 "1..%d",
				 spec, part, MLP_MAX_WIDTH);
			return DL_EINVAL;
		}
		s.widths[n++] = w;
		p += len;
		if (*p == '-') {
			p++;
			if (*p == '\0') {
				snprintf(err, err_size,
					 "model '%s': trailing '-'", spec);
				return DL_EINVAL;
			}
		}
	}
	if (n < 2) {
		snprintf(err, err_size,
			 "model '%s': need at least an input and an output "
			 "width",
			 spec);
		return DL_EINVAL;
	}
	if (s.widths[n - 1] < 2) {
		snprintf(err, err_size, "model '%s': need at least 2 classes",
			 spec);
		return DL_EINVAL;
	}
	s.n_layers = n - 1;
	*out = s;
	return 0;
}

void mlp_shape_format(const struct mlp_shape *s, char *out, size_t out_size)
{
	size_t used = 0;

	if (out_size == 0)
		return;
	out[0] = '\0';
	for (int i = 0; i <= s->n_layers && used < out_size; i++) {
		int w = snprintf(out + used, out_size - used, "%s%d",
				 i ? "-" : "", s->widths[i]);
		if (w < 0)
			return;
		used += (size_t)w;
	}
	if (s->batch_norm && used < out_size)
		snprintf(out + used, out_size - used, "+bn");
}

int mlp_shape_equal(const struct mlp_shape *a, const struct mlp_shape *b)
{
	if (a->n_layers != b->n_layers || !a->batch_norm != !b->batch_norm)
		return 0;
	for (int i = 0; i <= a->n_layers; i++)
		if (a->widths[i] != b->widths[i])
			return 0;
	return 1;
}

static int has_bn(const struct mlp_shape *s, int layer)
{
	return s->batch_norm && layer < s->n_layers - 1;
}

void mlp_layer_range(const struct mlp_shape *s, int layer, size_t *begin,
		     size_t *end)
{
	size_t off = 0;

	for (int l = 0; l < s->n_layers; l++) {
		size_t in = (size_t)s->widths[l],
		       out = (size_t)s->widths[l + 1];
		size_t n = out * in + out + (has_bn(s, l) ? 2 * out : 0);

		if (l == layer) {
			*begin = off;
			*end = off + n;
			return;
		}
		off += n;
	}
	*begin = *end = off;
}

size_t mlp_param_count(const struct mlp_shape *s)
{
	size_t begin, end;

	mlp_layer_range(s, s->n_layers - 1, &begin, &end);
	return end;
}

size_t mlp_buffer_count(const struct mlp_shape *s)
{
	size_t n = 0;

	for (int l = 0; l < s->n_layers; l++)
		if (has_bn(s, l))
			n += 2 * (size_t)s->widths[l + 1];
	return n;
}

void mlp_init_params(const struct mlp_shape *s, uint64_t seed, float *params,
		     float *buffers)
{
	struct train_rng rng;
	size_t off = 0, boff = 0;

	train_rng_seed(&rng, seed, 0x6d6c70696e6974ULL /* "mlpinit" */);
	for (int l = 0; l < s->n_layers; l++) {
		size_t in = (size_t)s->widths[l],
		       out = (size_t)s->widths[l + 1];
		float bound = 1.0f / sqrtf((float)in);

		for (size_t i = 0; i < out * in + out; i++)
			params[off + i] =
			    bound * (2.0f * train_rng_float(&rng) - 1.0f);
		off += out * in + out;
		if (has_bn(s, l)) {
			for (size_t i = 0; i < out; i++) {
				params[off + i] = 1.0f;
				params[off + out + i] = 0.0f;
				if (buffers) {
					buffers[boff + i] = 0.0f;
					buffers[boff + out + i] = 1.0f;
				}
			}
			off += 2 * out;
			boff += 2 * out;
		}
	}
}

static void *be_alloc_floats(const struct train_backend *be, size_t n)
{
	return be->alloc(be->ctx, (n ? n : 1) * sizeof(float));
}

int mlp_new(const struct mlp_shape *s, const struct train_backend *be,
	    int max_batch, struct mlp **out)
{
	struct mlp *m;
	size_t off = 0, boff = 0, max_width = 0;
	int ok = 1;

	if (max_batch < 1 || s->n_layers < 1 || s->n_layers > MLP_MAX_LAYERS)
		return DL_EINVAL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return DL_ENOMEM;
	m->shape = *s;
	m->be = be;
	m->max_batch = max_batch;
	m->n_params = mlp_param_count(s);
	m->n_buffers = mlp_buffer_count(s);
	for (int l = 0; l < s->n_layers; l++) {
		size_t in = (size_t)s->widths[l], w = (size_t)s->widths[l + 1];

		m->w_off[l] = off;
		m->b_off[l] = off + w * in;
		off += w * in + w;
		if (has_bn(s, l)) {
			m->gamma_off[l] = off;
			m->beta_off[l] = off + w;
			off += 2 * w;
			m->rmean_off[l] = boff;
			m->rvar_off[l] = boff + w;
			boff += 2 * w;
		}
	}
	for (int l = 0; l <= s->n_layers; l++)
		if ((size_t)s->widths[l] > max_width)
			max_width = (size_t)s->widths[l];

	m->params = be_alloc_floats(be, m->n_params);
	m->grads = be_alloc_floats(be, m->n_params);
	m->buffers = be_alloc_floats(be, m->n_buffers);
	m->delta[0] = be_alloc_floats(be, (size_t)max_batch * max_width);
	m->delta[1] = be_alloc_floats(be, (size_t)max_batch * max_width);
	m->loss_stats = be_alloc_floats(be, 2);
	ok = m->params && m->grads && m->buffers && m->delta[0] &&
	     m->delta[1] && m->loss_stats;
	if (be->on_device) {
		m->input = be_alloc_floats(be, (size_t)max_batch *
						   (size_t)s->widths[0]);
		m->labels =
		    be->alloc(be->ctx, (size_t)max_batch * sizeof(int32_t));
		ok = ok && m->input && m->labels;
	}
	for (int l = 0; l < s->n_layers && ok; l++) {
		size_t w = (size_t)s->widths[l + 1];

		m->act[l] = be_alloc_floats(be, (size_t)max_batch * w);
		ok = m->act[l] != NULL;
		if (ok && has_bn(s, l)) {
			m->xhat[l] = be_alloc_floats(be, (size_t)max_batch * w);
			m->mean[l] = be_alloc_floats(be, w);
			m->invstd[l] = be_alloc_floats(be, w);
			m->sums[l] = be_alloc_floats(be, 2 * w);
			ok = m->xhat[l] && m->mean[l] && m->invstd[l] &&
			     m->sums[l];
		}
	}
	if (!ok) {
		mlp_free(m);
		return DL_ENOMEM;
	}
	*out = m;
	return 0;
}

void mlp_free(struct mlp *m)
{
	const struct train_backend *be;

	if (m == NULL)
		return;
	be = m->be;
	be->release(be->ctx, m->params);
	be->release(be->ctx, m->grads);
	be->release(be->ctx, m->buffers);
	be->release(be->ctx, m->delta[0]);
	be->release(be->ctx, m->delta[1]);
	be->release(be->ctx, m->loss_stats);
	be->release(be->ctx, m->input);
	be->release(be->ctx, m->labels);
	for (int l = 0; l < m->shape.n_layers; l++) {
		be->release(be->ctx, m->act[l]);
		be->release(be->ctx, m->xhat[l]);
		be->release(be->ctx, m->mean[l]);
		be->release(be->ctx, m->invstd[l]);
		be->release(be->ctx, m->sums[l]);
	}
	free(m);
}

const struct mlp_shape *mlp_shape(const struct mlp *m)
{
	return &m->shape;
}

float *mlp_params(struct mlp *m)
{
	return m->params;
}

float *mlp_grads(struct mlp *m)
{
	return m->grads;
}

float *mlp_buffers(struct mlp *m)
{
	return m->buffers;
}

int mlp_set_params(struct mlp *m, const float *params, const float *buffers)
{
	int rc = m->be->upload(m->be->ctx, m->params, params,
			       m->n_params * sizeof(float));

	if (rc == 0 && buffers && m->n_buffers)
		rc = m->be->upload(m->be->ctx, m->buffers, buffers,
				   m->n_buffers * sizeof(float));
	return rc;
}

int mlp_get_params(struct mlp *m, float *params, float *buffers)
{
	int rc = m->be->download(m->be->ctx, params, m->params,
				 m->n_params * sizeof(float));

	if (rc == 0 && buffers && m->n_buffers)
		rc = m->be->download(m->be->ctx, buffers, m->buffers,
				     m->n_buffers * sizeof(float));
	return rc;
}

/* stage_batch puts a host batch where the kernels can read it. */
static int stage_batch(struct mlp *m, const float *x, const int32_t *labels,
		       int rows, const float **in, const int32_t **lab)
{
	const struct train_backend *be = m->be;
	int rc;

	if (!be->on_device) {
		*in = x;
		*lab = labels;
		return 0;
	}
	*in = m->input;
	*lab = m->labels;
	if (rows == 0)
		return 0;
	rc = be->upload(be->ctx, m->input, x,
			(size_t)rows * (size_t)m->shape.widths[0] *
			    sizeof(float));
	if (rc == 0 && labels)
		rc = be->upload(be->ctx, m->labels, labels,
				(size_t)rows * sizeof(int32_t));
	return rc;
}

/* forward runs the layers over rows staged inputs. training: batch norm
 * uses (globally summed) batch statistics and updates running ones;
 * otherwise the prepared running statistics in mean/invstd. */
static int forward(struct mlp *m, const float *in, int rows, int global_rows,
		   int training, const struct mlp_hooks *hooks)
{
	const struct train_backend *be = m->be;
	const struct mlp_shape *s = &m->shape;
	const float *a = in;
	int rc;

	for (int l = 0; l < s->n_layers; l++) {
		int inw = s->widths[l], w = s->widths[l + 1];
		float *h = m->act[l];

		if (rows > 0) {
			be->gemm(be->ctx, 0, 1, rows, w, inw, 1.0f, a, inw,
				 m->params + m->w_off[l], inw, 0.0f, h, w);
			be->bias_add(be->ctx, h, m->params + m->b_off[l], rows,
				     w);
		}
		if (l == s->n_layers - 1)
			break;
		if (has_bn(s, l)) {
			float *gamma = m->params + m->gamma_off[l];
			float *beta = m->params + m->beta_off[l];

			if (training) {
				be->bn_stats(be->ctx, h, rows, w, m->sums[l]);
				if (hooks && hooks->sum_stats) {
					rc = hooks->sum_stats(hooks->ctx,
							      m->sums[l],
							      2 * (size_t)w);
					if (rc != 0)
						return rc;
				}
				be->bn_finalize(
				    be->ctx, m->sums[l], (float)global_rows, w,
				    BN_EPS, BN_MOMENTUM, m->mean[l],
				    m->invstd[l], m->buffers + m->rmean_off[l],
				    m->buffers + m->rvar_off[l]);
			}
			if (rows > 0)
				be->bn_forward(be->ctx, h,
					       training ? m->xhat[l] : NULL,
					       m->mean[l], m->invstd[l], gamma,
					       beta, rows, w);
		}
		if (rows > 0)
			be->relu(be->ctx, h, (size_t)rows * (size_t)w);
		a = h;
	}
	return 0;
}

/* bn_backward_layer: the batch norm of layer l on the way back: this
 * rank's shares of dgamma and dbeta into the gradients, the statistics
 * summed over the ranks (hooks->sum_stats), then d through the norm. */
static int bn_backward_layer(struct mlp *m, int l, float *d, int rows,
			     int global_rows, const struct mlp_hooks *hooks)
{
	const struct train_backend *be = m->be;
	int w = m->shape.widths[l + 1], rc;

	be->bn_backward_sums(be->ctx, d, m->xhat[l], rows, w, m->sums[l]);
	/* this rank's share of dbeta and dgamma; the gradient all-reduce
	 * sums the shares */
	be->copy(be->ctx, m->grads + m->beta_off[l], m->sums[l],
		 (size_t)w * sizeof(float));
	be->copy(be->ctx, m->grads + m->gamma_off[l], m->sums[l] + w,
		 (size_t)w * sizeof(float));
	if (hooks && hooks->sum_stats) {
		rc = hooks->sum_stats(hooks->ctx, m->sums[l], 2 * (size_t)w);
		if (rc != 0)
			return rc;
	}
	if (rows > 0)
		be->bn_backward(be->ctx, d, m->xhat[l],
				m->params + m->gamma_off[l], m->invstd[l],
				m->sums[l], (float)global_rows, rows, w);
	return 0;
}

/* backward: the loss of the batch forward() just ran (into
 * m->loss_stats), then the gradients layer by layer from the last,
 * calling hooks->grads_ready as each layer's are complete. */
static int backward(struct mlp *m, const float *in, const int32_t *lab,
		    int rows, int global_rows, const struct mlp_hooks *hooks)
{
	const struct train_backend *be = m->be;
	const struct mlp_shape *s = &m->shape;
	int cur = 0, rc, L = s->n_layers;
	float *d = m->delta[cur];

	be->zero(be->ctx, m->loss_stats, 2 * sizeof(float));
	if (rows > 0)
		be->softmax_xent(be->ctx, m->act[L - 1], lab, rows,
				 s->widths[L], 1.0f / (float)global_rows, d,
				 m->loss_stats);
	for (int l = L - 1; l >= 0; l--) {
		int inw = s->widths[l], w = s->widths[l + 1];
		const float *a_prev = l > 0 ? m->act[l - 1] : in;
		float *gw = m->grads + m->w_off[l];
		float *gb = m->grads + m->b_off[l];

		if (l < L - 1) {
			if (rows > 0)
				be->relu_backward(be->ctx, d, m->act[l],
						  (size_t)rows * (size_t)w);
			if (has_bn(s, l)) {
				rc = bn_backward_layer(m, l, d, rows,
						       global_rows, hooks);
				if (rc != 0)
					return rc;
			}
		}
		if (rows > 0) {
			be->gemm(be->ctx, 1, 0, w, inw, rows, 1.0f, d, w,
				 a_prev, inw, 0.0f, gw, inw);
			be->bias_grad(be->ctx, gb, d, rows, w);
		} else {
			be->zero(be->ctx, gw,
				 ((size_t)w * (size_t)inw + (size_t)w) *
				     sizeof(float));
		}
		if (hooks && hooks->grads_ready) {
			rc = hooks->grads_ready(hooks->ctx, l);
			if (rc != 0)
				return rc;
		}
		if (l > 0 && rows > 0) {
			float *next = m->delta[cur ^ 1];

			be->gemm(be->ctx, 0, 0, rows, inw, w, 1.0f, d, w,
				 m->params + m->w_off[l], inw, 0.0f, next, inw);
			cur ^= 1;
			d = next;
		}
	}
	return 0;
}

int mlp_train_step(struct mlp *m, const float *x, const int32_t *labels,
		   int rows, int global_rows, const struct mlp_hooks *hooks,
		   double stats[2])
{
	const struct train_backend *be = m->be;
	const float *in;
	const int32_t *lab;
	float host_stats[2];
	int rc;

	if (rows < 0 || rows > m->max_batch || global_rows < 1 ||
	    rows > global_rows)
		return DL_EINVAL;
	rc = stage_batch(m, x, labels, rows, &in, &lab);
	if (rc == 0)
		rc = forward(m, in, rows, global_rows, 1, hooks);
	if (rc == 0)
		rc = backward(m, in, lab, rows, global_rows, hooks);
	if (rc == 0)
		rc = be->download(be->ctx, host_stats, m->loss_stats,
				  sizeof(host_stats));
	if (rc != 0)
		return rc;
	stats[0] += host_stats[0];
	stats[1] += host_stats[1];
	return 0;
}

/* prepare_eval_stats turns running statistics into mean/invstd. */
static int prepare_eval_stats(struct mlp *m)
{
	const struct train_backend *be = m->be;
	const struct mlp_shape *s = &m->shape;
	float *tmp;
	int rc = 0;

	if (!s->batch_norm)
		return 0;
	tmp = malloc(2 * (size_t)MLP_MAX_WIDTH * sizeof(float));
	if (tmp == NULL)
		return DL_ENOMEM;
	for (int l = 0; l < s->n_layers && rc == 0; l++) {
		size_t w = (size_t)s->widths[l + 1];

		if (!has_bn(s, l))
			continue;
		rc = be->download(be->ctx, tmp, m->buffers + m->rmean_off[l],
				  2 * w * sizeof(float));
		if (rc != 0)
			break;
		for (size_t i = 0; i < w; i++)
			tmp[w + i] = 1.0f / sqrtf(tmp[w + i] + BN_EPS);
		rc = be->upload(be->ctx, m->mean[l], tmp, w * sizeof(float));
		if (rc == 0)
			rc = be->upload(be->ctx, m->invstd[l], tmp + w,
					w * sizeof(float));
	}
	free(tmp);
	return rc;
}

int mlp_evaluate(struct mlp *m, const float *x, const int32_t *labels, int rows,
		 double stats[2])
{
	const struct train_backend *be = m->be;
	const struct mlp_shape *s = &m->shape;
	int rc = prepare_eval_stats(m);

	for (int done = 0; rc == 0 && done < rows;) {
		int n = rows - done < m->max_batch ? rows - done : m->max_batch;
		const float *in;
		const int32_t *lab;
		float host_stats[2];

		rc = stage_batch(m, x + (size_t)done * (size_t)s->widths[0],
				 labels + done, n, &in, &lab);
		if (rc == 0)
			rc = forward(m, in, n, n, 0, NULL);
		if (rc != 0)
			break;
		be->zero(be->ctx, m->loss_stats, 2 * sizeof(float));
		be->softmax_xent(be->ctx, m->act[s->n_layers - 1], lab, n,
				 s->widths[s->n_layers], 0.0f, NULL,
				 m->loss_stats);
		rc = be->download(be->ctx, host_stats, m->loss_stats,
				  sizeof(host_stats));
		stats[0] += host_stats[0];
		stats[1] += host_stats[1];
		done += n;
	}
	return rc;
}

int mlp_loss_host(struct mlp *m, const float *x, const int32_t *labels,
		  int rows, double *loss, float *grads_host)
{
	double stats[2] = {0, 0};
	int rc = mlp_train_step(m, x, labels, rows, rows, NULL, stats);

	if (rc == 0 && grads_host)
		rc = m->be->download(m->be->ctx, grads_host, m->grads,
				     m->n_params * sizeof(float));
	*loss = stats[0] / rows;
	return rc;
}
