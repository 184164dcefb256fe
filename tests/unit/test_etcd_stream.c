/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_stream.c - the splitter of a stream of JSON objects
 * (agent/etcd/etcd_stream.c) on the recorded watch and keepalive streams
 * fed in every split, on hand-made strings, at its limits and on errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/etcd/etcd_proto.h"
#include "dlaunch/error.h"
#include "etcd_proto_fix.h"

static char err[512];

/* what the splitter yields, objects separated by '|' */
struct got {
	char text[16384];
	size_t len;
	int n;
	int stop_at; /* return an error from this object on (0: never) */
};

static int collect(void *arg, const char *obj, size_t len)
{
	struct got *g = arg;

	g->n++;
	if (g->stop_at && g->n >= g->stop_at)
		return DL_ECLOSED;
	assert_true(g->len + len + 1 < sizeof(g->text));
	memcpy(g->text + g->len, obj, len);
	g->len += len;
	g->text[g->len++] = '|';
	g->text[g->len] = '\0';
	return 0;
}

/* expected: the lines of data, each followed by '|' */
static void lines_of(const char *data, size_t len, struct got *want)
{
	memset(want, 0, sizeof(*want));
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			if (want->len > 0 && want->text[want->len - 1] != '|') {
				want->text[want->len++] = '|';
				want->n++;
			}
			continue;
		}
		want->text[want->len++] = data[i];
	}
	if (want->len > 0 && want->text[want->len - 1] != '|') {
		want->text[want->len++] = '|';
		want->n++;
	}
	want->text[want->len] = '\0';
}

static void split_check(const char *file, int expect_n)
{
	struct etcd_splitter s;
	struct got want, got;
	size_t len;
	char *d = slurp(file, &len);

	lines_of(d, len, &want);
	assert_int_equal(want.n, expect_n);
	etcd_splitter_init(&s, 64 * 1024);

	/* one chunk */
	memset(&got, 0, sizeof(got));
	assert_int_equal(
	    etcd_splitter_feed(&s, d, len, collect, &got, err, sizeof(err)), 0);
	assert_string_equal(got.text, want.text);
	assert_int_equal(etcd_splitter_pending(&s), 0);

	/* two chunks, cut at every byte boundary */
	for (size_t cut = 0; cut <= len; cut++) {
		memset(&got, 0, sizeof(got));
		assert_int_equal(etcd_splitter_feed(&s, d, cut, collect, &got,
						    err, sizeof(err)),
				 0);
		assert_int_equal(etcd_splitter_feed(&s, d + cut, len - cut,
						    collect, &got, err,
						    sizeof(err)),
				 0);
		if (strcmp(got.text, want.text) != 0)
			fail_msg("%s cut at %zu: got %d objects", file, cut,
				 got.n);
		assert_int_equal(etcd_splitter_pending(&s), 0);
	}

	/* byte by byte, pending growing inside an object */
	memset(&got, 0, sizeof(got));
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(etcd_splitter_feed(&s, d + i, 1, collect, &got,
						    err, sizeof(err)),
				 0);
		if (i == 10)
			assert_int_equal(etcd_splitter_pending(&s), 11);
	}
	assert_string_equal(got.text, want.text);
	assert_int_equal(etcd_splitter_pending(&s), 0);

	/* with the newlines gone, and whitespace of every kind between */
	{
		char *packed = malloc(len * 2 + 1);
		size_t o = 0;
		assert_non_null(packed);
		for (size_t i = 0; i < len; i++) {
			if (d[i] == '\n') {
				if (i % 2)
					packed[o++] = '\r', packed[o++] = '\t';
				continue;
			}
			packed[o++] = d[i];
		}
		memset(&got, 0, sizeof(got));
		for (size_t i = 0; i < o; i += 7)
			assert_int_equal(
			    etcd_splitter_feed(&s, packed + i,
					       o - i < 7 ? o - i : 7, collect,
					       &got, err, sizeof(err)),
			    0);
		assert_string_equal(got.text, want.text);
		free(packed);
	}
	etcd_splitter_release(&s);
	free(d);
}

static void test_splitter_recorded(void **state)
{
	(void)state;
	split_check(REC "watch_stream.jsonl", 9);
	split_check(REC "watch_compacted.jsonl", 2);
	split_check(REC "lease_keepalive.json", 1);
}

static void test_splitter_strings(void **state)
{
	static const char in[] = " {\"a\":\"}{\\\"]\"}\n{\"b\":[{},\"\\\\\"]} ";
	struct etcd_splitter s;
	struct got got;
	(void)state;

	etcd_splitter_init(&s, 1024);
	for (size_t cut = 0; cut < sizeof(in) - 1; cut++) {
		memset(&got, 0, sizeof(got));
		assert_int_equal(etcd_splitter_feed(&s, in, cut, collect, &got,
						    err, sizeof(err)),
				 0);
		assert_int_equal(
		    etcd_splitter_feed(&s, in + cut, sizeof(in) - 1 - cut,
				       collect, &got, err, sizeof(err)),
		    0);
		assert_string_equal(got.text, "{\"a\":\"}{\\\"]\"}|"
					      "{\"b\":[{},\"\\\\\"]}|");
	}
	etcd_splitter_release(&s);
}

static void test_splitter_limits(void **state)
{
	struct etcd_splitter s;
	struct got want, got;
	size_t len, longest = 0, run = 0, longest_at = 0, n_before = 0;
	char *d = slurp(REC "watch_stream.jsonl", &len);
	(void)state;

	lines_of(d, len, &want);
	for (size_t i = 0; i < len; i++) {
		if (d[i] != '\n') {
			run++;
			continue;
		}
		if (run > longest) {
			longest = run;
			longest_at = i + 1 - run - 1;
		}
		run = 0;
	}
	for (size_t i = 0; i < longest_at; i++)
		n_before += d[i] == '\n';

	/* exactly the longest object fits, byte by byte too */
	etcd_splitter_init(&s, longest);
	memset(&got, 0, sizeof(got));
	for (size_t i = 0; i < len; i++)
		assert_int_equal(etcd_splitter_feed(&s, d + i, 1, collect, &got,
						    err, sizeof(err)),
				 0);
	assert_string_equal(got.text, want.text);
	etcd_splitter_release(&s);

	/* one byte less: the objects before it, then DL_ELIMIT, then the
	 * splitter stays stopped until reset */
	etcd_splitter_init(&s, longest - 1);
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		int rc = 0;
		memset(&got, 0, sizeof(got));
		if (bytewise) {
			for (size_t i = 0; i < len && rc == 0; i++)
				rc = etcd_splitter_feed(&s, d + i, 1, collect,
							&got, err, sizeof(err));
		} else {
			rc = etcd_splitter_feed(&s, d, len, collect, &got, err,
						sizeof(err));
		}
		assert_int_equal(rc, DL_ELIMIT);
		assert_non_null(strstr(err, "an object over"));
		assert_int_equal(got.n, (int)n_before);
		assert_int_equal(etcd_splitter_pending(&s), 0);
		assert_int_equal(etcd_splitter_feed(&s, "{}", 2, collect, &got,
						    err, sizeof(err)),
				 DL_ELIMIT);
		assert_int_equal(got.n, (int)n_before);
		etcd_splitter_reset(&s);
	}
	/* after reset, a new stream goes through */
	memset(&got, 0, sizeof(got));
	assert_int_equal(etcd_splitter_feed(&s, "{}\n{\"a\":1}", 10, collect,
					    &got, err, sizeof(err)),
			 0);
	assert_string_equal(got.text, "{}|{\"a\":1}|");
	etcd_splitter_release(&s);
	free(d);
}

static void test_splitter_errors(void **state)
{
	struct etcd_splitter s;
	struct got got;
	(void)state;

	etcd_splitter_init(&s, 1024);
	memset(&got, 0, sizeof(got));
	assert_int_equal(
	    etcd_splitter_feed(&s, "{}x{}", 5, collect, &got, err, sizeof(err)),
	    DL_EPROTO);
	assert_non_null(strstr(err, "byte 0x78 between objects"));
	assert_int_equal(got.n, 1);
	assert_int_equal(
	    etcd_splitter_feed(&s, "{}", 2, collect, &got, err, sizeof(err)),
	    DL_EPROTO);
	assert_int_equal(got.n, 1);
	etcd_splitter_reset(&s);
	/* a stray closing brace, a top-level array */
	assert_int_equal(
	    etcd_splitter_feed(&s, "}", 1, collect, &got, err, sizeof(err)),
	    DL_EPROTO);
	etcd_splitter_reset(&s);
	assert_int_equal(
	    etcd_splitter_feed(&s, "[]", 2, collect, &got, err, sizeof(err)),
	    DL_EPROTO);
	etcd_splitter_reset(&s);
	memset(&got, 0, sizeof(got));
	assert_int_equal(
	    etcd_splitter_feed(&s, "{[}]", 4, collect, &got, err, sizeof(err)),
	    DL_EPROTO);
	assert_non_null(strstr(err, "closed by ']'"));
	assert_int_equal(got.n, 0);
	etcd_splitter_reset(&s);

	/* the callback's error stops the feed and the splitter */
	memset(&got, 0, sizeof(got));
	got.stop_at = 2;
	assert_int_equal(etcd_splitter_feed(&s, "{}{\"b\":2}{}", 11, collect,
					    &got, err, sizeof(err)),
			 DL_ECLOSED);
	assert_int_equal(got.n, 2);
	assert_int_equal(
	    etcd_splitter_feed(&s, "{}", 2, collect, &got, err, sizeof(err)),
	    DL_ECLOSED);
	assert_int_equal(got.n, 2);
	etcd_splitter_reset(&s);

	/* a cut stream leaves its object pending; reset forgets it */
	memset(&got, 0, sizeof(got));
	assert_int_equal(etcd_splitter_feed(&s, "{\"a\":\"}", 7, collect, &got,
					    err, sizeof(err)),
			 0);
	assert_int_equal(etcd_splitter_pending(&s), 7);
	assert_int_equal(got.n, 0);
	etcd_splitter_reset(&s);
	assert_int_equal(etcd_splitter_pending(&s), 0);
	assert_int_equal(
	    etcd_splitter_feed(&s, "{}", 2, collect, &got, err, sizeof(err)),
	    0);
	assert_string_equal(got.text, "{}|");
	etcd_splitter_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_splitter_recorded),
	    cmocka_unit_test(test_splitter_strings),
	    cmocka_unit_test(test_splitter_limits),
	    cmocka_unit_test(test_splitter_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
