/* SPDX-License-Identifier: Apache-2.0 */
/* sampler.c - DistributedSampler with a fixed global batch (see
 * sampler.h). */
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sampler.h"
#include "dlaunch/error.h"

int train_sampler_init(struct train_sampler *s, size_t n, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	if (n == 0 || n > UINT32_MAX)
		return DL_EINVAL;
	s->perm = malloc(n * sizeof(*s->perm));
	if (s->perm == NULL)
		return DL_ENOMEM;
	s->n = n;
	s->seed = seed;
	train_sampler_set_epoch(s, 0);
	return 0;
}

void train_sampler_release(struct train_sampler *s)
{
	free(s->perm);
	memset(s, 0, sizeof(*s));
}

void train_sampler_set_epoch(struct train_sampler *s, uint64_t epoch)
{
	struct train_rng rng;

	train_rng_seed(&rng, s->seed, 0x73616d706c6572ULL ^ (epoch << 8));
	for (size_t i = 0; i < s->n; i++)
		s->perm[i] = (uint32_t)i;
	/* Fisher-Yates, from the top */
	for (size_t i = s->n - 1; i > 0; i--) {
		size_t j = (size_t)train_rng_below(&rng, (uint64_t)i + 1);
		uint32_t t = s->perm[i];

		s->perm[i] = s->perm[j];
		s->perm[j] = t;
	}
	s->epoch = epoch;
}

size_t train_sampler_steps(size_t n, size_t global_batch)
{
	return global_batch ? (n + global_batch - 1) / global_batch : 0;
}

size_t train_sampler_batch(const struct train_sampler *s, size_t offset,
			   size_t global_batch, int rank, int world,
			   uint32_t *idx, size_t *local_count,
			   size_t *global_count)
{
	size_t b, lo, hi;

	if (offset >= s->n) {
		*local_count = *global_count = 0;
		return s->n;
	}
	b = s->n - offset < global_batch ? s->n - offset : global_batch;
	lo = b * (size_t)rank / (size_t)world;
	hi = b * ((size_t)rank + 1) / (size_t)world;
	memcpy(idx, s->perm + offset + lo, (hi - lo) * sizeof(*idx));
	*local_count = hi - lo;
	*global_count = b;
	return offset + b;
}
