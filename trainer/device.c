/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.c - which device and collective backend a rank uses (see
 * device.h): no I/O, so every case is unit-tested
 * (tests/unit/test_device.c).
 */
#include <stdio.h>
#include <string.h>

#include "options.h"
#include "device.h"
#include "dlaunch/error.h"

/* gpus_short: whether this node's ranks outnumber the GPUs they see */
static int gpus_short(const struct train_device_request *rq)
{
	return rq->visible_gpus <= 0 || rq->local_world > rq->visible_gpus;
}

/* short_why: "N ranks on this node (LOCAL_WORLD_SIZE) but M visible CUDA
 * device(s)", or "no visible CUDA device" */
static void short_why(const struct train_device_request *rq, char *out,
		      size_t size)
{
	if (rq->visible_gpus <= 0)
		snprintf(out, size,
			 "no usable CUDA device is visible (none, no driver, "
			 "or a build without CUDA)");
	else
		snprintf(out, size,
			 "%d rank(s) on this node (LOCAL_WORLD_SIZE) but %d "
			 "visible CUDA device(s), and each rank needs its own",
			 rq->local_world, rq->visible_gpus);
}

int train_device_choose(const struct train_device_request *rq,
			struct train_device_choice *out, char *err,
			size_t err_size)
{
	char why[200];

	memset(out, 0, sizeof(*out));
	out->device = DEVICE_CPU;
	out->backend = BACKEND_TCP;
	out->gpu = -1;
	if (rq->local_world < 1 || rq->local_rank < 0 ||
	    rq->local_rank >= rq->local_world) {
		snprintf(err, err_size,
			 "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d",
			 rq->local_rank, rq->local_world);
		return DL_EINVAL;
	}
	if (rq->device == DEVICE_CPU && rq->backend == BACKEND_NCCL) {
		snprintf(err, err_size,
			 "--backend nccl needs --device cuda or auto (nccl "
			 "moves GPU buffers)");
		return DL_EINVAL;
	}
	if (rq->device == DEVICE_CUDA && rq->backend == BACKEND_TCP) {
		snprintf(err, err_size,
			 "--backend tcp needs --device cpu or auto (the tcp "
			 "backend moves host buffers)");
		return DL_EINVAL;
	}
	/* the CPU: asked for, implied by tcp, or auto without GPUs */
	if (rq->device == DEVICE_CPU ||
	    (rq->device == DEVICE_AUTO && rq->backend == BACKEND_TCP))
		return 0;
	short_why(rq, why, sizeof(why));
	if (gpus_short(rq)) {
		if (rq->device == DEVICE_CUDA || rq->backend == BACKEND_NCCL) {
			const char *opt = rq->device == DEVICE_CUDA
					      ? "--device cuda"
					      : "--backend nccl";

			if (rq->visible_gpus <= 0)
				snprintf(err, err_size,
					 "%s: %s (check the driver and "
					 "CUDA_VISIBLE_DEVICES, or train on "
					 "the CPU with --device cpu)",
					 opt, why);
			else
				snprintf(err, err_size,
					 "%s: %s (start at most %d rank(s) per "
					 "node; if a per-rank "
					 "CUDA_VISIBLE_DEVICES gave each rank "
					 "one GPU, let every rank see all of "
					 "the node's; or train on the CPU with "
					 "--device cpu)",
					 opt, why, rq->visible_gpus);
			return DL_ENOTSUP;
		}
		if (rq->visible_gpus > 0)
			snprintf(out->note, sizeof(out->note),
				 "--device auto: %s: training on the CPU with "
				 "the tcp backend (--device cuda makes this "
				 "an error)",
				 why);
		return 0;
	}
	out->device = DEVICE_CUDA;
	out->backend = BACKEND_NCCL;
	out->gpu = rq->local_rank;
	return 0;
}
