/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_idx.c - libFuzzer harness for the IDX (MNIST format) reader:
 * data_read_idx must refuse anything malformed with an error, never crash
 * or over-allocate. The input is split in two at its first byte's position
 * (an image file and a label file), each written to an anonymous memory
 * file (memfd) whose /proc/self/fd path the reader opens; gzip content is
 * detected by the reader as in real files.
 *
 * Corpus: tests/fuzz/corpus/idx.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../trainer/data.h"
#include "memfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char images[64], labels[64], err[256];
	struct dataset ds;
	size_t split;
	int fi, fl;

	if (size < 1)
		return 0;
	split = 1 + (size_t)data[0] * (size - 1) / 255;
	fi = memfile(data + 1, split - 1, images, sizeof(images));
	fl = memfile(data + split, size - split, labels, sizeof(labels));
	if (fi >= 0 && fl >= 0) {
		memset(&ds, 0, sizeof(ds));
		if (data_read_idx(images, labels, 10, &ds, err, sizeof(err)) ==
		    0)
			data_release(&ds);
	}
	if (fi >= 0)
		close(fi);
	if (fl >= 0)
		close(fl);
	return 0;
}
