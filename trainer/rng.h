/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rng.h - the trainer's deterministic random numbers.
 *
 * A counter-based generator (SplitMix64 over a stream key): the whole state
 * is two 64-bit words, so it is checkpointed exactly, and the same seed
 * gives the same numbers on every rank and every machine.
 */
#ifndef DLAUNCH_TRAIN_RNG_H
#define DLAUNCH_TRAIN_RNG_H

#include <stdint.h>

struct train_rng {
	uint64_t key;	  /* from seed and stream */
	uint64_t counter; /* numbers drawn so far */
};

/* train_rng_seed starts stream `stream` of seed (streams are independent). */
void train_rng_seed(struct train_rng *r, uint64_t seed, uint64_t stream);
uint64_t train_rng_next(struct train_rng *r);
/* uniform in [0, 1) with 24 random bits */
float train_rng_float(struct train_rng *r);
/* uniform in [0, n), n > 0, without modulo bias */
uint64_t train_rng_below(struct train_rng *r, uint64_t n);
/* standard normal (Box-Muller) */
float train_rng_normal(struct train_rng *r);

#endif
