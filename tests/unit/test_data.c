/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_data.c - the IDX reader (gzip and plain; good, wrong-magic,
 * truncated, trailing-data, mismatched and out-of-range files), the
 * synthetic set's determinism and the real Fashion-MNIST files when the
 * Debian package is installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "../../trainer/data.h"
#include "dlaunch/error.h"

static char dir[] = "/tmp/dlaunch-test-data.XXXXXX";

static void path_of(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", dir, name);
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

/* write_file writes data, gzip-compressed when gz. */
static void write_file(const char *name, const void *data, size_t len, int gz)
{
	char path[512];

	path_of(path, sizeof(path), name);
	if (gz) {
		gzFile f = gzopen(path, "wb");

		assert_non_null(f);
		assert_int_equal(gzwrite(f, data, (unsigned)len), (int)len);
		assert_int_equal(gzclose(f), Z_OK);
	} else {
		FILE *f = fopen(path, "wb");

		assert_non_null(f);
		assert_int_equal(fwrite(data, 1, len, f), len);
		fclose(f);
	}
}

/* images: n images of 2x3 pixels, pixel = 10 * image + k */
static size_t make_images(unsigned char *buf, uint32_t magic, uint32_t n)
{
	put_be32(buf, magic);
	put_be32(buf + 4, n);
	put_be32(buf + 8, 2);
	put_be32(buf + 12, 3);
	for (uint32_t i = 0; i < n; i++)
		for (int k = 0; k < 6; k++)
			buf[16 + i * 6 + (uint32_t)k] =
			    (unsigned char)(10 * i + (uint32_t)k);
	return 16 + 6 * (size_t)n;
}

static size_t make_labels(unsigned char *buf, uint32_t magic, uint32_t n)
{
	put_be32(buf, magic);
	put_be32(buf + 4, n);
	for (uint32_t i = 0; i < n; i++)
		buf[8 + i] = (unsigned char)(i % 3);
	return 8 + (size_t)n;
}

static int setup(void **state)
{
	unsigned char img[256], lab[64];
	size_t il = make_images(img, 0x803, 4), ll = make_labels(lab, 0x801, 4);

	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	write_file("img.gz", img, il, 1);
	write_file("img", img, il, 0);
	write_file("lab.gz", lab, ll, 1);
	write_file("lab3.gz", lab, make_labels(lab, 0x801, 3), 1);
	write_file("img-magic.gz", img, make_images(img, 0x801, 4), 1);
	write_file("lab-magic", lab, make_labels(lab, 0x803, 4), 0);
	il = make_images(img, 0x803, 4);
	write_file("img-short", img, il - 5, 0);
	write_file("img-long", img, il + 1, 0);
	write_file("img-header", img, 10, 0);
	/* a header that claims 1000000 x 60 x 50 = 3 GB over 6 bytes */
	make_images(img, 0x803, 1);
	put_be32(img + 4, 1000000);
	put_be32(img + 8, 60);
	put_be32(img + 12, 50);
	write_file("img-claims-3gb", img, 16 + 6, 0);
	ll = make_labels(lab, 0x801, 4);
	lab[9] = 7;
	write_file("lab-range.gz", lab, ll, 1);
	/* a gzip stream cut in the middle */
	{
		char p[512], q[512];
		FILE *f;
		unsigned char gz[512];
		size_t n;

		path_of(p, sizeof(p), "img.gz");
		f = fopen(p, "rb");
		n = fread(gz, 1, sizeof(gz), f);
		fclose(f);
		path_of(q, sizeof(q), "img-cut.gz");
		f = fopen(q, "wb");
		fwrite(gz, 1, n / 2, f);
		fclose(f);
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int read_pair(const char *img, const char *lab, struct dataset *ds,
		     char *err, size_t err_size)
{
	char ip[512], lp[512];

	path_of(ip, sizeof(ip), img);
	path_of(lp, sizeof(lp), lab);
	err[0] = '\0';
	return data_read_idx(ip, lp, 3, ds, err, err_size);
}

static void test_good(void **state)
{
	struct dataset ds;
	char err[512];
	uint32_t idx[2] = {3, 1};
	float x[12];
	int32_t y[2];

	(void)state;
	assert_int_equal(read_pair("img.gz", "lab.gz", &ds, err, sizeof(err)),
			 0);
	assert_int_equal(ds.n, 4);
	assert_int_equal(ds.dim, 6);
	assert_int_equal(ds.labels[2], 2);
	data_gather(&ds, idx, 2, x, y);
	assert_int_equal(y[0], 0);
	assert_int_equal(y[1], 1);
	assert_float_equal(x[0], 30.0f / 255.0f, 1e-6);
	assert_float_equal(x[6 + 5], 15.0f / 255.0f, 1e-6);
	data_release(&ds);
	/* an uncompressed file reads the same */
	assert_int_equal(read_pair("img", "lab.gz", &ds, err, sizeof(err)), 0);
	assert_int_equal(ds.n, 4);
	data_release(&ds);
}

static void expect_error(const char *img, const char *lab, int code,
			 const char *needle, const char *names)
{
	struct dataset ds;
	char err[512];

	assert_int_equal(read_pair(img, lab, &ds, err, sizeof(err)), code);
	if (strstr(err, needle) == NULL || strstr(err, names) == NULL)
		fail_msg("error '%s' lacks '%s' or '%s'", err, needle, names);
	assert_null(ds.u8);
	assert_null(ds.labels);
}

static void test_bad_files(void **state)
{
	(void)state;
	expect_error("img-magic.gz", "lab.gz", DL_ECORRUPT, "magic",
		     "img-magic.gz");
	expect_error("img.gz", "lab-magic", DL_ECORRUPT, "magic", "lab-magic");
	expect_error("img-short", "lab.gz", DL_ECORRUPT, "truncated",
		     "img-short");
	expect_error("img-header", "lab.gz", DL_ECORRUPT, "truncated",
		     "img-header");
	expect_error("img-cut.gz", "lab.gz", DL_ECORRUPT, "truncated",
		     "img-cut.gz");
	expect_error("img-long", "lab.gz", DL_ECORRUPT, "trailing", "img-long");
	expect_error("img.gz", "lab3.gz", DL_ECORRUPT, "3 labels", "lab3.gz");
	expect_error("img.gz", "lab-range.gz", DL_ECORRUPT, "label 7",
		     "lab-range.gz");
	expect_error("missing.gz", "lab.gz", DL_ENOTFOUND, "cannot open",
		     "missing.gz");
}

/* A header's sizes are a claim, not a reason to allocate: a 22-byte file
 * claiming 3 GB is reported as truncated, and (outside ASan, which needs
 * its own address space) within a 1 GiB address-space limit. */
static void test_size_claim(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct dataset ds;
		char err[256];
		int rc;
#ifndef __SANITIZE_ADDRESS__
		struct rlimit lim = {1ul << 30, 1ul << 30};
		setrlimit(RLIMIT_AS, &lim);
#endif
		rc = read_pair("img-claims-3gb", "lab.gz", &ds, err,
			       sizeof(err));
		_exit(rc == DL_ECORRUPT && strstr(err, "truncated") ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_synthetic(void **state)
{
	struct dataset a, b, ta, tb;
	int count[4] = {0};

	(void)state;
	assert_int_equal(data_synthetic(500, 8, 4, 3, &a, &ta), 0);
	assert_int_equal(data_synthetic(500, 8, 4, 3, &b, &tb), 0);
	assert_int_equal(a.n, 500);
	assert_int_equal(ta.n, 100);
	assert_memory_equal(a.f32, b.f32, 500 * 8 * sizeof(float));
	assert_memory_equal(ta.labels, tb.labels, 100 * sizeof(int32_t));
	for (size_t i = 0; i < a.n; i++)
		count[a.labels[i]]++;
	for (int c = 0; c < 4; c++)
		assert_true(count[c] > 60);
	data_release(&a);
	data_release(&b);
	data_release(&ta);
	data_release(&tb);
	assert_int_not_equal(data_synthetic(0, 8, 4, 3, &a, &ta), 0);
	assert_int_not_equal(data_synthetic(10, 8, 1, 3, &a, &ta), 0);
}

static void test_fashion_mnist(void **state)
{
	struct dataset train, test;
	char err[512], probe[512];
	struct stat st;

	(void)state;
	snprintf(probe, sizeof(probe), "%s/train-images-idx3-ubyte.gz",
		 DATA_DEFAULT_DIR);
	if (stat(probe, &st) != 0) {
		print_message("dataset-fashion-mnist not installed\n");
		skip();
	}
	assert_int_equal(data_load_fashion_mnist(DATA_DEFAULT_DIR, &train,
						 &test, err, sizeof(err)),
			 0);
	assert_int_equal(train.n, 60000);
	assert_int_equal(test.n, 10000);
	assert_int_equal(train.dim, 784);
	assert_int_equal(train.classes, 10);
	data_release(&train);
	data_release(&test);
	assert_int_equal(
	    data_load_fashion_mnist(dir, &train, &test, err, sizeof(err)),
	    DL_ENOTFOUND);
	assert_non_null(strstr(err, "train-images-idx3-ubyte"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_size_claim),
	    cmocka_unit_test(test_synthetic),
	    cmocka_unit_test(test_fashion_mnist),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
