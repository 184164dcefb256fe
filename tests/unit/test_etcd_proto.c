/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_proto.c - the builders of the etcd gateway protocol layer
 * (agent/etcd/etcd_proto.c) against the exact bodies the gateway
 * expects, what they refuse, and base64 both ways. The parsers are
 * test_etcd_answer's, the stream splitter test_etcd_stream's.
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

static char err[512];

/* body_is checks a built body against its exact compact encoding */
static void body_is(json_t *body, const char *want)
{
	char *s = etcd_body_dump(body);
	assert_non_null(s);
	assert_string_equal(s, want);
	free(s);
	json_decref(body);
}

/* ------------------------------------------------------------ builders */

static void test_prefix_end(void **state)
{
	unsigned char out[8];
	(void)state;

	assert_int_equal(etcd_prefix_end("/job/", 5, out), 5);
	assert_memory_equal(out, "/job0", 5);
	assert_int_equal(etcd_prefix_end("a\xff", 2, out), 1);
	assert_memory_equal(out, "b", 1);
	assert_int_equal(etcd_prefix_end("a\xfe\xff\xff", 4, out), 2);
	assert_memory_equal(out, "a\xff", 2);
	assert_int_equal(etcd_prefix_end("\xff\xff", 2, out), 1);
	assert_int_equal(out[0], 0);
	assert_int_equal(etcd_prefix_end("", 0, out), 1);
	assert_int_equal(out[0], 0);
}

static void test_build_kv(void **state)
{
	unsigned char end[8];
	size_t end_len = etcd_prefix_end("/rec/", 5, end);
	json_t *b;
	(void)state;

	assert_int_equal(
	    etcd_build_range("/rec/a", 6, NULL, 0, 0, 0, &b, err, sizeof(err)),
	    0);
	body_is(b, "{\"key\":\"L3JlYy9h\"}");
	assert_int_equal(etcd_build_range("/rec/", 5, end, end_len, 1, 5, &b,
					  err, sizeof(err)),
			 0);
	body_is(b, "{\"key\":\"L3JlYy8=\",\"range_end\":\"L3JlYzA=\","
		   "\"limit\":\"1\",\"revision\":\"5\"}");
	/* every key from "\0" on: range_end "\0" is AA== */
	assert_int_equal(
	    etcd_build_range("\xff", 1, "\0", 1, 0, 0, &b, err, sizeof(err)),
	    0);
	body_is(b, "{\"key\":\"/w==\",\"range_end\":\"AA==\"}");
	assert_int_equal(etcd_build_put("/rec/a", 6, "hello", 5, INT64_MAX, &b,
					err, sizeof(err)),
			 0);
	body_is(b, "{\"key\":\"L3JlYy9h\",\"value\":\"aGVsbG8=\","
		   "\"lease\":\"9223372036854775807\"}");
	/* an empty value is the zero value: left out */
	assert_int_equal(etcd_build_put("k", 1, "", 0, 0, &b, err, sizeof(err)),
			 0);
	body_is(b, "{\"key\":\"aw==\"}");
	assert_int_equal(
	    etcd_build_delete("/rec/", 5, end, end_len, &b, err, sizeof(err)),
	    0);
	body_is(b, "{\"key\":\"L3JlYy8=\",\"range_end\":\"L3JlYzA=\"}");

	struct etcd_op op = {.kind = ETCD_OP_RANGE,
			     .key = {"/rec/", 5},
			     .range_end = {end, end_len},
			     .count_only = 1,
			     .keys_only = 1,
			     .serializable = 1};
	assert_int_equal(etcd_build_op(&op, &b, err, sizeof(err)), 0);
	body_is(b, "{\"key\":\"L3JlYy8=\",\"range_end\":\"L3JlYzA=\","
		   "\"keys_only\":true,\"count_only\":true,"
		   "\"serializable\":true}");
	struct etcd_op del = {
	    .kind = ETCD_OP_DELETE, .key = {"/rec/b", 6}, .prev_kv = 1};
	assert_int_equal(etcd_build_op(&del, &b, err, sizeof(err)), 0);
	body_is(b, "{\"key\":\"L3JlYy9i\",\"prev_kv\":true}");
}

static void test_build_txn(void **state)
{
	struct etcd_compare cmp[] = {
	    {.key = {"/rec/a", 6},
	     .target = ETCD_CMP_VALUE,
	     .result = ETCD_CMP_EQUAL,
	     .value = {"hello", 5}},
	    {.key = {"/rec/lead", 9},
	     .target = ETCD_CMP_CREATE,
	     .result = ETCD_CMP_NOT_EQUAL,
	     .number = 0},
	    {.key = {"/rec/lead", 9},
	     .target = ETCD_CMP_MOD,
	     .result = ETCD_CMP_LESS,
	     .number = 17},
	    {.key = {"/rec/lead", 9},
	     .target = ETCD_CMP_LEASE,
	     .result = ETCD_CMP_EQUAL,
	     .number = 694},
	    {.key = {"k", 1},
	     .target = ETCD_CMP_VERSION,
	     .result = ETCD_CMP_GREATER,
	     .number = 2},
	    {.key = {"k", 1}, .target = ETCD_CMP_VALUE, .value = {NULL, 0}},
	};
	struct etcd_op ok[] = {
	    {.kind = ETCD_OP_PUT,
	     .key = {"/rec/c", 6},
	     .value = {"three", 5},
	     .lease = 694},
	    {.kind = ETCD_OP_DELETE, .key = {"/rec/b", 6}},
	};
	struct etcd_op bad[] = {
	    {.kind = ETCD_OP_RANGE, .key = {"/rec/a", 6}},
	};
	json_t *b, *doc;
	(void)state;

	assert_int_equal(
	    etcd_build_txn(cmp, 6, ok, 2, bad, 1, &b, err, sizeof(err)), 0);
	body_is(
	    b,
	    "{\"compare\":["
	    "{\"key\":\"L3JlYy9h\",\"target\":\"VALUE\",\"result\":\"EQUAL\","
	    "\"value\":\"aGVsbG8=\"},"
	    "{\"key\":\"L3JlYy9sZWFk\",\"target\":\"CREATE\","
	    "\"result\":\"NOT_EQUAL\",\"create_revision\":\"0\"},"
	    "{\"key\":\"L3JlYy9sZWFk\",\"target\":\"MOD\",\"result\":\"LESS\","
	    "\"mod_revision\":\"17\"},"
	    "{\"key\":\"L3JlYy9sZWFk\",\"target\":\"LEASE\","
	    "\"result\":\"EQUAL\",\"lease\":\"694\"},"
	    "{\"key\":\"aw==\",\"target\":\"VERSION\",\"result\":\"GREATER\","
	    "\"version\":\"2\"},"
	    "{\"key\":\"aw==\",\"target\":\"VALUE\",\"result\":\"EQUAL\","
	    "\"value\":\"\"}],"
	    "\"success\":["
	    "{\"request_put\":{\"key\":\"L3JlYy9j\",\"value\":\"dGhyZWU=\","
	    "\"lease\":\"694\"}},"
	    "{\"request_delete_range\":{\"key\":\"L3JlYy9i\"}}],"
	    "\"failure\":[{\"request_range\":{\"key\":\"L3JlYy9h\"}}]}");
	/* no compare: always succeeds; empty lists are left out */
	assert_int_equal(
	    etcd_build_txn(NULL, 0, ok + 1, 1, NULL, 0, &b, err, sizeof(err)),
	    0);
	body_is(b, "{\"success\":[{\"request_delete_range\":"
		   "{\"key\":\"L3JlYy9i\"}}]}");
	/* a JSON document put alone, with and without a lease */
	doc = json_pack("{s:i}", "a", 1);
	assert_int_equal(
	    etcd_build_put_json("/rec/c", doc, 694, &b, err, sizeof(err)), 0);
	body_is(b, "{\"success\":[{\"request_put\":{\"key\":\"L3JlYy9j\","
		   "\"value\":\"eyJhIjoxfQ==\",\"lease\":\"694\"}}]}");
	assert_int_equal(
	    etcd_build_put_json("/rec/c", doc, 0, &b, err, sizeof(err)), 0);
	body_is(b, "{\"success\":[{\"request_put\":{\"key\":\"L3JlYy9j\","
		   "\"value\":\"eyJhIjoxfQ==\"}}]}");
	json_decref(doc);
}

static void test_build_lease_auth_watch(void **state)
{
	unsigned char end[8];
	size_t end_len = etcd_prefix_end("/rec/", 5, end);
	struct etcd_watch_create w = {.key = {"/rec/", 5},
				      .range_end = {end, end_len},
				      .start_revision = 42,
				      .prev_kv = 1,
				      .progress_notify = 1};
	struct etcd_watch_create now = {.key = {"/rec/a", 6}};
	json_t *b;
	(void)state;

	assert_int_equal(etcd_build_lease_grant(30, 0, &b, err, sizeof(err)),
			 0);
	body_is(b, "{\"TTL\":\"30\"}");
	assert_int_equal(etcd_build_lease_grant(5, 7, &b, err, sizeof(err)), 0);
	body_is(b, "{\"TTL\":\"5\",\"ID\":\"7\"}");
	assert_int_equal(etcd_build_lease_keepalive(2297576931755550735LL, &b,
						    err, sizeof(err)),
			 0);
	body_is(b, "{\"ID\":\"2297576931755550735\"}");
	assert_int_equal(etcd_build_lease_revoke(9, &b, err, sizeof(err)), 0);
	body_is(b, "{\"ID\":\"9\"}");
	assert_int_equal(
	    etcd_build_authenticate("root", "p\"w", &b, err, sizeof(err)), 0);
	body_is(b, "{\"name\":\"root\",\"password\":\"p\\\"w\"}");
	assert_int_equal(etcd_build_watch_create(&w, &b, err, sizeof(err)), 0);
	body_is(b, "{\"create_request\":{\"key\":\"L3JlYy8=\","
		   "\"range_end\":\"L3JlYzA=\",\"start_revision\":\"42\","
		   "\"progress_notify\":true,\"prev_kv\":true}}");
	assert_int_equal(etcd_build_watch_create(&now, &b, err, sizeof(err)),
			 0);
	body_is(b, "{\"create_request\":{\"key\":\"L3JlYy9h\"}}");
	assert_int_equal(etcd_build_watch_cancel(0, &b, err, sizeof(err)), 0);
	body_is(b, "{\"cancel_request\":{\"watch_id\":\"0\"}}");
	assert_int_equal(etcd_build_watch_cancel(12, &b, err, sizeof(err)), 0);
	body_is(b, "{\"cancel_request\":{\"watch_id\":\"12\"}}");
}

static void test_build_refuses(void **state)
{
	static char big[ETCD_VALUE_MAX + 1];
	struct etcd_op ops[ETCD_RESPONSES_MAX + 1];
	struct etcd_op bad_kind = {.kind = (enum etcd_op_kind)9,
				   .key = {"k", 1}};
	struct etcd_compare bad_cmp = {
	    .key = {"k", 1}, .target = ETCD_CMP_MOD, .number = -1};
	struct etcd_compare no_key = {.target = ETCD_CMP_MOD};
	struct etcd_watch_create w = {.key = {"k", 1}, .start_revision = -2};
	json_t *b = NULL;
	(void)state;

	memset(big, 'x', sizeof(big));
	for (size_t i = 0; i < ETCD_RESPONSES_MAX + 1; i++)
		ops[i] =
		    (struct etcd_op){.kind = ETCD_OP_RANGE, .key = {"k", 1}};
	assert_int_equal(
	    etcd_build_range("", 0, NULL, 0, 0, 0, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "key is empty"));
	assert_int_equal(
	    etcd_build_range(NULL, 3, NULL, 0, 0, 0, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(etcd_build_range(big, ETCD_KEY_MAX + 1, NULL, 0, 0, 0,
					  &b, err, sizeof(err)),
			 DL_ELIMIT);
	assert_int_equal(etcd_build_range(big, ETCD_KEY_MAX, NULL, 0, 0, 0, &b,
					  err, sizeof(err)),
			 0);
	json_decref(b);
	assert_int_equal(
	    etcd_build_range("k", 1, NULL, 0, -1, 0, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(
	    etcd_build_range("k", 1, NULL, 0, 0, -1, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(etcd_build_put("k", 1, big, ETCD_VALUE_MAX + 1, 0, &b,
					err, sizeof(err)),
			 DL_ELIMIT);
	assert_int_equal(
	    etcd_build_put("k", 1, "v", 1, -5, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(etcd_build_op(&bad_kind, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(etcd_build_txn(NULL, 0, ops, ETCD_RESPONSES_MAX + 1,
					NULL, 0, &b, err, sizeof(err)),
			 DL_ELIMIT);
	assert_int_equal(etcd_build_txn(NULL, 0, &bad_kind, 1, NULL, 0, &b, err,
					sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    etcd_build_txn(&bad_cmp, 1, NULL, 0, NULL, 0, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(
	    etcd_build_txn(&no_key, 1, NULL, 0, NULL, 0, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(etcd_build_lease_grant(0, 0, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(etcd_build_lease_grant(10, -1, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(etcd_build_lease_keepalive(0, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(etcd_build_lease_revoke(-3, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    etcd_build_authenticate("", "pw", &b, err, sizeof(err)), DL_EINVAL);
	assert_int_equal(
	    etcd_build_authenticate("root", NULL, &b, err, sizeof(err)),
	    DL_EINVAL);
	assert_int_equal(
	    etcd_build_authenticate("r\xff", "pw", &b, err, sizeof(err)),
	    DL_EINVAL);
	big[2000] = '\0';
	assert_int_equal(
	    etcd_build_authenticate("root", big, &b, err, sizeof(err)),
	    DL_ELIMIT);
	assert_int_equal(etcd_build_watch_create(&w, &b, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(etcd_build_watch_cancel(-1, &b, err, sizeof(err)),
			 DL_EINVAL);
}

/* every byte value survives a put body's base64 and a range answer's */
static void test_base64_round_trip(void **state)
{
	unsigned char key[256];
	struct etcd_range_response r;
	json_t *b, *answer;
	char *ans;
	(void)state;

	for (int i = 0; i < 256; i++)
		key[i] = (unsigned char)(255 - i);
	for (size_t n = 1; n <= sizeof(key); n++) {
		assert_int_equal(
		    etcd_build_put(key, n, key, n - 1, 0, &b, err, sizeof(err)),
		    0);
		answer = json_pack("{s:{s:s},s:[O],s:s}", "header", "revision",
				   "3", "kvs", b, "count", "1");
		assert_non_null(answer);
		ans = json_dumps(answer, JSON_COMPACT);
		json_decref(answer);
		assert_non_null(ans);
		assert_int_equal(
		    etcd_parse_range(ans, strlen(ans), &r, err, sizeof(err)),
		    0);
		assert_int_equal(r.n_kvs, 1);
		assert_int_equal(r.kvs[0].key_len, n);
		assert_memory_equal(r.kvs[0].key, key, n);
		assert_int_equal(r.kvs[0].value_len, n - 1);
		assert_memory_equal(r.kvs[0].value, key, n - 1);
		assert_int_equal(r.kvs[0].value[n - 1], '\0');
		etcd_range_response_release(&r);
		free(ans);
		json_decref(b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prefix_end),
	    cmocka_unit_test(test_build_kv),
	    cmocka_unit_test(test_build_txn),
	    cmocka_unit_test(test_build_lease_auth_watch),
	    cmocka_unit_test(test_build_refuses),
	    cmocka_unit_test(test_base64_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
