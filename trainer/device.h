/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device.h - where a rank trains: one decision, taken once from the
 * options, the rank's place on its node and the GPUs it can see, and used
 * for both the kernels (train_backend_cuda) and NCCL (dist_config's
 * cuda_device), so that the two can never pick different GPUs.
 *
 * The rule: rank LOCAL_RANK of a node's LOCAL_WORLD_SIZE ranks trains on
 * visible GPU number LOCAL_RANK, which needs a GPU per rank
 * (LOCAL_WORLD_SIZE <= visible GPUs). Sharing a GPU is not offered: NCCL
 * refuses two ranks of one communicator on one device. With fewer GPUs,
 * --device auto trains on the CPU over TCP (and says so once) and
 * --device cuda is an error. One visible GPU per rank, as a per-rank
 * CUDA_VISIBLE_DEVICES gives, looks the same as several ranks sharing
 * one, so it is treated the same way; the messages say so.
 */
#ifndef DLAUNCH_TRAIN_DEVICE_H
#define DLAUNCH_TRAIN_DEVICE_H

#include <stddef.h>

struct train_device_request {
	int device;	  /* enum device_kind (options.h) */
	int backend;	  /* enum backend_kind (options.h) */
	int local_rank;	  /* LOCAL_RANK */
	int local_world;  /* LOCAL_WORLD_SIZE: ranks on this node */
	int visible_gpus; /* CUDA devices this process sees (<= 0: none) */
};

struct train_device_choice {
	int device;	/* DEVICE_CPU or DEVICE_CUDA */
	int backend;	/* BACKEND_TCP or BACKEND_NCCL */
	int gpu;	/* DEVICE_CUDA: the CUDA device ordinal; else -1 */
	char note[320]; /* non-empty when --device auto fell back to the
			 * CPU although GPUs are visible: the line to print */
};

/* train_device_choose: a pure function of rq. Fills out and returns 0, or
 * returns DL_EINVAL (contradictory options, a LOCAL_RANK outside
 * LOCAL_WORLD_SIZE) or DL_ENOTSUP (--device cuda or --backend nccl
 * without a GPU for each rank) with a message in err. */
int train_device_choose(const struct train_device_request *rq,
			struct train_device_choice *out, char *err,
			size_t err_size);

#endif
