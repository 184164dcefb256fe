/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c - dlaunch-train's command line: one table of options on the
 * shared engine (dlaunch/opt.h), from which parsing, defaults and --help
 * come, and the checks that turn --model and --data into a run's shape
 * and data set.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "data.h"
#include "options.h"
#include "ddp.h"
#include "dlaunch/error.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"

#define TO(f) OPT_FIELD(struct train_options, f)

static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const backends[] = {"auto", "nccl", "tcp", NULL};
static const char *const schedules[] = {"constant", "cosine", NULL};

static const struct opt_spec train_specs[] = {
    {.name = "data",
     .type = OPT_STRING,
     TO(data),
     .min = 1,
     .metavar = "fashion-mnist|synthetic:N",
     .help = "data set"},
    {.name = "data-dir",
     .type = OPT_STRING,
     TO(data_dir),
     .min = 1,
     .metavar = "DIR",
     .help = "IDX files"},
    {.name = "model",
     .type = OPT_STRING,
     TO(model),
     .min = 1,
     .metavar = "W0-W1-...-Wn",
     .help = "layer widths"},
    {.name = "batch-norm",
     .type = OPT_FLAG,
     TO(batch_norm),
     .help = "SyncBatchNorm after each hidden layer"},
    {.name = "epochs",
     .type = OPT_UINT,
     TO(epochs),
     .min = 1,
     .max = 1000000,
     .metavar = "N",
     .help = "epochs"},
    {.name = "max-steps",
     .type = OPT_UINT,
     TO(max_steps),
     .min = 1,
     .max = UINT64_MAX / 2,
     .metavar = "N",
     .unset = "no limit",
     .help = "stop after N optimizer steps in all"},
    {.name = "global-batch",
     .type = OPT_UINT,
     TO(global_batch),
     .min = 1,
     .max = 1u << 20,
     .metavar = "N",
     .help = "samples per step over all ranks"},
    {.name = "lr",
     .type = OPT_DOUBLE,
     TO(lr),
     .dmax = 100,
     .metavar = "X",
     .help = "learning rate"},
    {.name = "momentum",
     .type = OPT_DOUBLE,
     TO(momentum),
     .dmax = 1,
     .metavar = "X",
     .help = "SGD momentum"},
    {.name = "weight-decay",
     .type = OPT_DOUBLE,
     TO(weight_decay),
     .dmax = 1,
     .metavar = "X",
     .help = "L2 weight decay"},
    {.name = "lr-schedule",
     .type = OPT_CHOICE,
     TO(cosine),
     .choices = schedules,
     .metavar = "cosine|constant",
     .help = "cosine: decay to 0 over --epochs"},
    {.name = "seed",
     .type = OPT_UINT,
     TO(seed),
     .max = UINT64_MAX,
     .metavar = "N",
     .help = "initialisation and shuffling seed"},
    {.name = "checkpoint-dir",
     .type = OPT_STRING,
     TO(checkpoint_dir),
     .min = 1,
     .metavar = "DIR",
     .unset = "none: no checkpoints",
     .help = "write checkpoints here and resume from them"},
    {.name = "checkpoint-every",
     .type = OPT_UINT,
     TO(checkpoint_every),
     .max = UINT64_MAX / 2,
     .metavar = "N",
     .help = "steps between checkpoints (0: only at exit)"},
    {.name = "keep-checkpoints",
     .type = OPT_INT,
     TO(keep_checkpoints),
     .min = 1,
     .max = 1000,
     .metavar = "N",
     .help = "checkpoints kept"},
    {.name = "log-every",
     .type = OPT_UINT,
     TO(log_every),
     .min = 1,
     .max = UINT64_MAX / 2,
     .metavar = "N",
     .help = "steps per progress line"},
    {.name = "device",
     .type = OPT_CHOICE,
     TO(device),
     .choices = devices,
     .metavar = "auto|cpu|cuda",
     .help = "where to train (cuda: GPU LOCAL_RANK, one per rank of the "
	     "node; auto: cuda when there are enough, else cpu)"},
    {.name = "backend",
     .type = OPT_CHOICE,
     TO(backend),
     .choices = backends,
     .metavar = "auto|nccl|tcp",
     .help = "collectives (auto: nccl on cuda, else tcp)"},
    {.name = "threads",
     .type = OPT_INT,
     TO(threads),
     .min = 1,
     .max = 1024,
     .metavar = "N",
     .unset = "OMP_NUM_THREADS or the BLAS default",
     .help = "BLAS threads per rank"},
    {.name = "bucket-size",
     .type = OPT_SIZE,
     TO(bucket_bytes),
     .min = 4,
     .max = 1ULL << 30,
     .metavar = "SIZE",
     .help = "gradient all-reduce bucket"},
    {.name = "timeout",
     .type = OPT_DURATION,
     TO(timeout_ms),
     .min = 1,
     .max = 86400000,
     .metavar = "DURATION",
     .unset = "$DLAUNCH_DIST_TIMEOUT, else 300s",
     .help = "bound on every collective wait"},
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     TO(help),
     .help = "show this help and exit"},
    {.name = NULL},
};

static const struct opt_table train_table = {
    .prog = "dlaunch-train",
    .usage = "usage: dlaunch-train [options]\n"
	     "\n"
	     "Data-parallel training of an MLP; ranks come from RANK, "
	     "WORLD_SIZE,\nMASTER_ADDR, MASTER_PORT and LOCAL_RANK (as dlaunch "
	     "or torchrun set them).\n\n",
    .footer = "Progress goes to stdout from rank 0, ending with one JSON "
	      "line\n{\"summary\": {...}}. Test hook: "
	      "DLAUNCH_TRAIN_CRASH_AT_STEP=N makes\nthe rank "
	      "DLAUNCH_TRAIN_CRASH_RANK (default 0) SIGKILL itself after step "
	      "N\non the first attempt (TORCHELASTIC_RESTART_COUNT unset or "
	      "0).\n",
    .specs = train_specs,
    .flags = OPT_ABBREV,
};

void train_options_init(struct train_options *o)
{
	memset(o, 0, sizeof(*o));
	o->data = "fashion-mnist";
	o->data_dir = DATA_DEFAULT_DIR;
	o->model = "784-256-128-10";
	o->epochs = 10;
	o->global_batch = 128;
	o->lr = 0.05;
	o->momentum = 0.9;
	o->weight_decay = 5e-4;
	o->cosine = 1;
	o->seed = 42;
	o->checkpoint_every = 200;
	o->keep_checkpoints = CKPT_KEEP_DEFAULT;
	o->log_every = 100;
	o->bucket_bytes = TRAIN_DDP_BUCKET_DEFAULT;
}

static void usage(FILE *f)
{
	struct train_options defaults;
	train_options_init(&defaults);
	opt_usage(&train_table, &defaults, f);
}

/* check_data turns --model and --data into the shape and the data set. */
static int check_data(struct train_options *o)
{
	char err[256];
	uint64_t n;
	if (mlp_shape_parse(o->model, &o->shape, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch-train: --%s\n", err);
		return -1;
	}
	o->shape.batch_norm = o->batch_norm;
	if (strncmp(o->data, "synthetic:", 10) == 0) {
		if (parse_u64(o->data + 10, 1, DATA_MAX_SAMPLES, &n) != 0) {
			fprintf(stderr,
				"dlaunch-train: --data synthetic:N '%s' is not "
				"a whole number in 1..%llu\n",
				o->data + 10,
				(unsigned long long)DATA_MAX_SAMPLES);
			return -1;
		}
		o->synthetic_n = (size_t)n;
	} else if (strcmp(o->data, "fashion-mnist") != 0) {
		fprintf(stderr,
			"dlaunch-train: --data '%s' is not fashion-mnist or "
			"synthetic:N\n",
			o->data);
		return -1;
	}
	return 0;
}

int train_options_parse(int argc, char **argv, struct train_options *o)
{
	char err[512];
	int next, rc;

	train_options_init(o);
	rc = opt_parse(&train_table, o, argc, argv, NULL, &next, err,
		       sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "dlaunch-train: %s\n", err);
		if (rc == DL_ENOTFOUND)
			usage(stderr);
		return -1;
	}
	if (o->help) {
		usage(stdout);
		return 1;
	}
	if (next < argc) {
		fprintf(stderr, "dlaunch-train: unexpected argument '%s'\n",
			argv[next]);
		return -1;
	}
	return check_data(o);
}

const struct opt_table *train_option_table(void)
{
	return &train_table;
}
