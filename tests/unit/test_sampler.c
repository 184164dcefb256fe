/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_sampler.c - DistributedSampler semantics: a permutation per epoch
 * that depends only on seed and epoch, global batches split into
 * contiguous rank slices that cover every sample exactly once, and
 * positions that stay valid when the world size changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../trainer/rng.h"
#include "../../trainer/sampler.h"

static void test_permutation(void **state)
{
	struct train_sampler a, b;
	size_t n = 1000;
	unsigned char *seen = calloc(n, 1);
	int same = 1;

	(void)state;
	assert_int_equal(train_sampler_init(&a, n, 42), 0);
	assert_int_equal(train_sampler_init(&b, n, 42), 0);
	train_sampler_set_epoch(&a, 3);
	train_sampler_set_epoch(&b, 3);
	assert_memory_equal(a.perm, b.perm, n * sizeof(uint32_t));
	for (size_t i = 0; i < n; i++) {
		assert_true(a.perm[i] < n);
		assert_false(seen[a.perm[i]]);
		seen[a.perm[i]] = 1;
	}
	/* another epoch or another seed: another order */
	train_sampler_set_epoch(&b, 4);
	same = memcmp(a.perm, b.perm, n * sizeof(uint32_t)) == 0;
	assert_false(same);
	train_sampler_release(&b);
	assert_int_equal(train_sampler_init(&b, n, 43), 0);
	train_sampler_set_epoch(&b, 3);
	assert_false(memcmp(a.perm, b.perm, n * sizeof(uint32_t)) == 0);
	/* going back to an epoch reproduces it */
	train_sampler_set_epoch(&b, 9);
	train_sampler_release(&b);
	assert_int_equal(train_sampler_init(&b, n, 42), 0);
	train_sampler_set_epoch(&b, 9);
	train_sampler_set_epoch(&b, 3);
	assert_memory_equal(a.perm, b.perm, n * sizeof(uint32_t));
	train_sampler_release(&a);
	train_sampler_release(&b);
	free(seen);
	assert_int_not_equal(train_sampler_init(&a, 0, 1), 0);
}

/* every world size covers each global batch exactly, in rank order */
static void test_split(void **state)
{
	const size_t n = 1003, gb = 128;
	struct train_sampler s;
	uint32_t idx[200];

	(void)state;
	assert_int_equal(train_sampler_init(&s, n, 7), 0);
	train_sampler_set_epoch(&s, 1);
	assert_int_equal(train_sampler_steps(n, gb), 8);
	for (int world = 1; world <= 5; world++) {
		size_t offset = 0, steps = 0;

		while (offset < n) {
			size_t next = 0, pos = offset, total = 0;

			for (int r = 0; r < world; r++) {
				size_t local, global;

				next = train_sampler_batch(&s, offset, gb, r,
							   world, idx, &local,
							   &global);
				assert_int_equal(
				    global, n - offset < gb ? n - offset : gb);
				/* slices are balanced */
				assert_true(local >= global / (size_t)world);
				assert_true(local <=
					    global / (size_t)world + 1);
				assert_memory_equal(idx, s.perm + pos,
						    local * sizeof(uint32_t));
				pos += local;
				total += local;
			}
			assert_int_equal(total, next - offset);
			offset = next;
			steps++;
		}
		assert_int_equal(steps, 8);
		assert_int_equal(offset, n);
	}
	train_sampler_release(&s);
}

/* a position saved at world size 2 resumes at world size 3 with the very
 * same global batches */
static void test_resume_other_world(void **state)
{
	struct train_sampler s;
	uint32_t a[64], b[64], merged[64];
	size_t la, ga, lb, gb, off2, off3;

	(void)state;
	assert_int_equal(train_sampler_init(&s, 500, 1), 0);
	train_sampler_set_epoch(&s, 2);
	off2 = 64 * 3; /* three steps done */
	off3 = off2;
	for (int step = 0; step < 4; step++) {
		size_t m = 0, next = 0;

		for (int r = 0; r < 3; r++) {
			next = train_sampler_batch(&s, off3, 64, r, 3, b, &lb,
						   &gb);
			memcpy(merged + m, b, lb * sizeof(uint32_t));
			m += lb;
		}
		off3 = next;
		train_sampler_batch(&s, off2, 64, 0, 2, a, &la, &ga);
		off2 =
		    train_sampler_batch(&s, off2, 64, 1, 2, a + la, &lb, &ga);
		assert_int_equal(m, la + lb);
		assert_memory_equal(a, merged, m * sizeof(uint32_t));
	}
	/* more ranks than samples: some get none */
	{
		size_t local, global;

		train_sampler_batch(&s, 498, 64, 0, 4, b, &local, &global);
		assert_int_equal(global, 2);
		assert_int_equal(local, 0);
		train_sampler_batch(&s, 498, 64, 3, 4, b, &local, &global);
		assert_int_equal(local, 1);
		assert_int_equal(
		    train_sampler_batch(&s, 500, 64, 0, 4, b, &local, &global),
		    500);
		assert_int_equal(global, 0);
	}
	train_sampler_release(&s);
}

static void test_rng(void **state)
{
	struct train_rng a, b;
	int hist[10] = {0};

	(void)state;
	train_rng_seed(&a, 5, 1);
	train_rng_seed(&b, 5, 2);
	assert_true(train_rng_next(&a) != train_rng_next(&b));
	train_rng_seed(&a, 5, 1);
	for (int i = 0; i < 10000; i++) {
		uint64_t v = train_rng_below(&a, 10);

		assert_true(v < 10);
		hist[v]++;
	}
	for (int i = 0; i < 10; i++)
		assert_true(hist[i] > 850 && hist[i] < 1150);
	/* the state is two words: copying it continues the stream */
	b = a;
	assert_true(train_rng_next(&a) == train_rng_next(&b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_permutation),
	    cmocka_unit_test(test_split),
	    cmocka_unit_test(test_resume_other_world),
	    cmocka_unit_test(test_rng),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
