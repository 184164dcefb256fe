/* SPDX-License-Identifier: Apache-2.0 */
/*
 * data.h - the trainer's data sets: Fashion-MNIST (and any MNIST-format
 * data) from IDX files, gzip-compressed or not, and a deterministic
 * synthetic classification set for tests.
 *
 * A data set holds n samples of dim features and a label in [0, classes).
 * Pixels are kept as bytes and normalised when a batch is gathered.
 */
#ifndef DLAUNCH_DATA_H
#define DLAUNCH_DATA_H

#include <stddef.h>
#include <stdint.h>

#define DATA_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define DATA_MAX_SAMPLES 10000000u
#define DATA_MAX_BYTES	 (4ULL << 30) /* a data set's pixels, at most */

struct dataset {
	size_t n;    /* samples */
	size_t dim;  /* features per sample */
	int classes; /* labels are in [0, classes) */
	uint8_t *u8; /* n x dim pixels (IDX), or NULL */
	float *f32;  /* n x dim features (synthetic), or NULL */
	int32_t *labels;
	float scale, shift; /* feature = u8 * scale + shift */
};

/*
 * data_read_idx reads an image file (magic 0x00000803, dims n x rows x
 * cols) and a label file (magic 0x00000801, n) into ds; gzip is detected
 * by content. Wrong magic, truncation, trailing data, a count mismatch,
 * labels >= classes or sizes over the limits fail with a message naming
 * the file in err: DL_ENOTFOUND, DL_EIO or DL_ECORRUPT.
 */
int data_read_idx(const char *images_path, const char *labels_path, int classes,
		  struct dataset *ds, char *err, size_t err_size);

/* data_load_fashion_mnist loads dir/{train,t10k}-{images-idx3,labels-idx1}
 * -ubyte.gz (also without .gz), normalised as usual for Fashion-MNIST. */
int data_load_fashion_mnist(const char *dir, struct dataset *train,
			    struct dataset *test, char *err, size_t err_size);

/* data_synthetic generates n samples (and n/5, at least 1, test samples)
 * of dim features and classes labels: Gaussian clusters around random
 * class centres, the same for the same seed everywhere. */
int data_synthetic(size_t n, size_t dim, int classes, uint64_t seed,
		   struct dataset *train, struct dataset *test);

/* data_gather copies samples idx[0..count) into x (count x dim) and y. */
void data_gather(const struct dataset *ds, const uint32_t *idx, size_t count,
		 float *x, int32_t *y);

void data_release(struct dataset *ds);

#endif
