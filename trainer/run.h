/* SPDX-License-Identifier: Apache-2.0 */
/*
 * run.h - dlaunch-train's run: everything one worker process holds
 * (options, group, model, optimizer, data, position, control channel),
 * shared by the training loop (main.c) and the group's formation and
 * in-place re-form (reform.c), and the steps that set it up, save and
 * load it, report it and release it (run.c). Private to the binary; main
 * owns it and frees what it holds (run_release).
 *
 * The run_* functions return 0 or a negative DL_E* code and log their
 * failures themselves, so the caller only decides to go on or to end.
 */
#ifndef DLAUNCH_TRAIN_RUN_H
#define DLAUNCH_TRAIN_RUN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "data.h"
#include "options.h"
#include "backend.h"
#include "optim.h"
#include "rng.h"
#include "sampler.h"

struct dist;
struct mlp;
struct train_ddp;
struct control;
struct dist_flight;

struct run {
	struct train_options o;
	int rank, world, local_rank;
	int local_world; /* LOCAL_WORLD_SIZE (LOCAL_RANK + 1 when unset) */
	int gpu;	 /* the CUDA device of the kernels and NCCL, or -1 */
	struct dist *dist;
	struct train_backend be;
	struct mlp *model;
	struct train_optim optim;
	struct train_ddp *ddp;
	struct dataset train, test;
	struct train_sampler sampler;
	struct train_rng rng;
	struct ckpt_state ck; /* rank 0: host staging for checkpoints */
	int max_local;	      /* rows a rank can get per step */
	float *x;
	int32_t *y;
	uint32_t *idx;
	uint64_t step, epoch, offset; /* where training stands */
	uint64_t resumed_from;	      /* step loaded, or 0 */
	uint64_t saved_step;	      /* last checkpoint written (rank 0) */
	char ckpt_file[PATH_MAX];
	double last_loss, last_accuracy, last_test_loss;
	int evaluated_at_end;
	int preempted; /* stopped at the agent's preempt step (main.c) */
	/* a signal says stop now (main.c's rule: a notice of preemption is
	 * not a stop until its grace is over); forming a group asks it */
	int (*stopping)(struct run *r);
	struct control *ctl; /* the agent's control channel, or NULL */
	/* the collective flight recorder and where the loop stands, shown
	 * in the answer to the agent's dump (never NULL after setup) */
	struct dist_flight *flight;
	uint64_t round;	     /* the round of the membership we are in */
	uint64_t wait_ms;    /* bound on waiting for the agent */
	int max_local_alloc; /* rows the batch buffers and model hold */
	unsigned reforms;    /* in-place re-forms done */
	/* with a control channel and batch norm: the running statistics
	 * before the step in progress (backend memory), put back when the
	 * step is dropped, since its forward pass has already updated them */
	float *bn_before;
	size_t bn_bytes;
};

/* run_setup_device: the device and backend, chosen once (device.c) from
 * the options, LOCAL_RANK, LOCAL_WORLD_SIZE and the visible GPUs; r->gpu
 * is then what both the kernels and NCCL use, r->be the kernels. */
int run_setup_device(struct run *r);

/* run_load_data: the training and test sets (synthetic or Fashion-MNIST,
 * checked against the model's shape) into r->train and r->test. */
int run_load_data(struct run *r);

/* run_setup_model: the batch buffers, the model, its optimiser and DDP
 * over r->dist (and the host copy of the state), with parameters
 * initialised identically on every rank from the seed. */
int run_setup_model(struct run *r);

/* run_load_local: this rank's newest valid checkpoint under
 * --checkpoint-dir, if any (none is not an error). */
int run_load_local(struct run *r);

/* run_save_checkpoint: rank 0 writes the state at r->step under
 * --checkpoint-dir (once per step; other ranks and runs without the
 * option do nothing). */
int run_save_checkpoint(struct run *r);

/* run_print_banner: rank 0's first line: model, data, world, device. */
void run_print_banner(const struct run *r);

/* run_print_summary: the run's one-line JSON summary on stdout. */
void run_print_summary(struct run *r, double train_secs, uint64_t samples,
		       double wall_secs);

/* run_release frees what r holds (any part may be missing) and closes
 * the control channel; r itself is the caller's. */
void run_release(struct run *r);

#endif
