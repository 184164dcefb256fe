/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.h - dlaunch-train's command line (options.c): what a run is
 * asked to do.
 */
#ifndef DLAUNCH_TRAIN_OPTIONS_H
#define DLAUNCH_TRAIN_OPTIONS_H
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/opt.h"
#include "mlp.h"

enum device_kind { DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA };
enum backend_kind { BACKEND_AUTO, BACKEND_NCCL, BACKEND_TCP };

struct train_options {
	int help;
	const char *data;     /* "fashion-mnist" or "synthetic:N" */
	const char *data_dir; /* IDX files */
	size_t synthetic_n;   /* > 0 for synthetic data */
	const char *model;    /* "784-256-128-10", parsed into shape */
	int batch_norm;	      /* --batch-norm, copied into shape */
	struct mlp_shape shape;
	uint64_t epochs;
	uint64_t max_steps; /* 0: no limit */
	uint32_t global_batch;
	double lr, momentum, weight_decay;
	int cosine; /* 1: cosine decay to 0; 0: constant (--lr-schedule) */
	uint64_t seed;
	const char *checkpoint_dir; /* NULL: no checkpoints */
	uint64_t checkpoint_every;  /* steps; 0: only at exit */
	int keep_checkpoints;
	uint64_t log_every; /* steps per progress line */
	int device;	    /* enum device_kind */
	int backend;	    /* enum backend_kind */
	int threads;	    /* BLAS threads; 0: library default */
	uint64_t bucket_bytes;
	uint64_t timeout_ms; /* collectives; 0: dist default */
};

/* train_options_init: the defaults, which --help shows. */
void train_options_init(struct train_options *o);

/* train_option_table: dlaunch-train's options; static, never freed. */
const struct opt_table *train_option_table(void);

/* train_options_parse fills o from the command line (and the defaults).
 * Returns 0 to run, 1 when --help was printed (exit 0), -1 after a usage
 * error was printed to stderr (exit 2). */
int train_options_parse(int argc, char **argv, struct train_options *o);

#endif
