/* SPDX-License-Identifier: Apache-2.0 */
/*
 * data.c - IDX readers (gzip through zlib, which also reads plain files)
 * and the synthetic data set. Every size from a file is checked against the
 * limits in data.h before anything is allocated.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data.h"
#include "rng.h"
#include "dlaunch/error.h"

#define IDX_MAGIC_U8_1D 0x00000801u
#define IDX_MAGIC_U8_3D 0x00000803u

/* bytes read (and allocated ahead) at a time for an IDX payload */
#define IDX_READ_CHUNK ((size_t)1 << 20)

/* read_exact reads n bytes; DL_EIO with err filled on a short read. */
static int read_exact(gzFile f, const char *path, void *data, size_t n,
		      const char *what, char *err, size_t err_size)
{
	unsigned char *p = data;

	while (n > 0) {
		unsigned chunk = n > (1u << 30) ? (1u << 30) : (unsigned)n;
		int got = gzread(f, p, chunk);

		if (got <= 0) {
			int zerr = Z_OK;
			const char *msg = gzerror(f, &zerr);

			snprintf(err, err_size,
				 "%s: truncated while reading %s%s%s", path,
				 what, got < 0 ? ": " : "", got < 0 ? msg : "");
			return DL_ECORRUPT;
		}
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

static uint32_t be32(const unsigned char *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* idx_header: checks an IDX header (magic, ndims dimensions, none 0)
 * against the limits; dims and *total (their product) receive it. */
static int idx_header(const char *path, const unsigned char *head,
		      uint32_t magic, int ndims, uint32_t *dims,
		      uint64_t *total, char *err, size_t err_size)
{
	if (be32(head) != magic) {
		snprintf(err, err_size,
			 "%s: not an IDX file of that kind (magic 0x%08x, "
			 "expected 0x%08x)",
			 path, be32(head), magic);
		return DL_ECORRUPT;
	}
	*total = 1;
	for (int i = 0; i < ndims; i++) {
		dims[i] = be32(head + 4 + 4 * i);
		if (dims[i] == 0) {
			snprintf(err, err_size, "%s: dimension %d is 0", path,
				 i);
			return DL_ECORRUPT;
		}
		*total *= dims[i];
		if (*total > DATA_MAX_BYTES) {
			snprintf(err, err_size,
				 "%s: data larger than the %llu-byte limit",
				 path, (unsigned long long)DATA_MAX_BYTES);
			return DL_ELIMIT;
		}
	}
	if (dims[0] > DATA_MAX_SAMPLES) {
		snprintf(err, err_size, "%s: %u samples, over the limit of %u",
			 path, dims[0], DATA_MAX_SAMPLES);
		return DL_ELIMIT;
	}
	return 0;
}

/* idx_body: reads the total bytes the header announced into *out (the
 * caller frees it, also on failure). The header's sizes are only a
 * claim: the buffer grows as bytes arrive, so a short file cannot make
 * us allocate what it announces. */
static int idx_body(gzFile f, const char *path, size_t total, uint8_t **out,
		    char *err, size_t err_size)
{
	for (size_t have = 0, cap = 0; have < total;) {
		size_t want = total - have;
		if (want > IDX_READ_CHUNK)
			want = IDX_READ_CHUNK;
		if (have + want > cap) {
			size_t grown = cap ? cap * 2 : IDX_READ_CHUNK;
			uint8_t *p;
			if (grown < have + want)
				grown = have + want;
			if (grown > total)
				grown = total;
			p = realloc(*out, grown);
			if (p == NULL) {
				snprintf(err, err_size, "%s: out of memory",
					 path);
				return DL_ENOMEM;
			}
			*out = p;
			cap = grown;
		}
		int rc = read_exact(f, path, *out + have, want, "the data", err,
				    err_size);
		if (rc != 0)
			return rc;
		have += want;
	}
	return 0;
}

/* read_idx reads one IDX file of unsigned bytes with the given magic;
 * dims[0..ndims) receive the dimensions; *out the payload. */
static int read_idx(const char *path, uint32_t magic, int ndims, uint32_t *dims,
		    uint8_t **out, size_t *len, char *err, size_t err_size)
{
	unsigned char head[16], extra;
	uint64_t total = 1;
	uint8_t *data = NULL;
	gzFile f;
	int rc;

	f = gzopen(path, "rb");
	if (f == NULL) {
		snprintf(err, err_size, "%s: cannot open: %s", path,
			 strerror(errno ? errno : ENOENT));
		return errno == ENOENT ? DL_ENOTFOUND : DL_EIO;
	}
	rc = read_exact(f, path, head, 4 + 4 * (size_t)ndims, "the header", err,
			err_size);
	if (rc == 0)
		rc = idx_header(path, head, magic, ndims, dims, &total, err,
				err_size);
	if (rc == 0)
		rc = idx_body(f, path, (size_t)total, &data, err, err_size);
	if (rc != 0)
		goto out;
	if (gzread(f, &extra, 1) != 0) {
		snprintf(err, err_size,
			 "%s: trailing bytes after the %llu the header "
			 "announces",
			 path, (unsigned long long)total);
		rc = DL_ECORRUPT;
		goto out;
	}
	*out = data;
	*len = (size_t)total;
	data = NULL;
out:
	free(data);
	gzclose(f);
	return rc;
}

int data_read_idx(const char *images_path, const char *labels_path, int classes,
		  struct dataset *ds, char *err, size_t err_size)
{
	uint32_t idims[3], ldims[1];
	uint8_t *pixels = NULL, *labels = NULL;
	size_t plen, llen;
	int rc;

	memset(ds, 0, sizeof(*ds));
	rc = read_idx(images_path, IDX_MAGIC_U8_3D, 3, idims, &pixels, &plen,
		      err, err_size);
	if (rc == 0)
		rc = read_idx(labels_path, IDX_MAGIC_U8_1D, 1, ldims, &labels,
			      &llen, err, err_size);
	if (rc != 0)
		goto fail;
	if (ldims[0] != idims[0]) {
		snprintf(err, err_size, "%s: %u labels for the %u images of %s",
			 labels_path, ldims[0], idims[0], images_path);
		rc = DL_ECORRUPT;
		goto fail;
	}
	ds->labels = malloc(llen * sizeof(int32_t));
	if (ds->labels == NULL) {
		rc = DL_ENOMEM;
		snprintf(err, err_size, "%s: out of memory", labels_path);
		goto fail;
	}
	for (size_t i = 0; i < llen; i++) {
		if (labels[i] >= classes) {
			snprintf(err, err_size,
				 "%s: label %u of sample %zu is not below the "
				 "%d classes",
				 labels_path, labels[i], i, classes);
			rc = DL_ECORRUPT;
			goto fail;
		}
		ds->labels[i] = labels[i];
	}
	free(labels);
	ds->n = idims[0];
	ds->dim = (size_t)idims[1] * idims[2];
	ds->classes = classes;
	ds->u8 = pixels;
	ds->scale = 1.0f / 255.0f;
	ds->shift = 0.0f;
	return 0;
fail:
	free(pixels);
	free(labels);
	free(ds->labels);
	memset(ds, 0, sizeof(*ds));
	return rc;
}

/* find_file picks dir/name.gz, else dir/name. */
static void find_file(const char *dir, const char *name, char *out,
		      size_t out_size)
{
	FILE *f;

	snprintf(out, out_size, "%s/%s.gz", dir, name);
	f = fopen(out, "rb");
	if (f) {
		fclose(f);
		return;
	}
	snprintf(out, out_size, "%s/%s", dir, name);
	f = fopen(out, "rb");
	if (f) {
		fclose(f);
		return;
	}
	snprintf(out, out_size, "%s/%s.gz", dir, name);
}

int data_load_fashion_mnist(const char *dir, struct dataset *train,
			    struct dataset *test, char *err, size_t err_size)
{
	/* the training set's pixel mean and standard deviation (over 0..1) */
	const float mean = 0.2860f, std = 0.3530f;
	char ip[PATH_MAX], lp[PATH_MAX];
	int rc;

	find_file(dir, "train-images-idx3-ubyte", ip, sizeof(ip));
	find_file(dir, "train-labels-idx1-ubyte", lp, sizeof(lp));
	rc = data_read_idx(ip, lp, 10, train, err, err_size);
	if (rc != 0)
		return rc;
	find_file(dir, "t10k-images-idx3-ubyte", ip, sizeof(ip));
	find_file(dir, "t10k-labels-idx1-ubyte", lp, sizeof(lp));
	rc = data_read_idx(ip, lp, 10, test, err, err_size);
	if (rc == 0 && test->dim != train->dim) {
		snprintf(err, err_size,
			 "%s: %zu pixels per image, the training set has %zu",
			 ip, test->dim, train->dim);
		data_release(test);
		rc = DL_ECORRUPT;
	}
	if (rc != 0) {
		data_release(train);
		return rc;
	}
	train->scale = test->scale = 1.0f / (255.0f * std);
	train->shift = test->shift = -mean / std;
	return 0;
}

/* fill_synthetic draws n samples around the class centres. */
static int fill_synthetic(struct dataset *ds, size_t n, size_t dim, int classes,
			  const float *centres, struct train_rng *rng)
{
	memset(ds, 0, sizeof(*ds));
	ds->f32 = malloc(n * dim * sizeof(float));
	ds->labels = malloc(n * sizeof(int32_t));
	if (ds->f32 == NULL || ds->labels == NULL) {
		data_release(ds);
		return DL_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		int y = (int)train_rng_below(rng, (uint64_t)classes);

		ds->labels[i] = y;
		for (size_t j = 0; j < dim; j++)
			ds->f32[i * dim + j] = centres[(size_t)y * dim + j] +
					       train_rng_normal(rng);
	}
	ds->n = n;
	ds->dim = dim;
	ds->classes = classes;
	return 0;
}

int data_synthetic(size_t n, size_t dim, int classes, uint64_t seed,
		   struct dataset *train, struct dataset *test)
{
	struct train_rng rng;
	float *centres;
	size_t n_test = n / 5 ? n / 5 : 1;
	/* centres far enough apart in total to be learnable, close enough
	 * per feature that it takes some training */
	float spread;
	int rc;

	if (n == 0 || n > DATA_MAX_SAMPLES || dim == 0 || classes < 2 ||
	    n * dim > DATA_MAX_BYTES / sizeof(float))
		return DL_EINVAL;
	spread = 3.0f / sqrtf((float)dim);
	centres = malloc((size_t)classes * dim * sizeof(float));
	if (centres == NULL)
		return DL_ENOMEM;
	train_rng_seed(&rng, seed, 0x73796e746865ULL /* "synthe" */);
	for (size_t i = 0; i < (size_t)classes * dim; i++)
		centres[i] = spread * train_rng_normal(&rng);
	rc = fill_synthetic(train, n, dim, classes, centres, &rng);
	if (rc == 0) {
		rc = fill_synthetic(test, n_test, dim, classes, centres, &rng);
		if (rc != 0)
			data_release(train);
	}
	free(centres);
	return rc;
}

void data_gather(const struct dataset *ds, const uint32_t *idx, size_t count,
		 float *x, int32_t *y)
{
	for (size_t i = 0; i < count; i++) {
		size_t s = idx[i];
		float *row = x + i * ds->dim;

		y[i] = ds->labels[s];
		if (ds->f32) {
			memcpy(row, ds->f32 + s * ds->dim,
			       ds->dim * sizeof(float));
		} else {
			const uint8_t *src = ds->u8 + s * ds->dim;

			for (size_t j = 0; j < ds->dim; j++)
				row[j] = (float)src[j] * ds->scale + ds->shift;
		}
	}
}

void data_release(struct dataset *ds)
{
	free(ds->u8);
	free(ds->f32);
	free(ds->labels);
	memset(ds, 0, sizeof(*ds));
}
