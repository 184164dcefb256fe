/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt.h - dlaunch-train checkpoints.
 *
 * One file per checkpoint, DIR/ckpt-<step, 12 digits>.dlck, written durably
 * (temporary file, fsync, rename, fsync of the directory) so a crash leaves
 * either the old set or the new file, never a torn one under the final
 * name. Layout, little-endian:
 *
 *   header (32 bytes): magic "DLTRCKPT", u32 version (1), u32 header crc32c
 *     (over the header with this field zero), u64 payload bytes,
 *     u32 payload crc32c, u32 reserved (0)
 *   payload: u32 n_layers, u32 widths[n_layers + 1], u32 batch_norm,
 *     u64 step, u64 epoch, u64 epoch_offset, u64 seed, u64 rng_key,
 *     u64 rng_counter, u32 global_batch, u32 has_momentum,
 *     u64 n_params, u64 n_buffers,
 *     f32 params[n_params], f32 momentum[n_params], f32 buffers[n_buffers]
 *
 * Nothing in it depends on the world size: the sampler position is a
 * sample offset into the epoch, and the parameters and optimizer state are
 * the same on every rank.
 */
#ifndef DLAUNCH_CKPT_H
#define DLAUNCH_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

#define CKPT_VERSION	  1
#define CKPT_KEEP_DEFAULT 3
#define CKPT_MAX_LIST	  4096

struct ckpt_state {
	struct mlp_shape shape;
	uint64_t step;	       /* optimizer steps taken */
	uint64_t epoch;	       /* epoch in progress */
	uint64_t epoch_offset; /* samples of that epoch consumed */
	uint64_t seed;
	uint64_t rng_key, rng_counter; /* the trainer's generator */
	uint32_t global_batch;
	uint32_t has_momentum;
	size_t n_params, n_buffers;
	float *params;	 /* n_params */
	float *momentum; /* n_params */
	float *buffers;	 /* n_buffers (may be NULL when 0) */
};

/* ckpt_state_alloc allocates the arrays for shape (zeroed); release with
 * ckpt_state_release. */
int ckpt_state_alloc(struct ckpt_state *st, const struct mlp_shape *shape);
void ckpt_state_release(struct ckpt_state *st);

/* ckpt_path formats DIR/ckpt-<step>.dlck. */
int ckpt_path(const char *dir, uint64_t step, char *out, size_t out_size);

/*
 * ckpt_save writes st as the checkpoint of st->step into dir (created if
 * missing), then deletes all but the newest `keep` checkpoints and stale
 * temporary files. The written path goes into path (may be NULL). The file
 * is streamed from st's arrays (no copy of it in memory) and holds the
 * bytes of ckpt_encode; a failed write removes its temporary file.
 */
int ckpt_save(const char *dir, const struct ckpt_state *st, int keep,
	      char *path, size_t path_size, char *err, size_t err_size);

/* ckpt_encode / ckpt_decode: the file image in memory (tests and the
 * fuzzer; ckpt_save and ckpt_load stream the same format). ckpt_encode
 * returns a malloc'd image in *out. */
int ckpt_encode(const struct ckpt_state *st, unsigned char **out, size_t *len);
/* ckpt_decode validates everything (magic, version, both checksums,
 * sizes, shape against the counts) and fills st (allocating its arrays). */
int ckpt_decode(const unsigned char *data, size_t len, struct ckpt_state *st,
		char *err, size_t err_size);

/* ckpt_load reads one file into st with ckpt_decode's checks and
 * verdicts, without holding the file in memory: the header and metadata
 * are checked (sizes against the file's) before st's arrays are allocated
 * and the payload read into them; the checksum is compared last and st
 * left empty on any error. err: "checkpoint PATH is damaged: ..." or
 * "checkpoint PATH: cannot read: ...". */
int ckpt_load(const char *path, struct ckpt_state *st, char *err,
	      size_t err_size);

/* ckpt_list fills steps (newest first) with the checkpoints in dir;
 * a missing dir is an empty list. */
int ckpt_list(const char *dir, uint64_t *steps, size_t max, size_t *count);

/*
 * ckpt_load_latest loads the newest valid checkpoint of dir into st and its
 * path into path. A damaged one is logged by name and skipped for the one
 * before it. Returns 0, DL_ENOTFOUND (none valid) or an error (e.g.
 * DL_ECONFLICT when a valid checkpoint is for another model shape, with
 * err filled: the directory belongs to another run).
 */
int ckpt_load_latest(const char *dir, const struct mlp_shape *expect,
		     struct ckpt_state *st, char *path, size_t path_size,
		     char *err, size_t err_size);

#endif
