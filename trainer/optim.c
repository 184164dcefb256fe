/* SPDX-License-Identifier: Apache-2.0 */
/* optim.c - SGD with momentum and weight decay (see optim.h). */
#include <string.h>

#include "optim.h"
#include "dlaunch/error.h"

int train_optim_init(struct train_optim *o, const struct train_backend *be,
		     size_t n, float lr, float momentum, float weight_decay)
{
	memset(o, 0, sizeof(*o));
	o->be = be;
	o->n = n;
	o->lr = lr;
	o->momentum = momentum;
	o->weight_decay = weight_decay;
	o->buf = be->alloc(be->ctx, (n ? n : 1) * sizeof(float));
	return o->buf ? 0 : DL_ENOMEM;
}

void train_optim_release(struct train_optim *o)
{
	if (o->be)
		o->be->release(o->be->ctx, o->buf);
	memset(o, 0, sizeof(*o));
}

void train_optim_step(struct train_optim *o, float *params, const float *grads,
		      float lr)
{
	o->be->sgd(o->be->ctx, params, grads, o->buf, o->n, lr, o->momentum,
		   o->weight_decay, !o->has_state);
	if (o->momentum != 0.0f)
		o->has_state = 1;
}

int train_optim_get(const struct train_optim *o, float *host)
{
	return o->be->download(o->be->ctx, host, o->buf, o->n * sizeof(float));
}

int train_optim_set(struct train_optim *o, const float *host, int has_state)
{
	int rc = o->be->upload(o->be->ctx, o->buf, host, o->n * sizeof(float));

	if (rc == 0)
		o->has_state = has_state;
	return rc;
}
