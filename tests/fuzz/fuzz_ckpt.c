/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_ckpt.c - libFuzzer harness for the checkpoint readers: ckpt_decode
 * (an image in memory) and ckpt_load (a file, streamed) must refuse any
 * damaged input with an error (never crash, never read out of bounds, never
 * allocate from an unchecked size), must agree with each other (same
 * result, same message, same state), and an image they accept must encode
 * back to the same bytes. The file is an anonymous memory file (memfd)
 * opened through its /proc/self/fd path, as in fuzz_idx.c.
 *
 * Corpus: tests/fuzz/corpus/ckpt (small valid checkpoints).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../trainer/ckpt.h"
#include "memfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_state(const struct ckpt_state *a, const struct ckpt_state *b)
{
	return mlp_shape_equal(&a->shape, &b->shape) && a->step == b->step &&
	       a->epoch == b->epoch && a->epoch_offset == b->epoch_offset &&
	       a->seed == b->seed && a->rng_key == b->rng_key &&
	       a->rng_counter == b->rng_counter &&
	       a->global_batch == b->global_batch &&
	       a->has_momentum == b->has_momentum &&
	       a->n_params == b->n_params && a->n_buffers == b->n_buffers &&
	       memcmp(a->params, b->params, a->n_params * sizeof(float)) == 0 &&
	       memcmp(a->momentum, b->momentum, a->n_params * sizeof(float)) ==
		   0 &&
	       (a->n_buffers == 0 || memcmp(a->buffers, b->buffers,
					    a->n_buffers * sizeof(float)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ckpt_state st, from_file;
	char err[256], file_err[512], path[64];
	unsigned char *again = NULL;
	size_t again_len = 0, fl, ml;
	int rc, file_rc, fd;

	memset(&st, 0, sizeof(st));
	rc = ckpt_decode(data, size, &st, err, sizeof(err));

	fd = memfile(data, size, path, sizeof(path));
	if (fd >= 0) {
		file_rc =
		    ckpt_load(path, &from_file, file_err, sizeof(file_err));
		close(fd);
		if (file_rc != rc)
			abort(); /* the two readers disagree */
		if (rc == 0) {
			if (!same_state(&st, &from_file))
				abort();
			ckpt_state_release(&from_file);
		} else {
			fl = strlen(file_err);
			ml = strlen(err);
			if (from_file.params != NULL || fl < ml ||
			    strcmp(file_err + fl - ml, err) != 0)
				abort(); /* another verdict, or a leak */
		}
	}
	if (rc != 0)
		return 0;
	if (ckpt_encode(&st, &again, &again_len) == 0) {
		if (again_len != size || memcmp(again, data, size) != 0)
			abort(); /* accepted but not a faithful image */
		free(again);
	}
	ckpt_state_release(&st);
	return 0;
}
