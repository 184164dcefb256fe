/*
 * test_ckpt.c - checkpoint format and files: round trip, every damaged
 * variant (bit flips in header and payload, torn/truncated writes, wrong
 * version, inconsistent shape), retention of the last N, fallback to the
 * previous checkpoint when the newest is damaged, leftover temporary
 * files, and a model-shape mismatch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlaunch/ckpt.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"

static char dir[] = "/tmp/dlaunch-test-ckpt.XXXXXX";

static void make_state(struct ckpt_state *st, const char *spec, int bn,
		       uint64_t step)
{
	struct mlp_shape s;
	char err[128];

	assert_int_equal(mlp_shape_parse(spec, &s, err, sizeof(err)), 0);
	s.batch_norm = bn;
	assert_int_equal(ckpt_state_alloc(st, &s), 0);
	for (size_t i = 0; i < st->n_params; i++) {
		st->params[i] = (float)i * 0.5f + (float)step;
		st->momentum[i] = -(float)i;
	}
	for (size_t i = 0; i < st->n_buffers; i++)
		st->buffers[i] = (float)i + 0.25f;
	st->step = step;
	st->epoch = step / 10;
	st->epoch_offset = (step % 10) * 64;
	st->seed = 42;
	st->rng_key = 0x1234567890abcdefULL;
	st->rng_counter = step * 3;
	st->global_batch = 64;
	st->has_momentum = 1;
}

static void assert_same(const struct ckpt_state *a, const struct ckpt_state *b)
{
	assert_true(mlp_shape_equal(&a->shape, &b->shape));
	assert_true(a->step == b->step && a->epoch == b->epoch);
	assert_true(a->epoch_offset == b->epoch_offset);
	assert_true(a->seed == b->seed && a->rng_key == b->rng_key);
	assert_true(a->rng_counter == b->rng_counter);
	assert_int_equal(a->global_batch, b->global_batch);
	assert_int_equal(a->has_momentum, b->has_momentum);
	assert_int_equal(a->n_params, b->n_params);
	assert_memory_equal(a->params, b->params, a->n_params * sizeof(float));
	assert_memory_equal(a->momentum, b->momentum,
			    a->n_params * sizeof(float));
	if (a->n_buffers)
		assert_memory_equal(a->buffers, b->buffers,
				    a->n_buffers * sizeof(float));
}

static void test_round_trip(void **state)
{
	struct ckpt_state a, b;
	unsigned char *data;
	size_t len;
	char err[256];

	(void)state;
	for (int bn = 0; bn <= 1; bn++) {
		make_state(&a, "12-8-6-3", bn, 17);
		assert_int_equal(ckpt_encode(&a, &data, &len), 0);
		assert_int_equal(ckpt_decode(data, len, &b, err, sizeof(err)),
				 0);
		assert_same(&a, &b);
		ckpt_state_release(&b);
		free(data);
		ckpt_state_release(&a);
	}
}

static void expect_damaged(const unsigned char *data, size_t len,
			   const char *needle)
{
	struct ckpt_state st;
	char err[256] = "";

	assert_int_equal(ckpt_decode(data, len, &st, err, sizeof(err)),
			 DL_ECORRUPT);
	if (strstr(err, needle) == NULL)
		fail_msg("error '%s' lacks '%s'", err, needle);
	assert_null(st.params);
}

static void test_damaged_images(void **state)
{
	struct ckpt_state a;
	unsigned char *data, *copy;
	size_t len;

	(void)state;
	make_state(&a, "5-4-3", 0, 3);
	assert_int_equal(ckpt_encode(&a, &data, &len), 0);
	copy = malloc(len);
	/* every single-bit flip anywhere is caught */
	for (size_t i = 0; i < len; i++) {
		memcpy(copy, data, len);
		copy[i] ^= (unsigned char)(1u << (i % 8));
		expect_damaged(copy, len, i < 8 ? "not a dlaunch" : "");
	}
	memcpy(copy, data, len);
	copy[40] ^= 1;
	expect_damaged(copy, len, "payload checksum");
	copy[40] ^= 1;
	copy[20] ^= 1;
	expect_damaged(copy, len, "header checksum");
	/* torn writes: every truncation */
	for (size_t cut = 0; cut < len; cut += 7)
		expect_damaged(data, cut, "");
	expect_damaged(data, len - 1, "torn");
	/* a newer format version, with a correct header checksum */
	{
		uint32_t v = CKPT_VERSION + 1, zero = 0, crc;

		memcpy(copy, data, len);
		memcpy(copy + 8, &v, 4);
		memcpy(copy + 12, &zero, 4);
		crc = crc32c(0, copy, 32);
		memcpy(copy + 12, &crc, 4);
		expect_damaged(copy, len, "version");
	}
	free(copy);
	free(data);
	ckpt_state_release(&a);
}

static void write_raw(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void test_files(void **state)
{
	struct ckpt_state a, b;
	struct mlp_shape other;
	char err[512], path[512], sub[300];
	uint64_t steps[16];
	size_t n;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/run", dir);
	/* none yet: not found, and a missing directory is fine */
	make_state(&a, "6-5-4", 1, 0);
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 DL_ENOTFOUND);
	ckpt_state_release(&a);

	for (uint64_t s = 10; s <= 50; s += 10) {
		make_state(&a, "6-5-4", 1, s);
		assert_int_equal(
		    ckpt_save(sub, &a, 3, path, sizeof(path), err, sizeof(err)),
		    0);
		ckpt_state_release(&a);
	}
	assert_non_null(strstr(path, "ckpt-000000000050.dlck"));
	assert_int_equal(ckpt_list(sub, steps, 16, &n), 0);
	assert_int_equal(n, 3);
	assert_true(steps[0] == 50 && steps[1] == 40 && steps[2] == 30);

	make_state(&a, "6-5-4", 1, 50);
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 0);
	assert_same(&a, &b);
	ckpt_state_release(&b);

	/* the newest torn: the one before is used */
	{
		unsigned char *data;
		size_t len;

		assert_int_equal(ckpt_encode(&a, &data, &len), 0);
		ckpt_path(sub, 50, path, sizeof(path));
		write_raw(path, data, len / 2);
		free(data);
	}
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 0);
	assert_true(b.step == 40);
	assert_non_null(strstr(path, "ckpt-000000000040.dlck"));
	ckpt_state_release(&b);

	/* all damaged: nothing valid */
	ckpt_path(sub, 40, path, sizeof(path));
	write_raw(path, "garbage", 7);
	ckpt_path(sub, 30, path, sizeof(path));
	write_raw(path, "", 0);
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 DL_ENOTFOUND);
	ckpt_state_release(&a);

	/* a leftover temporary file (killed writer) is neither loaded nor
	 * kept; saving again prunes it and the damaged ones beyond 3 */
	snprintf(path, sizeof(path), "%s/ckpt-000000000099.dlck.tmp.12345",
		 sub);
	write_raw(path, "partial", 7);
	make_state(&a, "6-5-4", 1, 60);
	assert_int_equal(ckpt_save(sub, &a, 3, NULL, 0, err, sizeof(err)), 0);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 0);
	assert_true(b.step == 60);
	ckpt_state_release(&b);
	assert_int_equal(ckpt_list(sub, steps, 16, &n), 0);
	assert_int_equal(n, 3);

	/* another model's directory is refused, not overwritten */
	other = a.shape;
	other.batch_norm = 0;
	assert_int_equal(ckpt_load_latest(sub, &other, &b, path, sizeof(path),
					  err, sizeof(err)),
			 DL_ECONFLICT);
	assert_non_null(strstr(err, "6-5-4+bn"));
	ckpt_state_release(&a);

	/* a file where the directory should be */
	snprintf(path, sizeof(path), "%s/file", dir);
	write_raw(path, "x", 1);
	make_state(&a, "6-5-4", 1, 1);
	assert_int_not_equal(ckpt_save(path, &a, 3, NULL, 0, err, sizeof(err)),
			     0);
	assert_non_null(strstr(err, path));
	ckpt_state_release(&a);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_damaged_images),
	    cmocka_unit_test(test_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
