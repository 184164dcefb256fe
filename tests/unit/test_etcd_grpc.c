/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_grpc.c - the LeaseKeepAlive messages in protobuf and gRPC's
 * framing (agent/etcd/etcd_grpc.c): requests byte for byte, answers
 * recorded from etcd 3.4 (a live lease, one it no longer has), hand-made
 * broken ones, and the reader fed in every split.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/etcd/etcd_grpc.h"
#include "dlaunch/error.h"

static char err[256];

/* two answers of etcd 3.4.23 on a LeaseKeepAlive stream (curl
 * --http2-prior-knowledge): lease 0x5cb1a23440f2061a renewed with 60 s
 * left, and lease 12345, which it does not have (TTL 0, left out) */
static const char live_hex[] =
    "00000000260a1808e385be81bc88abd77e10b1b9f380c791a5911a18092002"
    "109a8cc887c4c6e8d85c183c";
static const char gone_hex[] =
    "000000001d0a1808e385be81bc88abd77e10b1b9f380c791a5911a1809200210b960";

static size_t unhex(const char *h, unsigned char *out)
{
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(h + 2 * i, "%2x", &v), 1);
		out[i] = (unsigned char)v;
	}
	return n;
}

static void test_keepalive_frame(void **state)
{
	unsigned char f[ETCD_GRPC_KEEPALIVE_FRAME_MAX];
	static const unsigned char one[] = {0, 0, 0, 0, 2, 0x08, 0x01};
	static const unsigned char big[] = {0,	  0,	0,    0,    0x0a,
					    0x08, 0xff, 0xff, 0xff, 0xff,
					    0xff, 0xff, 0xff, 0xff, 0x7f};
	(void)state;
	assert_int_equal(etcd_grpc_keepalive_frame(1, f), sizeof(one));
	assert_memory_equal(f, one, sizeof(one));
	assert_int_equal(etcd_grpc_keepalive_frame(INT64_MAX, f), sizeof(big));
	assert_memory_equal(f, big, sizeof(big));
	/* 300 = 0xac 0x02 */
	assert_int_equal(etcd_grpc_keepalive_frame(300, f), 8);
	assert_int_equal(f[4], 3);
	assert_int_equal(f[6], 0xac);
	assert_int_equal(f[7], 0x02);
}

static void test_parse_recorded(void **state)
{
	unsigned char b[128];
	struct etcd_grpc_keepalive k;
	size_t n;
	(void)state;
	n = unhex(live_hex, b);
	assert_int_equal(b[4], n - 5);
	assert_int_equal(
	    etcd_grpc_parse_keepalive(b + 5, n - 5, &k, err, sizeof(err)), 0);
	assert_int_equal(k.id, 6679298067678758426LL);
	assert_int_equal(k.ttl, 60);
	n = unhex(gone_hex, b);
	assert_int_equal(
	    etcd_grpc_parse_keepalive(b + 5, n - 5, &k, err, sizeof(err)), 0);
	assert_int_equal(k.id, 12345);
	assert_int_equal(k.ttl, 0);
}

static void test_parse_broken(void **state)
{
	struct etcd_grpc_keepalive k;
	/* a field of every other wire type, skipped: 64-bit, 32-bit, and
	 * bytes; then ID 7 and TTL 5 */
	static const unsigned char skips[] = {
	    0x21, 1, 2, 3,    4, 5, 6, 7,    8, 0x2d, 1,
	    2,	  3, 4, 0x32, 2, 9, 9, 0x10, 7, 0x18, 5};
	static const unsigned char cut_varint[] = {0x10, 0x80};
	static const unsigned char id_as_bytes[] = {0x12, 1, 7};
	static const unsigned char long_bytes[] = {0x0a, 9, 1, 2};
	static const unsigned char group[] = {0x0b, 0x10, 7};
	static const unsigned char field0[] = {0x00, 1};
	static const unsigned char no_id[] = {0x18, 5};
	static const unsigned char neg_ttl[] = {0x10, 7,    0x18, 0xff, 0xff,
						0xff, 0xff, 0xff, 0xff, 0xff,
						0xff, 0xff, 0x01}; /* -1 */
	static const unsigned char eleven[] = {0x10, 0x80, 0x80, 0x80,
					       0x80, 0x80, 0x80, 0x80,
					       0x80, 0x80, 0x80, 0x01};
	(void)state;
	assert_int_equal(etcd_grpc_parse_keepalive(skips, sizeof(skips), &k,
						   err, sizeof(err)),
			 0);
	assert_int_equal(k.id, 7);
	assert_int_equal(k.ttl, 5);
#define BAD(m)                                                                 \
	assert_int_equal(                                                      \
	    etcd_grpc_parse_keepalive(m, sizeof(m), &k, err, sizeof(err)),     \
	    DL_EPROTO)
	BAD(cut_varint);
	assert_non_null(strstr(err, "not protobuf"));
	BAD(id_as_bytes);
	BAD(long_bytes);
	BAD(group);
	BAD(field0);
	BAD(no_id);
	assert_non_null(strstr(err, "lease 0"));
	BAD(neg_ttl);
	BAD(eleven);
#undef BAD
}

struct got {
	unsigned char msgs[8][64];
	size_t len[8];
	int n, stop_at;
};

static int collect(void *arg, const unsigned char *msg, size_t n)
{
	struct got *g = arg;
	if (g->stop_at && g->n + 1 >= g->stop_at)
		return DL_ECLOSED;
	assert_true(g->n < 8 && n <= 64);
	memcpy(g->msgs[g->n], msg, n);
	g->len[g->n++] = n;
	return 0;
}

static void test_reader_splits(void **state)
{
	unsigned char stream[256];
	size_t a, b, n;
	(void)state;
	a = unhex(live_hex, stream);
	b = unhex(gone_hex, stream + a);
	/* and an empty message after them */
	memset(stream + a + b, 0, 5);
	n = a + b + 5;
	/* every split into three pieces */
	for (size_t i = 0; i <= n; i++)
		for (size_t j = i; j <= n; j++) {
			struct etcd_grpc_reader r;
			struct got g;
			memset(&g, 0, sizeof(g));
			etcd_grpc_reader_init(&r);
			assert_int_equal(etcd_grpc_reader_feed(
					     &r, (char *)stream, i, collect, &g,
					     err, sizeof(err)),
					 0);
			assert_int_equal(etcd_grpc_reader_feed(
					     &r, (char *)stream + i, j - i,
					     collect, &g, err, sizeof(err)),
					 0);
			assert_int_equal(etcd_grpc_reader_feed(
					     &r, (char *)stream + j, n - j,
					     collect, &g, err, sizeof(err)),
					 0);
			assert_int_equal(g.n, 3);
			assert_int_equal(g.len[0], a - 5);
			assert_memory_equal(g.msgs[0], stream + 5, a - 5);
			assert_int_equal(g.len[1], b - 5);
			assert_memory_equal(g.msgs[1], stream + a + 5, b - 5);
			assert_int_equal(g.len[2], 0);
			assert_int_equal(etcd_grpc_reader_pending(&r), 0);
		}
}

static void test_reader_errors(void **state)
{
	struct etcd_grpc_reader r;
	struct got g;
	static const char compressed[] = {1, 0, 0, 0, 1, 0x08};
	static const char huge[] = {0, 0, 0, 0x10, 0x01};
	unsigned char two[128];
	size_t n;
	(void)state;
	memset(&g, 0, sizeof(g));
	etcd_grpc_reader_init(&r);
	assert_int_equal(etcd_grpc_reader_feed(&r, compressed,
					       sizeof(compressed), collect, &g,
					       err, sizeof(err)),
			 DL_EPROTO);
	assert_non_null(strstr(err, "compressed"));
	/* and it stays failed */
	assert_int_equal(etcd_grpc_reader_feed(&r, "\0\0\0\0\0", 5, collect, &g,
					       err, sizeof(err)),
			 DL_EPROTO);
	assert_int_equal(g.n, 0);
	etcd_grpc_reader_init(&r);
	assert_int_equal(etcd_grpc_reader_feed(&r, huge, sizeof(huge), collect,
					       &g, err, sizeof(err)),
			 DL_EPROTO);
	assert_non_null(strstr(err, "over the limit"));
	/* a callback's error stops the feed and is returned */
	n = unhex(live_hex, two);
	memcpy(two + n, two, n);
	etcd_grpc_reader_init(&r);
	g.stop_at = 2;
	assert_int_equal(etcd_grpc_reader_feed(&r, (char *)two, 2 * n, collect,
					       &g, err, sizeof(err)),
			 DL_ECLOSED);
	assert_int_equal(g.n, 1);
	/* a message cut short is pending */
	etcd_grpc_reader_init(&r);
	g.stop_at = 0;
	g.n = 0;
	assert_int_equal(etcd_grpc_reader_feed(&r, (char *)two, n - 3, collect,
					       &g, err, sizeof(err)),
			 0);
	assert_int_equal(g.n, 0);
	assert_int_equal(etcd_grpc_reader_pending(&r), n - 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keepalive_frame),
	    cmocka_unit_test(test_parse_recorded),
	    cmocka_unit_test(test_parse_broken),
	    cmocka_unit_test(test_reader_splits),
	    cmocka_unit_test(test_reader_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
