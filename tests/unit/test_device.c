/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_device.c - the choice of device and backend (trainer/device.c): one
 * GPU per rank, the same GPU for the kernels and NCCL, the fall-back of
 * --device auto and the refusals of --device cuda, and messages that
 * suggest only what the options allow.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../trainer/options.h"
#include "../../trainer/device.h"
#include "dlaunch/error.h"

static int choose(int device, int backend, int local_rank, int local_world,
		  int gpus, struct train_device_choice *ch, char *err,
		  size_t err_size)
{
	struct train_device_request rq = {device, backend, local_rank,
					  local_world, gpus};

	err[0] = '\0';
	return train_device_choose(&rq, ch, err, err_size);
}

static void test_device_cpu(void **state)
{
	struct train_device_choice ch;
	char err[512];

	(void)state;
	for (int gpus = 0; gpus <= 2; gpus++) {
		assert_int_equal(choose(DEVICE_CPU, BACKEND_AUTO, 0, 1, gpus,
					&ch, err, sizeof(err)),
				 0);
		assert_int_equal(ch.device, DEVICE_CPU);
		assert_int_equal(ch.backend, BACKEND_TCP);
		assert_int_equal(ch.gpu, -1);
		assert_string_equal(ch.note, "");
	}
	/* --backend tcp with --device auto: tcp moves host buffers */
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_TCP, 1, 2, 8, &ch, err, sizeof(err)),
	    0);
	assert_int_equal(ch.device, DEVICE_CPU);
	assert_string_equal(ch.note, "");
	/* no GPU at all: auto is the CPU, silently (the usual CPU box) */
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_AUTO, 1, 2, 0, &ch, err, sizeof(err)),
	    0);
	assert_int_equal(ch.device, DEVICE_CPU);
	assert_int_equal(ch.backend, BACKEND_TCP);
	assert_string_equal(ch.note, "");
}

/* one GPU per rank: rank r of the node gets GPU r, whichever way cuda was
 * asked for, and no two ranks of a node share one */
static void test_device_gpu_per_rank(void **state)
{
	static const int devices[] = {DEVICE_AUTO, DEVICE_CUDA};
	static const int backends[] = {BACKEND_AUTO, BACKEND_NCCL};
	struct train_device_choice ch;
	char err[512];

	(void)state;
	for (int d = 0; d < 2; d++)
		for (int b = 0; b < 2; b++)
			for (int world = 1; world <= 8; world++)
				for (int gpus = world; gpus <= 8; gpus++) {
					unsigned used = 0;

					for (int r = 0; r < world; r++) {
						assert_int_equal(
						    choose(devices[d],
							   backends[b], r,
							   world, gpus, &ch,
							   err, sizeof(err)),
						    0);
						assert_int_equal(ch.device,
								 DEVICE_CUDA);
						assert_int_equal(ch.backend,
								 BACKEND_NCCL);
						assert_int_equal(ch.gpu, r);
						assert_true(ch.gpu < gpus);
						assert_false(used &
							     (1u << ch.gpu));
						used |= 1u << ch.gpu;
						assert_string_equal(ch.note,
								    "");
					}
				}
}

/* more ranks than GPUs (two ranks on one GPU, or one GPU per rank
 * through a per-rank CUDA_VISIBLE_DEVICES): auto trains on the CPU, every
 * rank of the node alike, and says why once */
static void test_device_auto_falls_back(void **state)
{
	struct train_device_choice ch;
	char err[512];

	(void)state;
	for (int r = 0; r < 2; r++) {
		assert_int_equal(choose(DEVICE_AUTO, BACKEND_AUTO, r, 2, 1, &ch,
					err, sizeof(err)),
				 0);
		assert_int_equal(ch.device, DEVICE_CPU);
		assert_int_equal(ch.backend, BACKEND_TCP);
		assert_int_equal(ch.gpu, -1);
		assert_non_null(strstr(ch.note, "--device auto"));
		assert_non_null(strstr(ch.note, "2 rank(s) on this node"));
		assert_non_null(strstr(ch.note, "1 visible CUDA device"));
		assert_non_null(strstr(ch.note, "training on the CPU"));
		assert_null(strchr(ch.note, '\n'));
	}
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_AUTO, 5, 8, 4, &ch, err, sizeof(err)),
	    0);
	assert_int_equal(ch.device, DEVICE_CPU);
	assert_non_null(strstr(ch.note, "8 rank(s) on this node"));
}

/* --device cuda (or --backend nccl) without a GPU per rank fails at once,
 * and the message offers only what is allowed: never the tcp backend
 * with --device cuda */
static void test_device_cuda_refuses(void **state)
{
	struct train_device_choice ch;
	char err[512];

	(void)state;
	assert_int_equal(
	    choose(DEVICE_CUDA, BACKEND_AUTO, 1, 2, 1, &ch, err, sizeof(err)),
	    DL_ENOTSUP);
	assert_non_null(strstr(err, "--device cuda"));
	assert_non_null(strstr(err, "2 rank(s) on this node"));
	assert_non_null(strstr(err, "at most 1 rank(s) per node"));
	assert_non_null(strstr(err, "CUDA_VISIBLE_DEVICES"));
	assert_non_null(strstr(err, "--device cpu"));
	assert_null(strstr(err, "tcp"));
	assert_int_equal(
	    choose(DEVICE_CUDA, BACKEND_NCCL, 0, 1, 0, &ch, err, sizeof(err)),
	    DL_ENOTSUP);
	assert_non_null(strstr(err, "no usable CUDA device"));
	assert_null(strstr(err, "tcp"));
	/* --backend nccl with --device auto cannot fall back either */
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_NCCL, 0, 3, 2, &ch, err, sizeof(err)),
	    DL_ENOTSUP);
	assert_non_null(strstr(err, "--backend nccl"));
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_NCCL, 0, 1, 0, &ch, err, sizeof(err)),
	    DL_ENOTSUP);
}

static void test_device_contradictions(void **state)
{
	struct train_device_choice ch;
	char err[512];

	(void)state;
	assert_int_equal(
	    choose(DEVICE_CPU, BACKEND_NCCL, 0, 1, 1, &ch, err, sizeof(err)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "--backend nccl needs --device cuda"));
	assert_int_equal(
	    choose(DEVICE_CUDA, BACKEND_TCP, 0, 1, 1, &ch, err, sizeof(err)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "--backend tcp needs --device cpu"));
	/* a rank outside its node's ranks */
	assert_int_equal(
	    choose(DEVICE_AUTO, BACKEND_AUTO, 2, 2, 4, &ch, err, sizeof(err)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "LOCAL_RANK=2"));
	assert_non_null(strstr(err, "LOCAL_WORLD_SIZE=2"));
	assert_int_equal(
	    choose(DEVICE_CPU, BACKEND_AUTO, -1, 2, 0, &ch, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(
	    choose(DEVICE_CPU, BACKEND_AUTO, 0, 0, 0, &ch, err, sizeof(err)),
	    DL_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_device_cpu),
	    cmocka_unit_test(test_device_gpu_per_rank),
	    cmocka_unit_test(test_device_auto_falls_back),
	    cmocka_unit_test(test_device_cuda_refuses),
	    cmocka_unit_test(test_device_contradictions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
