/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ckpt_bench.c - write and load speed of dlaunch-train's checkpoints,
 * through the trainer's own checkpoint code (trainer/ckpt.h).
 *
 *   ckpt_bench --dir DIR [--model 784-16384-16384-10] [--reps 3]
 *
 * The state is what the trainer saves: parameters initialised as the
 * trainer does (mlp_init_params), SGD momentum of the same size, and the
 * counters. Each repetition times ckpt_save (encode, write to a temporary
 * file, fsync, rename, fsync of the directory, pruning) and then
 * ckpt_load_latest (read, both checksums, decode), and checks that the
 * parameters came back bit for bit. The load follows the save, so it reads
 * from the page cache, as a restart on the same node would.
 *
 * Prints one JSON object per repetition: {"model": ..., "params": N,
 * "file_bytes": B, "save_s": s, "load_s": s}. The default model has
 * 281 M parameters: 1.05 GiB of parameters, a 2.1 GiB file with momentum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../trainer/ckpt.h"
#include "../trainer/mlp.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"

int main(int argc, char **argv)
{
	const char *dir = NULL, *model = "784-16384-16384-10";
	int reps = 3;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			dir = argv[++i];
		} else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
			model = argv[++i];
		} else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
			if (parse_int(argv[++i], 1, 1000, &reps) != 0) {
				fprintf(stderr, "ckpt_bench: bad --reps '%s'\n",
					argv[i]);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: ckpt_bench --dir DIR [--model "
					"W-W-...] [--reps N]\n");
			return 2;
		}
	}
	if (dir == NULL) {
		fprintf(stderr, "ckpt_bench: --dir is required\n");
		return 2;
	}
	char err[512];
	struct mlp_shape shape;
	if (mlp_shape_parse(model, &shape, err, sizeof(err)) != 0) {
		fprintf(stderr, "ckpt_bench: bad --model: %s\n", err);
		return 2;
	}
	struct ckpt_state st, back;
	memset(&back, 0, sizeof(back));
	if (ckpt_state_alloc(&st, &shape) != 0) {
		fprintf(stderr, "ckpt_bench: cannot allocate the state of %s\n",
			model);
		return 1;
	}
	mlp_init_params(&shape, 1, st.params, st.buffers);
	for (size_t k = 0; k < st.n_params; k++)
		st.momentum[k] = st.params[k] * 0.5f;
	st.has_momentum = 1;
	st.global_batch = 128;
	st.seed = 1;

	int rc = 0;
	for (int r = 0; r < reps && rc == 0; r++) {
		st.step = (uint64_t)r + 1;
		char path[4096];
		uint64_t t0 = clock_now_ns();
		rc = ckpt_save(dir, &st, 1, path, sizeof(path), err,
			       sizeof(err));
		uint64_t t1 = clock_now_ns();
		if (rc != 0) {
			fprintf(stderr, "ckpt_bench: save to %s: %s\n", dir,
				err);
			break;
		}
		rc = ckpt_load_latest(dir, &shape, &back, path, sizeof(path),
				      err, sizeof(err));
		uint64_t t2 = clock_now_ns();
		if (rc != 0) {
			fprintf(stderr, "ckpt_bench: load from %s: %s\n", dir,
				err);
			break;
		}
		if (back.n_params != st.n_params || back.step != st.step ||
		    memcmp(back.params, st.params,
			   st.n_params * sizeof(float)) != 0) {
			fprintf(stderr,
				"ckpt_bench: %s did not load back as "
				"written\n",
				path);
			rc = DL_ECORRUPT;
		}
		struct stat sb;
		long long size =
		    stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
		ckpt_state_release(&back);
		memset(&back, 0, sizeof(back));
		if (rc == 0)
			printf("{\"model\": \"%s\", \"params\": %zu, "
			       "\"file_bytes\": %lld, \"save_s\": %.4f, "
			       "\"load_s\": %.4f}\n",
			       model, st.n_params, size,
			       (double)(t1 - t0) / 1e9,
			       (double)(t2 - t1) / 1e9);
		fflush(stdout);
	}
	ckpt_state_release(&st);
	return rc == 0 ? 0 : 1;
}
