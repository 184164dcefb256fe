/* SPDX-License-Identifier: Apache-2.0 */
/*
 * optim.h - SGD with momentum and weight decay, PyTorch semantics:
 *   g = grad + weight_decay * p
 *   buf = g on the first step, else momentum * buf + g  (dampening 0)
 *   p -= lr * buf
 * The momentum buffer lives in the backend's memory next to the
 * parameters and is part of every checkpoint.
 */
#ifndef DLAUNCH_TRAIN_OPTIM_H
#define DLAUNCH_TRAIN_OPTIM_H

#include <stddef.h>

#include "backend.h"

struct train_optim {
	const struct train_backend *be; /* borrowed */
	size_t n;			/* parameters */
	float lr, momentum, weight_decay;
	float *buf;    /* momentum buffer (backend memory), n floats */
	int has_state; /* buf holds momentum (a step has been taken) */
};

int train_optim_init(struct train_optim *o, const struct train_backend *be,
		     size_t n, float lr, float momentum, float weight_decay);
void train_optim_release(struct train_optim *o);
/* train_optim_step updates params from grads (both backend memory) at
 * learning rate lr. */
void train_optim_step(struct train_optim *o, float *params, const float *grads,
		      float lr);
/* train_optim_get / _set copy the momentum buffer out / in (host). */
int train_optim_get(const struct train_optim *o, float *host);
int train_optim_set(struct train_optim *o, const float *host, int has_state);

#endif
