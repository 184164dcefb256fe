/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sampler.h - DistributedSampler with a fixed global batch.
 *
 * Each epoch has one permutation of the n samples, computed from the seed
 * and the epoch number alone, so every rank (and every restart) sees the
 * same one. The epoch is cut into global batches of global_batch samples
 * (the last may be shorter; nothing is dropped); rank r of w takes the
 * contiguous slice [b*r/w, b*(r+1)/w) of each global batch of b samples.
 * Positions are sample offsets into the epoch, so they survive a change of
 * world size (and of global batch) between restarts.
 */
#ifndef DLAUNCH_TRAIN_SAMPLER_H
#define DLAUNCH_TRAIN_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

struct train_sampler {
	size_t n;
	uint64_t seed;
	uint64_t epoch; /* the epoch perm belongs to */
	uint32_t *perm; /* owned, n entries */
};

int train_sampler_init(struct train_sampler *s, size_t n, uint64_t seed);
void train_sampler_release(struct train_sampler *s);

/* train_sampler_set_epoch computes the permutation of epoch. */
void train_sampler_set_epoch(struct train_sampler *s, uint64_t epoch);

/* train_sampler_steps: global batches per epoch (ceil(n / global_batch)). */
size_t train_sampler_steps(size_t n, size_t global_batch);

/*
 * train_sampler_batch: the global batch starting at sample offset `offset`
 * of the current epoch (offset < n): *global_count samples in all, of
 * which this rank's *local_count indices are written to idx (room for
 * global_batch / world + 1). Returns the offset of the next batch.
 */
size_t train_sampler_batch(const struct train_sampler *s, size_t offset,
			   size_t global_batch, int rank, int world,
			   uint32_t *idx, size_t *local_count,
			   size_t *global_count);

#endif
