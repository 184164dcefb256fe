/* SPDX-License-Identifier: Apache-2.0 */
/* rng.c - SplitMix64-based counter generator (see rng.h). */
#include <math.h>

#include "rng.h"

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void train_rng_seed(struct train_rng *r, uint64_t seed, uint64_t stream)
{
	r->key = mix64(mix64(seed + 0x9e3779b97f4a7c15ULL) ^ stream);
	r->counter = 0;
}

uint64_t train_rng_next(struct train_rng *r)
{
	r->counter++;
	return mix64(r->key + r->counter * 0x9e3779b97f4a7c15ULL);
}

float train_rng_float(struct train_rng *r)
{
	return (float)(train_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

uint64_t train_rng_below(struct train_rng *r, uint64_t n)
{
	/* reject the top partial block so every value is equally likely */
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;

	do
		x = train_rng_next(r);
	while (x >= limit);
	return x % n;
}

float train_rng_normal(struct train_rng *r)
{
	double u1 =
	    ((double)(train_rng_next(r) >> 11) + 1.0) / 9007199254740993.0;
	double u2 = (double)(train_rng_next(r) >> 11) / 9007199254740992.0;

	return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
