/*
 * fuzz_ckpt.c - libFuzzer harness for the checkpoint reader: ckpt_decode
 * must refuse any damaged image with an error (never crash, never read out
 * of bounds, never allocate from an unchecked size), and an image it
 * accepts must encode back to the same bytes.
 *
 * Corpus: tests/fuzz/corpus/ckpt (small valid checkpoints).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ckpt_state st;
	char err[256];
	unsigned char *again = NULL;
	size_t again_len = 0;

	memset(&st, 0, sizeof(st));
	if (ckpt_decode(data, size, &st, err, sizeof(err)) != 0)
		return 0;
	if (ckpt_encode(&st, &again, &again_len) == 0) {
		if (again_len != size || memcmp(again, data, size) != 0)
			abort(); /* accepted but not a faithful image */
		free(again);
	}
	ckpt_state_release(&st);
	return 0;
}
