/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt.c - checkpoint files of dlaunch-train: encoding, validation, durable
 * writes, retention and "newest valid" selection (format in ckpt.h).
 *
 * Checkpoints reach gigabytes, so files are streamed: a save writes the
 * caller's arrays straight to the file and a load reads straight into the
 * new state's arrays, checksumming on the way; neither holds an image of
 * the whole file. ckpt_encode/ckpt_decode are the same format in memory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
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
/* the metadata of the largest model (meta_bytes(MLP_MAX_LAYERS)) */
#define CKPT_META_MAX (4 + 4 * (MLP_MAX_LAYERS + 1) + 4 + 6 * 8 + 4 + 4 + 8 + 8)
/* bytes per read or write of the arrays: large enough that the system
 * calls cost nothing, small enough to be checksummed while in the cache */
#define CKPT_IO_CHUNK (8u << 20)

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

/* meta_bytes: the size of the payload's metadata (everything before the
 * arrays) for a model of n_layers layers. */
static size_t meta_bytes(size_t n_layers)
{
	return 4 + 4 * (n_layers + 1) + 4 + 6 * 8 + 4 + 4 + 8 + 8;
}

static size_t payload_bytes(const struct ckpt_state *st)
{
	return meta_bytes((size_t)st->shape.n_layers) +
	       (2 * st->n_params + st->n_buffers) * sizeof(float);
}

/* The arrays of a state in file order; the last may be empty. */
struct span {
	void *data;
	size_t bytes;
};

static void state_arrays(const struct ckpt_state *st, struct span out[3])
{
	out[0] = (struct span){st->params, st->n_params * sizeof(float)};
	out[1] = (struct span){st->momentum, st->n_params * sizeof(float)};
	out[2] = (struct span){st->buffers, st->n_buffers * sizeof(float)};
}

/* encode_meta writes st's metadata (meta_bytes of its layers) at p. */
static size_t encode_meta(const struct ckpt_state *st, unsigned char *p)
{
	unsigned char *start = p;

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
	return (size_t)(p - start);
}

/* encode_header writes the header of a payload of plen bytes whose
 * checksum is pcrc, its own checksum included. */
static void encode_header(unsigned char *h, uint64_t plen, uint32_t pcrc)
{
	unsigned char *p = h;
	uint32_t crc;

	p = put(p, CKPT_MAGIC, 8);
	p = put32(p, CKPT_VERSION);
	p = put32(p, 0); /* header crc, filled below */
	p = put64(p, plen);
	p = put32(p, pcrc);
	put32(p, 0);
	crc = crc32c(0, h, CKPT_HEADER_BYTES);
	memcpy(h + 12, &crc, 4);
}

/* counts_match: st's counts are those of its shape (which is in range, so
 * that its metadata fits CKPT_META_MAX). */
static int counts_match(const struct ckpt_state *st)
{
	return st->shape.n_layers >= 1 &&
	       st->shape.n_layers <= MLP_MAX_LAYERS &&
	       st->n_params == mlp_param_count(&st->shape) &&
	       st->n_buffers == mlp_buffer_count(&st->shape);
}

int ckpt_encode(const struct ckpt_state *st, unsigned char **out, size_t *len)
{
	size_t plen = payload_bytes(st);
	unsigned char *data, *p;
	struct span arr[3];

	if (!counts_match(st))
		return DL_EINVAL;
	data = malloc(CKPT_HEADER_BYTES + plen);
	if (data == NULL)
		return DL_ENOMEM;
	p = data + CKPT_HEADER_BYTES;
	p += encode_meta(st, p);
	state_arrays(st, arr);
	for (int i = 0; i < 3; i++)
		if (arr[i].bytes)
			p = put(p, arr[i].data, arr[i].bytes);
	encode_header(data, plen, crc32c(0, data + CKPT_HEADER_BYTES, plen));
	*out = data;
	*len = CKPT_HEADER_BYTES + plen;
	return 0;
}

/*
 * write_image streams st's file image to fd without building it: the
 * metadata behind a blank header, then the arrays straight from st in
 * CKPT_IO_CHUNK pieces, each checksummed just before it is written (while
 * it is still in the cache) and its writeback started, and last the header
 * at offset 0, now that the payload's checksum is known. The bytes are
 * those of ckpt_encode. DL_EIO with errno set on a failed write.
 */
static int write_image(int fd, const struct ckpt_state *st)
{
	unsigned char head[CKPT_HEADER_BYTES + CKPT_META_MAX];
	size_t mlen = encode_meta(st, head + CKPT_HEADER_BYTES);
	uint32_t crc = crc32c(0, head + CKPT_HEADER_BYTES, mlen);
	off_t off = (off_t)(CKPT_HEADER_BYTES + mlen);
	struct span arr[3];
	int rc;

	memset(head, 0, CKPT_HEADER_BYTES);
	rc = fs_write_all(fd, head, CKPT_HEADER_BYTES + mlen);
	state_arrays(st, arr);
	for (int i = 0; i < 3 && rc == 0; i++) {
		const unsigned char *p = arr[i].data;

		for (size_t done = 0, k; done < arr[i].bytes && rc == 0;
		     done += k) {
			k = arr[i].bytes - done;
			if (k > CKPT_IO_CHUNK)
				k = CKPT_IO_CHUNK;
			crc = crc32c(crc, p + done, k);
			rc = fs_write_all(fd, p + done, k);
			fs_writeback_start(fd, off, (off_t)k);
			off += (off_t)k;
		}
	}
	if (rc != 0)
		return rc;
	encode_header(head, payload_bytes(st), crc);
	return fs_pwrite_all(fd, head, CKPT_HEADER_BYTES, 0);
}

static void torn(char *err, size_t err_size, size_t have, uint64_t want)
{
	snprintf(err, err_size,
		 "%zu payload bytes, the header announces %llu "
		 "(torn or truncated write)",
		 have, (unsigned long long)want);
}

/*
 * check_header validates the header at h (at least min(len, header size)
 * bytes) of a file of len bytes: magic, header checksum, version, and the
 * payload size against the file's. Fills the payload's size and checksum;
 * DL_ECORRUPT with err filled otherwise.
 */
static int check_header(const unsigned char *h, size_t len, uint64_t *plen,
			uint32_t *pcrc, char *err, size_t err_size)
{
	unsigned char head[CKPT_HEADER_BYTES];
	uint32_t version, hcrc, zero = 0;

	if (len < CKPT_HEADER_BYTES || memcmp(h, CKPT_MAGIC, 8) != 0) {
		snprintf(err, err_size, "not a dlaunch-train checkpoint");
		return DL_ECORRUPT;
	}
	memcpy(&version, h + 8, 4);
	memcpy(&hcrc, h + 12, 4);
	memcpy(plen, h + 16, 8);
	memcpy(pcrc, h + 24, 4);
	memcpy(head, h, CKPT_HEADER_BYTES);
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
	if (*plen != len - CKPT_HEADER_BYTES) {
		torn(err, err_size, len - CKPT_HEADER_BYTES, *plen);
		return DL_ECORRUPT;
	}
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

/*
 * parse_meta reads the metadata from the avail bytes at p, the start of a
 * payload of plen bytes, into out's shape, counters and counts (no arrays),
 * and its size into *mlen. -1 when it is inconsistent: a shape out of
 * range, counts that do not match it, or arrays that do not fill the rest
 * of the payload exactly.
 */
static int parse_meta(const unsigned char *p, size_t avail, uint64_t plen,
		      struct ckpt_state *out, size_t *mlen)
{
	struct reader r = {p, p + avail};
	uint64_t n_params, n_buffers;
	uint32_t u32v;

	memset(out, 0, sizeof(*out));
	if (get(&r, &u32v, 4) || u32v < 1 || u32v > MLP_MAX_LAYERS)
		return -1;
	out->shape.n_layers = (int)u32v;
	for (int i = 0; i <= out->shape.n_layers; i++) {
		if (get(&r, &u32v, 4) || u32v < 1 || u32v > MLP_MAX_WIDTH)
			return -1;
		out->shape.widths[i] = (int)u32v;
	}
	if (get(&r, &u32v, 4) || u32v > 1)
		return -1;
	out->shape.batch_norm = (int)u32v;
	if (get(&r, &out->step, 8) || get(&r, &out->epoch, 8) ||
	    get(&r, &out->epoch_offset, 8) || get(&r, &out->seed, 8) ||
	    get(&r, &out->rng_key, 8) || get(&r, &out->rng_counter, 8) ||
	    get(&r, &out->global_batch, 4) || get(&r, &out->has_momentum, 4) ||
	    get(&r, &n_params, 8) || get(&r, &n_buffers, 8))
		return -1;
	*mlen = (size_t)(r.p - p);
	if (n_params != mlp_param_count(&out->shape) ||
	    n_buffers != mlp_buffer_count(&out->shape) ||
	    plen - *mlen != (2 * n_params + n_buffers) * sizeof(float))
		return -1;
	out->n_params = (size_t)n_params;
	out->n_buffers = (size_t)n_buffers;
	return 0;
}

/* alloc_from allocates st's arrays for meta's shape and copies meta's
 * counters into it. */
static int alloc_from(struct ckpt_state *st, const struct ckpt_state *meta,
		      char *err, size_t err_size)
{
	int rc = ckpt_state_alloc(st, &meta->shape);

	if (rc != 0) {
		snprintf(err, err_size, "out of memory");
		return rc;
	}
	st->step = meta->step;
	st->epoch = meta->epoch;
	st->epoch_offset = meta->epoch_offset;
	st->seed = meta->seed;
	st->rng_key = meta->rng_key;
	st->rng_counter = meta->rng_counter;
	st->global_batch = meta->global_batch;
	st->has_momentum = meta->has_momentum;
	return 0;
}

static int inconsistent(char *err, size_t err_size)
{
	snprintf(err, err_size, "inconsistent payload (model shape or sizes)");
	return DL_ECORRUPT;
}

static int checksum_mismatch(char *err, size_t err_size)
{
	snprintf(err, err_size, "payload checksum mismatch");
	return DL_ECORRUPT;
}

int ckpt_decode(const unsigned char *data, size_t len, struct ckpt_state *st,
		char *err, size_t err_size)
{
	const unsigned char *payload = data + CKPT_HEADER_BYTES, *p;
	struct ckpt_state meta;
	struct span arr[3];
	uint64_t plen;
	uint32_t pcrc;
	size_t mlen;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = check_header(data, len, &plen, &pcrc, err, err_size);
	if (rc != 0)
		return rc;
	if (crc32c(0, payload, (size_t)plen) != pcrc)
		return checksum_mismatch(err, err_size);
	if (parse_meta(payload, (size_t)plen, plen, &meta, &mlen) != 0)
		return inconsistent(err, err_size);
	rc = alloc_from(st, &meta, err, err_size);
	if (rc != 0)
		return rc;
	p = payload + mlen;
	state_arrays(st, arr);
	for (int i = 0; i < 3; i++) {
		if (arr[i].bytes)
			memcpy(arr[i].data, p, arr[i].bytes);
		p += arr[i].bytes;
	}
	return 0;
}

/* A payload being read from a file: what is left of it, what was read and
 * the checksum of that. */
struct source {
	int fd;
	uint64_t plen, got;
	uint32_t crc;
};

/* source_read reads n bytes of the payload into buf and extends the
 * checksum over them: DL_EIO (errno set) when read fails, DL_ECORRUPT with
 * err filled when the file ends first (it shrank since it was measured). */
static int source_read(struct source *s, void *buf, size_t n, char *err,
		       size_t err_size)
{
	size_t got = 0;
	int rc = fs_read_all(s->fd, buf, n, &got);

	s->crc = crc32c(s->crc, buf, got);
	s->got += got;
	if (rc == 0 && got < n) {
		torn(err, err_size, (size_t)s->got, s->plen);
		rc = DL_ECORRUPT;
	}
	return rc;
}

/* source_read_into fills an array of the state in CKPT_IO_CHUNK reads,
 * each checksummed while it is still in the cache. */
static int source_read_into(struct source *s, void *data, size_t n, char *err,
			    size_t err_size)
{
	unsigned char *p = data;
	int rc = 0;

	for (size_t done = 0, k; done < n && rc == 0; done += k) {
		k = n - done < CKPT_IO_CHUNK ? n - done : CKPT_IO_CHUNK;
		rc = source_read(s, p + done, k, err, err_size);
	}
	return rc;
}

/* source_drain checksums the rest of the payload, so that a damaged
 * metadata block is reported as a checksum mismatch like ckpt_decode does
 * (the checksum is checked before the contents). */
static int source_drain(struct source *s, char *err, size_t err_size)
{
	size_t cap = CKPT_IO_CHUNK / 8;
	unsigned char *buf = malloc(cap);
	int rc = 0;

	if (buf == NULL) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	while (rc == 0 && s->got < s->plen) {
		size_t k =
		    s->plen - s->got < cap ? (size_t)(s->plen - s->got) : cap;
		rc = source_read(s, buf, k, err, err_size);
	}
	free(buf);
	return rc;
}

/*
 * read_image reads a checkpoint of len bytes from fd into st, validating
 * as ckpt_decode does with the same messages, but without holding the
 * file in memory: the header and metadata are read and checked first (the
 * sizes against the file's before anything is allocated), then st's arrays
 * are allocated once and the payload read straight into them, and the
 * checksum compared last (st released on a mismatch). Returns 0,
 * DL_ECORRUPT or DL_ENOMEM with err filled, or DL_EIO (errno set, err
 * left alone) when reading fails.
 */
static int read_image(int fd, size_t len, struct ckpt_state *st, char *err,
		      size_t err_size)
{
	unsigned char head[CKPT_HEADER_BYTES], meta_buf[CKPT_META_MAX];
	struct source src = {fd, 0, 0, 0};
	struct ckpt_state meta;
	struct span arr[3];
	size_t have, got, mlen, want;
	uint32_t pcrc, n_layers;
	int rc;

	want = len < CKPT_HEADER_BYTES ? len : CKPT_HEADER_BYTES;
	rc = fs_read_all(fd, head, want, &got);
	if (rc != 0)
		return rc;
	rc = check_header(head, got < want ? got : len, &src.plen, &pcrc, err,
			  err_size);
	if (rc != 0)
		return rc;

	/* the metadata: its layer count says how long it is */
	have = src.plen < 4 ? (size_t)src.plen : 4;
	rc = source_read(&src, meta_buf, have, err, err_size);
	if (rc == 0 && have == 4) {
		memcpy(&n_layers, meta_buf, 4);
		want = n_layers >= 1 && n_layers <= MLP_MAX_LAYERS
			   ? meta_bytes(n_layers) - 4
			   : 0;
		if (want > src.plen - 4)
			want = (size_t)(src.plen - 4);
		rc = source_read(&src, meta_buf + 4, want, err, err_size);
		have += want;
	}
	if (rc != 0)
		return rc;
	if (parse_meta(meta_buf, have, src.plen, &meta, &mlen) != 0) {
		rc = source_drain(&src, err, err_size);
		if (rc != 0)
			return rc;
		return src.crc != pcrc ? checksum_mismatch(err, err_size)
				       : inconsistent(err, err_size);
	}

	rc = alloc_from(st, &meta, err, err_size);
	if (rc != 0)
		return rc;
	state_arrays(st, arr);
	for (int i = 0; i < 3 && rc == 0; i++)
		rc = source_read_into(&src, arr[i].data, arr[i].bytes, err,
				      err_size);
	if (rc == 0 && src.crc != pcrc)
		rc = checksum_mismatch(err, err_size);
	if (rc != 0)
		ckpt_state_release(st);
	return rc;
}

int ckpt_load(const char *path, struct ckpt_state *st, char *err,
	      size_t err_size)
{
	char msg[256] = "";
	struct stat sb;
	int fd, rc;

	memset(st, 0, sizeof(*st));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? DL_ENOTFOUND : DL_ESYS;
	} else if (fstat(fd, &sb) != 0) {
		rc = DL_ESYS;
	} else if ((uint64_t)sb.st_size > CKPT_MAX_BYTES) {
		rc = DL_ELIMIT;
	} else {
		/* doubles the readahead when the file is not cached */
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		rc = read_image(fd, (size_t)sb.st_size, st, msg, sizeof(msg));
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0)
		return 0;
	if (msg[0] != '\0')
		snprintf(err, err_size, "checkpoint %s is damaged: %s", path,
			 msg);
	else
		snprintf(err, err_size, "checkpoint %s: cannot read: %s", path,
			 rc == DL_ENOTFOUND ? "no such file" : dl_strerror(rc));
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
	struct fs_atomic_file f;
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
	if (!counts_match(st)) {
		snprintf(err, err_size, "checkpoint %s: cannot encode: %s",
			 target, dl_strerror(DL_EINVAL));
		return DL_EINVAL;
	}
	/* streamed from st: no image of the whole file in memory */
	rc = fs_atomic_open(&f, target, 0644);
	if (rc == 0) {
		rc = write_image(f.fd, st);
		if (rc == 0)
			rc = fs_atomic_commit(&f);
		else
			fs_atomic_abort(&f);
	}
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
