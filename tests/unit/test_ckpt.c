/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ckpt.c - checkpoint format and files: round trip, every damaged
 * variant (bit flips in header and payload, torn/truncated writes, wrong
 * version, inconsistent shape), retention of the last N, fallback to the
 * previous checkpoint when the newest is damaged, leftover temporary
 * files, and a model-shape mismatch. The streamed writer and reader
 * (ckpt_save, ckpt_load) are held to ckpt_encode's bytes, to golden
 * checksums of the format, and to ckpt_decode's verdicts.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trainer/ckpt.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"

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

static unsigned char *read_whole(const char *path, size_t *len)
{
	char *data = NULL;
	assert_int_equal(fs_read_file(path, SIZE_MAX, &data, len), 0);
	return (unsigned char *)data;
}

/* the checkpoint ckpt_save makes of st in a new subdirectory */
static void save_one(const char *name, const struct ckpt_state *st, char *path,
		     size_t path_size)
{
	char sub[300], err[512];

	snprintf(sub, sizeof(sub), "%s/%s", dir, name);
	assert_int_equal(
	    ckpt_save(sub, st, 1, path, path_size, err, sizeof(err)), 0);
}

static void test_streamed_file_is_the_image(void **state)
{
	/* written by ckpt_encode before saves were streamed (8cd19c2): the
	 * format itself is pinned, not only the two writers to each other;
	 * 2048-1536-10 has arrays of several CKPT_IO_CHUNKs, not multiples */
	static const struct {
		const char *spec;
		int bn;
		size_t len;
		uint32_t crc;
	} golden[] = {
	    {"12-8-6-3", 0, 1560, 0x490050c1},
	    {"12-8-6-3", 1, 1896, 0xfdd57ca3},
	    {"2048-1536-10", 0, 25301196, 0x0884390a},
	    {"2048-1536-10", 1, 25338060, 0x949dada5},
	};
	struct ckpt_state a, b;
	unsigned char *file, *image;
	size_t file_len, image_len;
	char path[512], err[512];

	(void)state;
	for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
		make_state(&a, golden[i].spec, golden[i].bn, 17);
		save_one("stream", &a, path, sizeof(path));
		file = read_whole(path, &file_len);
		assert_int_equal(ckpt_encode(&a, &image, &image_len), 0);
		assert_int_equal(file_len, image_len);
		assert_memory_equal(file, image, file_len);
		assert_int_equal(file_len, golden[i].len);
		if (crc32c(0, file, file_len) != golden[i].crc)
			fail_msg("%s bn=%d: crc %08x, the format's is %08x",
				 golden[i].spec, golden[i].bn,
				 crc32c(0, file, file_len), golden[i].crc);
		free(image);
		free(file);
		assert_int_equal(ckpt_load(path, &b, err, sizeof(err)), 0);
		assert_same(&a, &b);
		ckpt_state_release(&b);
		ckpt_state_release(&a);
	}
}

static void expect_load_damaged(const char *path, const char *needle)
{
	struct ckpt_state st;
	char err[1024] = "";

	assert_int_equal(ckpt_load(path, &st, err, sizeof(err)), DL_ECORRUPT);
	if (strstr(err, path) == NULL || strstr(err, "is damaged") == NULL ||
	    strstr(err, needle) == NULL)
		fail_msg("error '%s' lacks the path or '%s'", err, needle);
	assert_null(st.params);
	assert_null(st.momentum);
}

static void test_load_truncated_file(void **state)
{
	struct ckpt_state a;
	char path[512], want[256];
	size_t params_bytes, p0, m0, b0, len;
	struct stat sb;

	(void)state;
	make_state(&a, "2048-1536-10", 1, 5);
	save_one("trunc", &a, path, sizeof(path));
	assert_int_equal(stat(path, &sb), 0);
	len = (size_t)sb.st_size;
	params_bytes = a.n_params * sizeof(float);
	p0 = 32 + 4 + 4 * 3 + 4 + 6 * 8 + 4 + 4 + 8 + 8; /* params start */
	m0 = p0 + params_bytes;
	b0 = m0 + params_bytes;
	assert_int_equal(b0 + a.n_buffers * sizeof(float), len);

	snprintf(want, sizeof(want),
		 "%zu payload bytes, the header announces %zu (torn or "
		 "truncated write)",
		 len - 1 - 32, len - 32);
	assert_int_equal(truncate(path, (off_t)(len - 1)), 0);
	expect_load_damaged(path, want);
	/* shorter and shorter: inside each array, at their boundaries,
	 * inside the metadata and the header */
	{
		const size_t cuts[] = {
		    b0 + 1, b0, m0 + 3, m0, p0 + (8u << 20) + 5, p0 + 1, p0,
		    p0 - 1, 36, 33,	32};

		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			assert_int_equal(truncate(path, (off_t)cuts[i]), 0);
			expect_load_damaged(path, "(torn or truncated write)");
		}
	}
	assert_int_equal(truncate(path, 31), 0);
	expect_load_damaged(path, "not a dlaunch-train checkpoint");
	assert_int_equal(truncate(path, 0), 0);
	expect_load_damaged(path, "not a dlaunch-train checkpoint");
	ckpt_state_release(&a);
}

/* ckpt_load of the file data (len bytes) says what ckpt_decode says */
static void expect_same_verdict(const char *path, const unsigned char *data,
				size_t len)
{
	struct ckpt_state from_file, from_memory;
	char ferr[1024] = "", merr[512] = "";
	int frc, mrc;
	size_t fl, ml;

	write_raw(path, data, len);
	frc = ckpt_load(path, &from_file, ferr, sizeof(ferr));
	mrc = ckpt_decode(data, len, &from_memory, merr, sizeof(merr));
	assert_int_equal(frc, mrc);
	if (mrc == 0) {
		assert_same(&from_memory, &from_file);
		ckpt_state_release(&from_file);
		ckpt_state_release(&from_memory);
		return;
	}
	fl = strlen(ferr);
	ml = strlen(merr);
	if (ml == 0 || fl < ml || strcmp(ferr + fl - ml, merr) != 0)
		fail_msg("file: '%s', memory: '%s'", ferr, merr);
	assert_null(from_file.params);
}

static void test_load_damaged_file(void **state)
{
	struct ckpt_state a, st;
	unsigned char *data, *copy;
	char path[512], err[1024];
	size_t len;

	(void)state;
	snprintf(path, sizeof(path), "%s/damaged.dlck", dir);
	make_state(&a, "5-4-3", 1, 3);
	assert_int_equal(ckpt_encode(&a, &data, &len), 0);
	copy = malloc(len);
	assert_non_null(copy);
	expect_same_verdict(path, data, len);
	/* every single-bit flip: metadata damage is a checksum mismatch
	 * from a file too, not an inconsistent shape */
	for (size_t i = 0; i < len; i++) {
		memcpy(copy, data, len);
		copy[i] ^= (unsigned char)(1u << (i % 8));
		expect_same_verdict(path, copy, len);
	}
	memcpy(copy, data, len);
	copy[40] ^= 1;
	expect_same_verdict(path, copy, len);
	expect_load_damaged(path, "payload checksum mismatch");
	/* inconsistent metadata under correct checksums: n_params + 1 */
	{
		size_t at = 32 + 4 + 4 * 3 + 4 + 6 * 8 + 4 + 4;
		uint64_t n;
		uint32_t crc, zero = 0;

		memcpy(copy, data, len);
		memcpy(&n, copy + at, 8);
		n++;
		memcpy(copy + at, &n, 8);
		crc = crc32c(0, copy + 32, len - 32);
		memcpy(copy + 24, &crc, 4);
		memcpy(copy + 12, &zero, 4);
		crc = crc32c(0, copy, 32);
		memcpy(copy + 12, &crc, 4);
		expect_same_verdict(path, copy, len);
		expect_load_damaged(path, "inconsistent payload");
	}
	free(copy);
	free(data);
	ckpt_state_release(&a);

	/* a flip deep inside a large file's momentum */
	make_state(&a, "2048-1536-10", 0, 9);
	save_one("flip", &a, path, sizeof(path));
	{
		long at = (long)(32 + 92 + a.n_params * 6);
		FILE *f = fopen(path, "r+b");
		int c;

		assert_non_null(f);
		assert_int_equal(fseek(f, at, SEEK_SET), 0);
		c = fgetc(f);
		assert_int_equal(fseek(f, at, SEEK_SET), 0);
		assert_int_equal(fputc(c ^ 0x10, f), c ^ 0x10);
		assert_int_equal(fclose(f), 0);
	}
	expect_load_damaged(path, "payload checksum mismatch");
	ckpt_state_release(&a);

	/* unreadable: missing, a directory */
	snprintf(path, sizeof(path), "%s/missing.dlck", dir);
	assert_int_equal(ckpt_load(path, &st, err, sizeof(err)), DL_ENOTFOUND);
	assert_non_null(strstr(err, "cannot read: no such file"));
	assert_int_not_equal(ckpt_load(dir, &st, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "cannot read"));
	assert_null(st.params);
}

static void test_failed_save_leaves_no_tmp(void **state)
{
	struct ckpt_state a, b;
	struct rlimit old, small;
	char sub[300], path[512], err[512];
	uint64_t steps[4];
	size_t n;
	void (*old_handler)(int);
	int rc;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/full", dir);
	make_state(&a, "2048-1536-10", 0, 1);
	assert_int_equal(ckpt_save(sub, &a, 3, NULL, 0, err, sizeof(err)), 0);
	ckpt_state_release(&a);

	/* a disk that fills up in the middle of the arrays */
	make_state(&a, "2048-1536-10", 0, 2);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	small = old;
	small.rlim_cur = 1u << 20;
	old_handler = signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
	rc = ckpt_save(sub, &a, 3, NULL, 0, err, sizeof(err));
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, old_handler);
	assert_int_not_equal(rc, 0);
	if (strstr(err, "ckpt-000000000002.dlck: cannot write") == NULL ||
	    strstr(err, strerror(EFBIG)) == NULL)
		fail_msg("error '%s'", err);

	snprintf(path, sizeof(path), "%s/ckpt-000000000002.dlck.tmp.%ld", sub,
		 (long)getpid());
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(ckpt_list(sub, steps, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ckpt_load_latest(sub, &a.shape, &b, path, sizeof(path),
					  err, sizeof(err)),
			 0);
	assert_true(b.step == 1);
	ckpt_state_release(&b);
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
	    cmocka_unit_test(test_streamed_file_is_the_image),
	    cmocka_unit_test(test_load_truncated_file),
	    cmocka_unit_test(test_load_damaged_file),
	    cmocka_unit_test(test_failed_save_leaves_no_tmp),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
