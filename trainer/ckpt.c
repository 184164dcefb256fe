/*
 * ckpt.c - checkpoint files of dlaunch-train: encoding, validation, durable
 * writes, retention and "newest valid" selection (format in ckpt.h).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlaunch/ckpt.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints are written little-endian with memcpy; port ckpt.c"
#endif

#define CKPT_MAGIC	  "DLTRCKPT"
#define CKPT_HEADER_BYTES 32
#define CKPT_MAX_BYTES	  (8ULL << 30)
#define CKPT_PREFIX	  "ckpt-"
#define CKPT_SUFFIX	  ".dlck"
#define CKPT_DIGITS	  12

int ckpt_state_alloc(struct ckpt_state *st, const struct mlp_shape *shape)
{
	memset(st, 0, sizeof(*st));
	st->shape = *shape;
	st->n_params = mlp_param_count(shape);
	st->n_buffers = mlp_buffer_count(shape);
	st->params = calloc(st->n_params ? st->n_params : 1, sizeof(float));
	st->momentum = calloc(st->n_params ? st->n_params : 1, sizeof(float));
	st->buffers = calloc(st->n_buffers ? st->n_buffers : 1, sizeof(float));
	if (!st->params || !st->momentum || !st->buffers) {
		ckpt_state_release(st);
		return DL_ENOMEM;
	}
	return 0;
}

void ckpt_state_release(struct ckpt_state *st)
{
	free(st->params);
	free(st->momentum);
	free(st->buffers);
	memset(st, 0, sizeof(*st));
}

int ckpt_path(const char *dir, uint64_t step, char *out, size_t out_size)
{
	int n = snprintf(out, out_size, "%s/" CKPT_PREFIX "%0*llu" CKPT_SUFFIX,
			 dir, CKPT_DIGITS, (unsigned long long)step);

	return n < 0 || (size_t)n >= out_size ? DL_ELIMIT : 0;
}

static unsigned char *put(unsigned char *p, const void *v, size_t n)
{
	memcpy(p, v, n);
	return p + n;
}

static unsigned char *put32(unsigned char *p, uint32_t v)
{
	return put(p, &v, 4);
}

static unsigned char *put64(unsigned char *p, uint64_t v)
{
	return put(p, &v, 8);
}

static size_t payload_bytes(const struct ckpt_state *st)
{
	return 4 + 4 * ((size_t)st->shape.n_layers + 1) + 4 + 6 * 8 + 4 + 4 +
	       8 + 8 + (2 * st->n_params + st->n_buffers) * sizeof(float);
}

int ckpt_encode(const struct ckpt_state *st, unsigned char **out, size_t *len)
{
	size_t plen = payload_bytes(st);
	unsigned char *data, *p;
	uint32_t crc;

	if (st->n_params != mlp_param_count(&st->shape) ||
	    st->n_buffers != mlp_buffer_count(&st->shape))
		return DL_EINVAL;
	data = malloc(CKPT_HEADER_BYTES + plen);
	if (data == NULL)
		return DL_ENOMEM;
	p = data + CKPT_HEADER_BYTES;
	p = put32(p, (uint32_t)st->shape.n_layers);
	for (int i = 0; i <= st->shape.n_layers; i++)
		p = put32(p, (uint32_t)st->shape.widths[i]);
	p = put32(p, st->shape.batch_norm ? 1 : 0);
	p = put64(p, st->step);
	p = put64(p, st->epoch);
	p = put64(p, st->epoch_offset);
	p = put64(p, st->seed);
	p = put64(p, st->rng_key);
	p = put64(p, st->rng_counter);
	p = put32(p, st->global_batch);
	p = put32(p, st->has_momentum);
	p = put64(p, st->n_params);
	p = put64(p, st->n_buffers);
	p = put(p, st->params, st->n_params * sizeof(float));
	p = put(p, st->momentum, st->n_params * sizeof(float));
	if (st->n_buffers)
		put(p, st->buffers, st->n_buffers * sizeof(float));

	p = data;
	p = put(p, CKPT_MAGIC, 8);
	p = put32(p, CKPT_VERSION);
	p = put32(p, 0); /* header crc, filled below */
	p = put64(p, plen);
	p = put32(p, crc32c(0, data + CKPT_HEADER_BYTES, plen));
	put32(p, 0);
	crc = crc32c(0, data, CKPT_HEADER_BYTES);
	memcpy(data + 12, &crc, 4);
	*out = data;
	*len = CKPT_HEADER_BYTES + plen;
	return 0;
}

struct reader {
	const unsigned char *p, *end;
};

static int get(struct reader *r, void *v, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	memcpy(v, r->p, n);
	r->p += n;
	return 0;
}

int ckpt_decode(const unsigned char *data, size_t len, struct ckpt_state *st,
		char *err, size_t err_size)
{
	struct reader r;
	struct mlp_shape shape;
	uint32_t version, hcrc, pcrc, u32v, zero = 0;
	uint64_t plen, n_params, n_buffers;
	unsigned char head[CKPT_HEADER_BYTES];
	struct ckpt_state tmp;
	int rc = DL_ECORRUPT;

	memset(st, 0, sizeof(*st));
	if (len < CKPT_HEADER_BYTES || memcmp(data, CKPT_MAGIC, 8) != 0) {
		snprintf(err, err_size, "not a dlaunch-train checkpoint");
		return DL_ECORRUPT;
	}
	memcpy(&version, data + 8, 4);
	memcpy(&hcrc, data + 12, 4);
	memcpy(&plen, data + 16, 8);
	memcpy(&pcrc, data + 24, 4);
	memcpy(head, data, CKPT_HEADER_BYTES);
	memcpy(head + 12, &zero, 4);
	if (crc32c(0, head, CKPT_HEADER_BYTES) != hcrc) {
		snprintf(err, err_size, "header checksum mismatch");
		return DL_ECORRUPT;
	}
	if (version != CKPT_VERSION) {
		snprintf(err, err_size,
			 "format version %u (this build reads %u)", version,
			 CKPT_VERSION);
		return DL_ECORRUPT;
	}
	if (plen != len - CKPT_HEADER_BYTES) {
		snprintf(err, err_size,
			 "%zu payload bytes, the header announces %llu "
			 "(torn or truncated write)",
			 len - CKPT_HEADER_BYTES, (unsigned long long)plen);
		return DL_ECORRUPT;
	}
	if (crc32c(0, data + CKPT_HEADER_BYTES, (size_t)plen) != pcrc) {
		snprintf(err, err_size, "payload checksum mismatch");
		return DL_ECORRUPT;
	}

	r.p = data + CKPT_HEADER_BYTES;
	r.end = data + len;
	memset(&shape, 0, sizeof(shape));
	memset(&tmp, 0, sizeof(tmp));
	if (get(&r, &u32v, 4) || u32v < 1 || u32v > MLP_MAX_LAYERS)
		goto bad;
	shape.n_layers = (int)u32v;
	for (int i = 0; i <= shape.n_layers; i++) {
		if (get(&r, &u32v, 4) || u32v < 1 || u32v > MLP_MAX_WIDTH)
			goto bad;
		shape.widths[i] = (int)u32v;
	}
	if (get(&r, &u32v, 4) || u32v > 1)
		goto bad;
	shape.batch_norm = (int)u32v;
	if (get(&r, &tmp.step, 8) || get(&r, &tmp.epoch, 8) ||
	    get(&r, &tmp.epoch_offset, 8) || get(&r, &tmp.seed, 8) ||
	    get(&r, &tmp.rng_key, 8) || get(&r, &tmp.rng_counter, 8) ||
	    get(&r, &tmp.global_batch, 4) || get(&r, &tmp.has_momentum, 4) ||
	    get(&r, &n_params, 8) || get(&r, &n_buffers, 8))
		goto bad;
	if (n_params != mlp_param_count(&shape) ||
	    n_buffers != mlp_buffer_count(&shape) ||
	    (size_t)(r.end - r.p) != (2 * n_params + n_buffers) * sizeof(float))
		goto bad;
	rc = ckpt_state_alloc(st, &shape);
	if (rc != 0) {
		snprintf(err, err_size, "out of memory");
		return rc;
	}
	st->step = tmp.step;
	st->epoch = tmp.epoch;
	st->epoch_offset = tmp.epoch_offset;
	st->seed = tmp.seed;
	st->rng_key = tmp.rng_key;
	st->rng_counter = tmp.rng_counter;
	st->global_batch = tmp.global_batch;
	st->has_momentum = tmp.has_momentum;
	get(&r, st->params, st->n_params * sizeof(float));
	get(&r, st->momentum, st->n_params * sizeof(float));
	if (st->n_buffers)
		get(&r, st->buffers, st->n_buffers * sizeof(float));
	return 0;
bad:
	snprintf(err, err_size, "inconsistent payload (model shape or sizes)");
	return DL_ECORRUPT;
}

int ckpt_load(const char *path, struct ckpt_state *st, char *err,
	      size_t err_size)
{
	char *data = NULL, msg[256];
	size_t len = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = fs_read_file(path, CKPT_MAX_BYTES, &data, &len);
	if (rc != 0) {
		snprintf(err, err_size, "checkpoint %s: cannot read: %s", path,
			 rc == DL_ENOTFOUND ? "no such file" : dl_strerror(rc));
		return rc;
	}
	rc =
	    ckpt_decode((const unsigned char *)data, len, st, msg, sizeof(msg));
	if (rc != 0)
		snprintf(err, err_size, "checkpoint %s is damaged: %s", path,
			 msg);
	free(data);
	return rc;
}

/* parse_name: the step of a checkpoint file name, or -1. */
static int parse_name(const char *name, uint64_t *step)
{
	size_t plen = strlen(CKPT_PREFIX), slen = strlen(CKPT_SUFFIX);
	uint64_t v = 0;

	if (strlen(name) != plen + CKPT_DIGITS + slen ||
	    strncmp(name, CKPT_PREFIX, plen) != 0 ||
	    strcmp(name + plen + CKPT_DIGITS, CKPT_SUFFIX) != 0)
		return -1;
	for (size_t i = plen; i < plen + CKPT_DIGITS; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(name[i] - '0');
	}
	*step = v;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

int ckpt_list(const char *dir, uint64_t *steps, size_t max, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	*count = 0;
	if (d == NULL)
		return errno == ENOENT ? 0 : DL_ESYS;
	while ((e = readdir(d)) != NULL) {
		uint64_t step;

		if (parse_name(e->d_name, &step) != 0)
			continue;
		if (n == max) {
			closedir(d);
			return DL_ELIMIT;
		}
		steps[n++] = step;
	}
	closedir(d);
	qsort(steps, n, sizeof(*steps), cmp_desc);
	*count = n;
	return 0;
}

/* prune deletes checkpoints beyond the newest keep, and temporary files a
 * killed writer left behind (fs_write_file_atomic's NAME.tmp.PID). */
static void prune(const char *dir, int keep)
{
	uint64_t *steps = malloc(CKPT_MAX_LIST * sizeof(*steps));
	char path[PATH_MAX];
	size_t n = 0;
	DIR *d;
	struct dirent *e;
	int changed = 0;

	if (steps && ckpt_list(dir, steps, CKPT_MAX_LIST, &n) == 0) {
		for (size_t i = (size_t)keep; i < n; i++) {
			if (ckpt_path(dir, steps[i], path, sizeof(path)) == 0 &&
			    unlink(path) == 0)
				changed = 1;
		}
	}
	free(steps);
	d = opendir(dir);
	while (d && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, CKPT_PREFIX, strlen(CKPT_PREFIX)) != 0 ||
		    strstr(e->d_name, CKPT_SUFFIX ".tmp.") == NULL)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     e->d_name) < sizeof(path) &&
		    unlink(path) == 0)
			changed = 1;
	}
	if (d)
		closedir(d);
	if (changed)
		fs_fsync_dir(dir);
}

int ckpt_save(const char *dir, const struct ckpt_state *st, int keep,
	      char *path, size_t path_size, char *err, size_t err_size)
{
	char target[PATH_MAX];
	unsigned char *data = NULL;
	size_t len = 0;
	int rc;

	rc = ckpt_path(dir, st->step, target, sizeof(target));
	if (rc != 0) {
		snprintf(err, err_size,
			 "checkpoint directory %s: name too long", dir);
		return rc;
	}
	rc = fs_mkdir_p(dir, 0755);
	if (rc != 0) {
		snprintf(err, err_size,
			 "checkpoint directory %s: cannot create: %s", dir,
			 strerror(errno));
		return rc;
	}
	rc = ckpt_encode(st, &data, &len);
	if (rc != 0) {
		snprintf(err, err_size, "checkpoint %s: cannot encode: %s",
			 target, dl_strerror(rc));
		return rc;
	}
	rc = fs_write_file_atomic(target, data, len, 0644);
	free(data);
	if (rc != 0) {
		snprintf(err, err_size, "checkpoint %s: cannot write: %s",
			 target, strerror(errno));
		return rc;
	}
	prune(dir, keep > 0 ? keep : 1);
	if (path)
		snprintf(path, path_size, "%s", target);
	return 0;
}

int ckpt_load_latest(const char *dir, const struct mlp_shape *expect,
		     struct ckpt_state *st, char *path, size_t path_size,
		     char *err, size_t err_size)
{
	uint64_t *steps = malloc(CKPT_MAX_LIST * sizeof(*steps));
	char file[PATH_MAX], msg[512];
	size_t n = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	if (steps == NULL)
		return DL_ENOMEM;
	rc = ckpt_list(dir, steps, CKPT_MAX_LIST, &n);
	if (rc != 0) {
		snprintf(err, err_size,
			 "checkpoint directory %s: cannot list: %s", dir,
			 rc == DL_ELIMIT ? "too many files" : strerror(errno));
		goto out;
	}
	rc = DL_ENOTFOUND;
	snprintf(err, err_size, "no valid checkpoint in %s", dir);
	for (size_t i = 0; i < n; i++) {
		if (ckpt_path(dir, steps[i], file, sizeof(file)) != 0)
			continue;
		if (ckpt_load(file, st, msg, sizeof(msg)) != 0) {
			log_warn("%s; trying the one before", msg);
			continue;
		}
		if (!mlp_shape_equal(&st->shape, expect)) {
			char have[128], want[128];

			mlp_shape_format(&st->shape, have, sizeof(have));
			mlp_shape_format(expect, want, sizeof(want));
			snprintf(err, err_size,
				 "checkpoint %s is for model %s, not %s (use "
				 "another --checkpoint-dir)",
				 file, have, want);
			ckpt_state_release(st);
			rc = DL_ECONFLICT;
			goto out;
		}
		if (path)
			snprintf(path, path_size, "%s", file);
		rc = 0;
		goto out;
	}
out:
	free(steps);
	return rc;
}
