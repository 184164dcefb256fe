/* SPDX-License-Identifier: Apache-2.0 */
/* test_common.c - unit tests of the shared helpers in common/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

static void test_parse_u64(void **state)
{
	uint64_t v = 7;
	(void)state;
	assert_int_equal(parse_u64("0", 0, 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64("18446744073709551615", 0, UINT64_MAX, &v),
			 0);
	assert_true(v == UINT64_MAX);
	v = 7;
	assert_int_equal(parse_u64("18446744073709551616", 0, UINT64_MAX, &v),
			 DL_ERANGE);
	assert_int_equal(parse_u64("", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64("-1", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64(" 1", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64("1 ", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64("1x", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64("+1", 0, 10, &v), DL_EINVAL);
	assert_int_equal(parse_u64("11", 0, 10, &v), DL_ERANGE);
	assert_int_equal(parse_u64("4", 5, 10, &v), DL_ERANGE);
	assert_int_equal(parse_u64(NULL, 0, 10, &v), DL_EINVAL);
	assert_int_equal(v, 7); /* untouched on every error */
}

static void test_parse_int(void **state)
{
	int v = 3;
	int64_t w;
	(void)state;
	assert_int_equal(parse_int("-5", -10, 10, &v), 0);
	assert_int_equal(v, -5);
	assert_int_equal(parse_int("2147483648", -10, 2147483647, &v),
			 DL_ERANGE);
	assert_int_equal(parse_int("-", -10, 10, &v), DL_EINVAL);
	assert_int_equal(
	    parse_i64("-9223372036854775808", INT64_MIN, INT64_MAX, &w), 0);
	assert_true(w == INT64_MIN);
	assert_int_equal(
	    parse_i64("-9223372036854775809", INT64_MIN, INT64_MAX, &w),
	    DL_ERANGE);
}

static void test_parse_double_bool(void **state)
{
	double d;
	int b;
	(void)state;
	assert_int_equal(parse_double("0.25", 0, 1, &d), 0);
	assert_true(d == 0.25);
	assert_int_equal(parse_double("-1.5", -2, 0, &d), 0);
	assert_true(d == -1.5);
	assert_int_equal(parse_double("1e3", 0, 1e9, &d), DL_EINVAL);
	assert_int_equal(parse_double("nan", 0, 1, &d), DL_EINVAL);
	assert_int_equal(parse_double("2", 0, 1, &d), DL_ERANGE);
	assert_int_equal(parse_bool("YES", &b), 0);
	assert_int_equal(b, 1);
	assert_int_equal(parse_bool("off", &b), 0);
	assert_int_equal(b, 0);
	assert_int_equal(parse_bool("maybe", &b), DL_EINVAL);
	assert_int_equal(parse_bool("", &b), DL_EINVAL);
}

static void test_parse_duration(void **state)
{
	uint64_t ms = 42;
	(void)state;
	assert_int_equal(parse_duration_ms("30s", 1000, 0, UINT64_MAX, &ms), 0);
	assert_int_equal(ms, 30000);
	assert_int_equal(parse_duration_ms("500ms", 1000, 0, UINT64_MAX, &ms),
			 0);
	assert_int_equal(ms, 500);
	assert_int_equal(parse_duration_ms("1.5", 1000, 0, UINT64_MAX, &ms), 0);
	assert_int_equal(ms, 1500);
	assert_int_equal(parse_duration_ms("0.0004", 1000, 0, UINT64_MAX, &ms),
			 0);
	assert_int_equal(ms, 0);
	assert_int_equal(parse_duration_ms("2m", 1000, 0, UINT64_MAX, &ms), 0);
	assert_int_equal(ms, 120000);
	assert_int_equal(parse_duration_ms("1h", 1000, 0, UINT64_MAX, &ms), 0);
	assert_int_equal(ms, 3600000);
	assert_int_equal(parse_duration_ms("7", 1, 0, UINT64_MAX, &ms), 0);
	assert_int_equal(ms, 7);
	ms = 42;
	assert_int_equal(parse_duration_ms("", 1000, 0, UINT64_MAX, &ms),
			 DL_EINVAL);
	assert_int_equal(parse_duration_ms("s", 1000, 0, UINT64_MAX, &ms),
			 DL_EINVAL);
	assert_int_equal(parse_duration_ms("-1s", 1000, 0, UINT64_MAX, &ms),
			 DL_EINVAL);
	assert_int_equal(parse_duration_ms("5 s", 1000, 0, UINT64_MAX, &ms),
			 DL_EINVAL);
	assert_int_equal(
	    parse_duration_ms("3fortnights", 1000, 0, UINT64_MAX, &ms),
	    DL_EINVAL);
	assert_int_equal(parse_duration_ms("99999999999999999999h", 1000, 0,
					   UINT64_MAX, &ms),
			 DL_ERANGE);
	assert_int_equal(parse_duration_ms("10s", 1000, 0, 5000, &ms),
			 DL_ERANGE);
	assert_int_equal(parse_duration_ms("1ms", 1000, 100, 5000, &ms),
			 DL_ERANGE);
	assert_int_equal(ms, 42);
}

static void test_parse_size(void **state)
{
	uint64_t n;
	(void)state;
	assert_int_equal(parse_size_bytes("64KiB", 0, UINT64_MAX, &n), 0);
	assert_int_equal(n, 65536);
	assert_int_equal(parse_size_bytes("10MB", 0, UINT64_MAX, &n), 0);
	assert_int_equal(n, 10 * 1024 * 1024);
	assert_int_equal(parse_size_bytes("1.5k", 0, UINT64_MAX, &n), 0);
	assert_int_equal(n, 1536);
	assert_int_equal(parse_size_bytes("123", 0, UINT64_MAX, &n), 0);
	assert_int_equal(n, 123);
	assert_int_equal(parse_size_bytes("1T", 0, UINT64_MAX, &n), DL_EINVAL);
	assert_int_equal(parse_size_bytes("2g", 0, 1024, &n), DL_ERANGE);
}

static void test_parse_host_port(void **state)
{
	char host[64];
	uint16_t port = 0;
	(void)state;
	assert_int_equal(
	    parse_host_port("head:29400", 0, 0, host, sizeof(host), &port), 0);
	assert_string_equal(host, "head");
	assert_int_equal(port, 29400);
	assert_int_equal(
	    parse_host_port("[::1]:80", 0, 0, host, sizeof(host), &port), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 80);
	assert_int_equal(
	    parse_host_port("node7", 29400, 0, host, sizeof(host), &port), 0);
	assert_int_equal(port, 29400);
	assert_int_equal(
	    parse_host_port("127.0.0.1:0", 0, 1, host, sizeof(host), &port), 0);
	assert_int_equal(port, 0);
	assert_int_equal(
	    parse_host_port("127.0.0.1:0", 0, 0, host, sizeof(host), &port),
	    DL_ERANGE);
	assert_int_equal(
	    parse_host_port("h:65536", 0, 0, host, sizeof(host), &port),
	    DL_ERANGE);
	assert_int_equal(
	    parse_host_port(":80", 0, 0, host, sizeof(host), &port), DL_EINVAL);
	assert_int_equal(parse_host_port("h", 0, 0, host, sizeof(host), &port),
			 DL_EINVAL);
	assert_int_equal(
	    parse_host_port("a;rm -rf:1", 0, 0, host, sizeof(host), &port),
	    DL_EINVAL);
	assert_int_equal(
	    parse_host_port("::1", 0, 0, host, sizeof(host), &port), DL_EINVAL);
	assert_int_equal(
	    parse_host_port("[::1", 0, 0, host, sizeof(host), &port),
	    DL_EINVAL);
	assert_int_equal(parse_host_port("averyveryverylonghostname:1", 0, 0,
					 host, 8, &port),
			 DL_EINVAL);
}

static void test_buf(void **state)
{
	struct buf b;
	(void)state;
	buf_init(&b, 16);
	assert_string_equal(buf_cstr(&b), "");
	assert_int_equal(buf_append_str(&b, "hello"), 0);
	assert_int_equal(buf_printf(&b, " %d", 42), 0);
	assert_string_equal(buf_cstr(&b), "hello 42");
	assert_int_equal(b.len, 8);
	/* over the ceiling: refused, content unchanged */
	assert_int_equal(buf_append_str(&b, "0123456789"), DL_ELIMIT);
	assert_string_equal(buf_cstr(&b), "hello 42");
	assert_int_equal(buf_append_str(&b, "01234567"), 0); /* exactly 16 */
	assert_int_equal(b.len, 16);
	assert_int_equal(buf_append(&b, "x", 1), DL_ELIMIT);
	assert_int_equal(buf_append(&b, "", 0), 0);
	assert_int_equal(buf_reserve(&b, SIZE_MAX), DL_ELIMIT);
	buf_consume(&b, 6);
	assert_string_equal(buf_cstr(&b), "4201234567");
	buf_consume(&b, 1000);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_cstr(&b), "");
	assert_int_equal(buf_printf(&b, "%s", "0123456789abcdefg"), DL_ELIMIT);
	assert_int_equal(b.len, 0);
	buf_release(&b);

	buf_init(&b, 1 << 20);
	for (int i = 0; i < 10000; i++)
		assert_int_equal(buf_append(&b, "abcdefgh", 8), 0);
	assert_int_equal(b.len, 80000);
	size_t n;
	char *p = buf_steal(&b, &n);
	assert_int_equal(n, 80000);
	assert_null(b.data);
	free(p);
	buf_release(&b);
}

static void test_jsonh(void **state)
{
	json_t *o = NULL;
	char err[128];
	const char *s;
	uint64_t u;
	int bv;
	const char *body = "{\"node_id\":\"n1\",\"nproc\":4,\"neg\":-1,"
			   "\"f\":1.5,\"flag\":true,\"t\":\"500ms\","
			   "\"big\":9223372036854775807}";
	(void)state;
	assert_int_equal(
	    jsonh_parse(body, strlen(body), 8, &o, err, sizeof(err)), 0);
	assert_int_equal(
	    jsonh_get_str(o, "node_id", 1, 64, &s, err, sizeof(err)), 0);
	assert_string_equal(s, "n1");
	assert_int_equal(
	    jsonh_get_str(o, "node_id", 1, 1, &s, err, sizeof(err)), DL_ELIMIT);
	assert_int_equal(jsonh_get_str(o, "nproc", 1, 64, &s, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "nproc"));
	assert_int_equal(
	    jsonh_get_u64(o, "nproc", 1, 1, 1024, &u, err, sizeof(err)), 0);
	assert_int_equal(u, 4);
	assert_int_equal(
	    jsonh_get_u64(o, "neg", 1, 0, 10, &u, err, sizeof(err)), DL_ERANGE);
	assert_int_equal(jsonh_get_u64(o, "f", 1, 0, 10, &u, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    jsonh_get_u64(o, "big", 1, 0, 10, &u, err, sizeof(err)), DL_ERANGE);
	u = 99;
	assert_int_equal(
	    jsonh_get_u64(o, "absent", 0, 0, 10, &u, err, sizeof(err)), 0);
	assert_int_equal(u, 99);
	assert_int_equal(
	    jsonh_get_u64(o, "absent", 1, 0, 10, &u, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(jsonh_get_bool(o, "flag", 1, &bv, err, sizeof(err)),
			 0);
	assert_int_equal(bv, 1);
	assert_int_equal(jsonh_get_bool(o, "nproc", 1, &bv, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    jsonh_get_duration_ms(o, "f", 1, 0, 10000, &u, err, sizeof(err)),
	    0);
	assert_int_equal(u, 1500);
	assert_int_equal(
	    jsonh_get_duration_ms(o, "t", 1, 0, 10000, &u, err, sizeof(err)),
	    0);
	assert_int_equal(u, 500);
	assert_int_equal(
	    jsonh_get_duration_ms(o, "neg", 1, 0, 10000, &u, err, sizeof(err)),
	    DL_ERANGE);

	struct buf b;
	buf_init(&b, 1024);
	assert_int_equal(jsonh_dump(o, &b), 0);
	assert_non_null(strstr(buf_cstr(&b), "\"nproc\":4"));
	buf_release(&b);
	buf_init(&b, 4);
	assert_int_equal(jsonh_dump(o, &b), DL_ELIMIT);
	assert_int_equal(b.len, 0);
	buf_release(&b);
	json_decref(o);

	/* malformed, not an object, too deep, duplicate keys, embedded NUL */
	assert_int_equal(jsonh_parse("{", 1, 8, &o, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(jsonh_parse("", 0, 8, &o, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(jsonh_parse("[1]", 3, 8, &o, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    jsonh_parse("{\"a\":1,\"a\":2}", 13, 8, &o, err, sizeof(err)),
	    DL_EINVAL);
	char deep[2001];
	for (int i = 0; i < 1000; i++) {
		deep[i] = '[';
		deep[1999 - i] = ']';
	}
	deep[2000] = '\0';
	assert_int_equal(jsonh_depth(deep, 2000, 10), 11);
	assert_int_equal(jsonh_parse(deep, 2000, 10, &o, err, sizeof(err)),
			 DL_ELIMIT);
	/* brackets inside strings do not count */
	assert_int_equal(jsonh_depth("{\"a\":\"[[[[\\\"[[\"}", 16, 10), 1);
	const char nul[] = "{\"a\":\"x\\u0000y\"}";
	/* jansson refuses \u0000 unless asked: a NUL never reaches a name */
	assert_int_equal(jsonh_parse(nul, strlen(nul), 8, &o, err, sizeof(err)),
			 DL_EINVAL);
}

static void test_crc32c(void **state)
{
	(void)state;
	/* the standard check value of CRC-32C */
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(crc32c(0, "", 0), 0);
	/* incremental equals one shot, at every split and odd alignment */
	unsigned char data[1031];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 3);
	uint32_t whole = crc32c(0, data, sizeof(data));
	for (size_t split = 0; split < sizeof(data); split += 37)
		assert_int_equal(crc32c(crc32c(0, data, split), data + split,
					sizeof(data) - split),
				 whole);
	data[500] ^= 1;
	assert_int_not_equal(crc32c(0, data, sizeof(data)), whole);
}

static void test_clock(void **state)
{
	char s[32];
	(void)state;
	uint64_t a = clock_now_ms(), b = clock_now_ms();
	assert_true(b >= a);
	assert_true(clock_now_ns() > 0);
	assert_string_equal(clock_format_wall(0, s, sizeof(s)),
			    "1970-01-01T00:00:00.000Z");
	assert_string_equal(clock_format_wall(1763726400123ull, s, sizeof(s)),
			    "2025-11-21T12:00:00.123Z");
}

static void test_fsutil(void **state)
{
	char dir[] = "/tmp/dlaunch-fs.XXXXXX";
	char path[300], nested[256];
	char *data;
	size_t len;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(nested, sizeof(nested), "%s/a/b/c", dir);
	assert_int_equal(fs_mkdir_p(nested, 0755), 0);
	assert_int_equal(fs_mkdir_p(nested, 0755), 0); /* idempotent */
	snprintf(path, sizeof(path), "%s/file", nested);
	assert_int_equal(fs_write_file_atomic(path, "one", 3, 0644), 0);
	assert_int_equal(fs_write_file_atomic(path, "second", 6, 0644), 0);
	assert_int_equal(fs_read_file(path, 100, &data, &len), 0);
	assert_int_equal(len, 6);
	assert_string_equal(data, "second");
	free(data);
	assert_int_equal(fs_read_file(path, 5, &data, &len), DL_ELIMIT);
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(fs_read_file(path, 5, &data, &len), DL_ENOTFOUND);
	assert_int_equal(fs_fsync_dir(nested), 0);
	assert_int_equal(fs_mkdir_p("", 0755), DL_EINVAL);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

/* token_case writes contents (n bytes) to path and reads it as a token */
static int token_case(const char *path, const char *contents, size_t n,
		      char **tok, char *err, size_t es)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(contents, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
	return fs_read_token(path, tok, err, es);
}

#define TOKEN_OK(contents, want)                                               \
	do {                                                                   \
		assert_int_equal(token_case(path, contents,                    \
					    sizeof(contents) - 1, &tok, err,   \
					    sizeof(err)),                      \
				 0);                                           \
		assert_string_equal(tok, want);                                \
		free(tok);                                                     \
	} while (0)
#define TOKEN_BAD(contents, code, text)                                        \
	do {                                                                   \
		assert_int_equal(token_case(path, contents,                    \
					    sizeof(contents) - 1, &tok, err,   \
					    sizeof(err)),                      \
				 code);                                        \
		assert_null(tok);                                              \
		assert_non_null(strstr(err, text));                            \
	} while (0)

static void test_read_token(void **state)
{
	char path[] = "/tmp/dlaunch-token.XXXXXX";
	char err[256], big[5000];
	char *tok;
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	close(fd);
	TOKEN_OK("s3cret", "s3cret");
	TOKEN_OK("s3cret\n", "s3cret");
	TOKEN_OK("  s3cret \t\r\n\n  \n", "s3cret");
	TOKEN_OK("a b", "a b"); /* inner blanks are the token's own */
	TOKEN_BAD("", DL_EINVAL, "is empty");
	TOKEN_BAD(" \n\n", DL_EINVAL, "is empty");
	TOKEN_BAD("one\ntwo\n", DL_EINVAL, "more than one line");
	TOKEN_BAD("\nsecond", DL_EINVAL, "more than one line");
	TOKEN_BAD("to\x01ken", DL_EINVAL, "control character");
	TOKEN_BAD("tok\0en", DL_EINVAL, "NUL byte");
	memset(big, 'x', sizeof(big));
	assert_int_equal(
	    token_case(path, big, sizeof(big), &tok, err, sizeof(err)),
	    DL_ELIMIT);
	assert_non_null(strstr(err, "larger than 4 KiB"));
	unlink(path);
	assert_int_equal(fs_read_token(path, &tok, err, sizeof(err)),
			 DL_ENOTFOUND);
	assert_non_null(strstr(err, "no such file"));
	assert_non_null(strstr(err, path));
}

static void test_log_and_errors(void **state)
{
	enum log_level l;
	(void)state;
	assert_int_equal(log_level_parse("DEBUG", &l), 0);
	assert_int_equal(l, LOG_DEBUG);
	assert_int_equal(log_level_parse("loud", &l), DL_EINVAL);
	log_set_level(LOG_WARN);
	assert_true(log_enabled(LOG_ERROR));
	assert_false(log_enabled(LOG_INFO));
	log_set_level(LOG_INFO);
	assert_string_equal(dl_strerror(DL_ESTALE), "stale round");
	assert_string_equal(dl_strerror(-999), "unknown error");
	for (int c = 0; c >= DL_ENOTSUP; c--)
		assert_string_not_equal(dl_strerror(c), "unknown error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_u64),
	    cmocka_unit_test(test_parse_int),
	    cmocka_unit_test(test_parse_double_bool),
	    cmocka_unit_test(test_parse_duration),
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_parse_host_port),
	    cmocka_unit_test(test_buf),
	    cmocka_unit_test(test_jsonh),
	    cmocka_unit_test(test_crc32c),
	    cmocka_unit_test(test_clock),
	    cmocka_unit_test(test_fsutil),
	    cmocka_unit_test(test_read_token),
	    cmocka_unit_test(test_log_and_errors),
	};
	log_init("test_common");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
