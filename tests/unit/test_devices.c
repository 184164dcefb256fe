/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_devices.c - --nproc-per-node gpu|auto counts the GPUs the job may
 * use: the host's narrowed by CUDA_VISIBLE_DEVICES as CUDA reads it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../launcher/launcher.h"

static void test_visible_gpus(void **state)
{
	(void)state;
	/* unset: every GPU of the host */
	assert_int_equal(launcher_visible_gpus(8, NULL), 8);
	assert_int_equal(launcher_visible_gpus(0, NULL), 0);
	/* Slurm gave the job 4 of 8 */
	assert_int_equal(launcher_visible_gpus(8, "0,1,2,3"), 4);
	assert_int_equal(launcher_visible_gpus(8, "4,6"), 2);
	assert_int_equal(launcher_visible_gpus(8, "7"), 1);
	/* hidden on purpose, or Slurm's word for none */
	assert_int_equal(launcher_visible_gpus(8, ""), 0);
	assert_int_equal(launcher_visible_gpus(8, "NoDevFiles"), 0);
	assert_int_equal(launcher_visible_gpus(8, "-1"), 0);
	/* CUDA stops at the first item that is not a device */
	assert_int_equal(launcher_visible_gpus(8, "0,1,9,2"), 2);
	assert_int_equal(launcher_visible_gpus(8, "0,,1"), 1);
	assert_int_equal(launcher_visible_gpus(8, "1,1,2"), 1);
	assert_int_equal(launcher_visible_gpus(8, "2,x"), 1);
	assert_int_equal(launcher_visible_gpus(8, "99999999999999999999"), 0);
	/* UUIDs count, never beyond what the host has */
	assert_int_equal(
	    launcher_visible_gpus(8, "GPU-5e3f1a2b-0000-1111-2222-333344445555,"
				     "MIG-0c1d"),
	    2);
	assert_int_equal(launcher_visible_gpus(1, "GPU-a,GPU-b"), 1);
	/* no GPU on the host: nothing to see whatever the variable says */
	assert_int_equal(launcher_visible_gpus(0, "0,1"), 0);
}

static void test_count_cpus(void **state)
{
	(void)state;
	assert_true(launcher_count_cpus() >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_visible_gpus),
	    cmocka_unit_test(test_count_cpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
