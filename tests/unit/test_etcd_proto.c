/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_proto.c - the etcd gateway protocol layer (agent/etcd/etcd_proto.c)
 * on the answers a real etcd 3.4 gave (tests/etcd/recorded/, made by
 * tests/etcd/record.sh and read at test time from the repository root,
 * where tests/run.sh runs unit tests), on hand-made bad ones, and the
 * builders against the exact bodies the gateway expects.
 *
 * Ids that change with every recording (cluster, member, lease) are
 * checked against each other, never against a constant; revisions follow
 * from the script's steps and are checked as they are.
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
#include "dlaunch/fsutil.h"

#define REC "tests/etcd/recorded/"

static char err[512];

/* slurp reads a recorded answer; *len its size */
static char *slurp(const char *path, size_t *len)
{
	char *data = NULL;
	if (fs_read_file(path, 1 << 24, &data, len) != 0)
		fail_msg("cannot read %s (run from the repository root)", path);
	return data;
}

/* body_is checks a built body against its exact compact encoding */
static void body_is(json_t *body, const char *want)
{
	char *s = etcd_body_dump(body);
	assert_non_null(s);
	assert_string_equal(s, want);
	free(s);
	json_decref(body);
}

static void kv_is(const struct etcd_kv *kv, const char *key, const char *value,
		  int64_t create, int64_t mod, int64_t version)
{
	assert_int_equal(kv->key_len, strlen(key));
	assert_memory_equal(kv->key, key, kv->key_len);
	assert_int_equal(kv->value_len, strlen(value));
	assert_string_equal(kv->value, value);
	assert_int_equal(kv->create_revision, create);
	assert_int_equal(kv->mod_revision, mod);
	assert_int_equal(kv->version, version);
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

/* ------------------------------------------------- recorded answers */

static void test_recorded_range(void **state)
{
	struct etcd_range_response r, lr;
	struct etcd_lease_response g;
	size_t len;
	char *d;
	(void)state;

	d = slurp(REC "range_hit.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)), 0);
	assert_int_equal(r.header.revision, 4);
	assert_int_equal(r.header.raft_term, 2);
	assert_true(r.header.cluster_id != 0 && r.header.member_id != 0);
	assert_int_equal(r.n_kvs, 1);
	kv_is(&r.kvs[0], "/rec/a", "hello", 2, 2, 1);
	assert_int_equal(r.kvs[0].lease, 0);
	assert_int_equal(r.count, 1);
	assert_false(r.more);
	etcd_range_response_release(&r);
	free(d);

	d = slurp(REC "range_miss.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)), 0);
	assert_int_equal(r.header.revision, 4);
	assert_int_equal(r.n_kvs, 0);
	assert_null(r.kvs);
	assert_int_equal(r.count, 0);
	etcd_range_response_release(&r);
	free(d);

	d = slurp(REC "range_prefix_more.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)), 0);
	assert_int_equal(r.n_kvs, 1);
	assert_true(r.more);
	assert_int_equal(r.count, 2);
	etcd_range_response_release(&r);
	free(d);

	d = slurp(REC "range_count_only.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)), 0);
	assert_int_equal(r.n_kvs, 0);
	assert_int_equal(r.count, 2);
	etcd_range_response_release(&r);
	free(d);

	d = slurp(REC "range_with_token.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)), 0);
	kv_is(&r.kvs[0], "/rec/a", "hello", 2, 2, 1);
	etcd_range_response_release(&r);
	free(d);

	/* the key bound to the lease carries the id the grant gave */
	d = slurp(REC "lease_grant.json", &len);
	assert_int_equal(etcd_parse_lease_grant(d, len, &g, err, sizeof(err)),
			 0);
	free(d);
	d = slurp(REC "range_lease.json", &len);
	assert_int_equal(etcd_parse_range(d, len, &lr, err, sizeof(err)), 0);
	kv_is(&lr.kvs[0], "/rec/node", "up", 7, 7, 1);
	assert_true(g.id > 0);
	assert_int_equal(lr.kvs[0].lease, g.id);
	assert_int_equal(lr.header.cluster_id, g.header.cluster_id);
	etcd_range_response_release(&lr);
	free(d);
}

static void test_recorded_put_delete(void **state)
{
	struct etcd_put_response p;
	struct etcd_delete_response dr;
	size_t len;
	char *d;
	(void)state;

	d = slurp(REC "put.json", &len);
	assert_int_equal(etcd_parse_put(d, len, &p, err, sizeof(err)), 0);
	assert_int_equal(p.header.revision, 2);
	assert_false(p.has_prev_kv);
	etcd_put_response_release(&p);
	free(d);

	/* prev_kv asked of a new key: none */
	d = slurp(REC "put_prev_kv.json", &len);
	assert_int_equal(etcd_parse_put(d, len, &p, err, sizeof(err)), 0);
	assert_int_equal(p.header.revision, 3);
	assert_false(p.has_prev_kv);
	etcd_put_response_release(&p);
	free(d);

	d = slurp(REC "put_prev_kv_hit.json", &len);
	assert_int_equal(etcd_parse_put(d, len, &p, err, sizeof(err)), 0);
	assert_int_equal(p.header.revision, 4);
	assert_true(p.has_prev_kv);
	kv_is(&p.prev_kv, "/rec/b", "{\"x\":1}", 3, 3, 1);
	etcd_put_response_release(&p);
	free(d);

	d = slurp(REC "put_lease.json", &len);
	assert_int_equal(etcd_parse_put(d, len, &p, err, sizeof(err)), 0);
	assert_int_equal(p.header.revision, 7);
	etcd_put_response_release(&p);
	free(d);

	d = slurp(REC "deleterange.json", &len);
	assert_int_equal(etcd_parse_delete(d, len, &dr, err, sizeof(err)), 0);
	assert_int_equal(dr.header.revision, 9);
	assert_int_equal(dr.deleted, 1);
	assert_int_equal(dr.n_prev_kvs, 1);
	kv_is(&dr.prev_kvs[0], "/rec/b", "second", 3, 4, 2);
	etcd_delete_response_release(&dr);
	free(d);
}

static void test_recorded_txn(void **state)
{
	struct etcd_txn_response t;
	size_t len;
	char *d;
	(void)state;

	d = slurp(REC "txn_succeeded.json", &len);
	assert_int_equal(etcd_parse_txn(d, len, &t, err, sizeof(err)), 0);
	assert_true(t.succeeded);
	assert_int_equal(t.header.revision, 5);
	assert_int_equal(t.n_responses, 2);
	assert_int_equal(t.responses[0].kind, ETCD_OP_PUT);
	assert_int_equal(t.responses[0].put.header.revision, 5);
	assert_int_equal(t.responses[1].kind, ETCD_OP_RANGE);
	assert_int_equal(t.responses[1].range.n_kvs, 1);
	kv_is(&t.responses[1].range.kvs[0], "/rec/a", "hello", 2, 2, 1);
	etcd_txn_response_release(&t);
	free(d);

	/* a failed txn has no "succeeded" at all */
	d = slurp(REC "txn_failed.json", &len);
	assert_null(strstr(d, "succeeded"));
	assert_int_equal(etcd_parse_txn(d, len, &t, err, sizeof(err)), 0);
	assert_false(t.succeeded);
	assert_int_equal(t.header.revision, 6);
	assert_int_equal(t.n_responses, 2);
	assert_int_equal(t.responses[0].kind, ETCD_OP_RANGE);
	assert_int_equal(t.responses[0].range.header.revision, 5);
	kv_is(&t.responses[0].range.kvs[0], "/rec/a", "hello", 2, 2, 1);
	assert_int_equal(t.responses[1].kind, ETCD_OP_DELETE);
	assert_int_equal(t.responses[1].del.deleted, 1);
	kv_is(&t.responses[1].del.prev_kvs[0], "/rec/c", "three", 5, 5, 1);
	etcd_txn_response_release(&t);
	free(d);
}

static void test_recorded_lease_auth(void **state)
{
	struct etcd_lease_response g, k;
	struct etcd_header h;
	char token[256], small[4];
	size_t len;
	char *d;
	(void)state;

	d = slurp(REC "lease_grant.json", &len);
	assert_int_equal(etcd_parse_lease_grant(d, len, &g, err, sizeof(err)),
			 0);
	assert_int_equal(g.ttl_s, 30);
	assert_int_equal(g.header.revision, 6);
	free(d);

	d = slurp(REC "lease_keepalive.json", &len);
	assert_int_equal(
	    etcd_parse_lease_keepalive(d, len, &k, err, sizeof(err)), 0);
	assert_int_equal(k.id, g.id);
	assert_int_equal(k.ttl_s, 30);
	free(d);

	d = slurp(REC "lease_keepalive_expired.json", &len);
	assert_int_equal(
	    etcd_parse_lease_keepalive(d, len, &k, err, sizeof(err)),
	    DL_ENOTFOUND);
	assert_non_null(strstr(err, "has expired"));
	assert_int_equal(k.id, g.id);
	free(d);

	d = slurp(REC "lease_revoke.json", &len);
	assert_int_equal(etcd_parse_header_only(d, len, &h, err, sizeof(err)),
			 0);
	assert_int_equal(h.revision, 8);
	free(d);
	d = slurp(REC "compaction.json", &len);
	assert_int_equal(etcd_parse_header_only(d, len, &h, err, sizeof(err)),
			 0);
	assert_int_equal(h.revision, 9);
	free(d);

	d = slurp(REC "auth_token.json", &len);
	assert_int_equal(etcd_parse_authenticate(d, len, token, sizeof(token),
						 err, sizeof(err)),
			 0);
	assert_true(strlen(token) > 0);
	assert_non_null(strstr(d, token));
	assert_int_equal(etcd_parse_authenticate(d, len, small, sizeof(small),
						 err, sizeof(err)),
			 DL_ELIMIT);
	assert_string_equal(small, "");
	free(d);
}

static void test_recorded_errors(void **state)
{
	static const struct {
		const char *file;
		int grpc, dl;
		const char *text;
	} cases[] = {
	    {"error_auth_disabled.json", 9, DL_ECONFLICT,
	     "authentication is not enabled"},
	    {"error_auth_failed.json", 3, DL_EINVAL, "authentication failed"},
	    {"error_bad_token.json", 16, DL_EAUTH, "invalid auth token"},
	    {"error_compacted.json", 11, DL_ESTALE, "has been compacted"},
	    {"error_empty_key.json", 3, DL_EINVAL, "key is not provided"},
	    {"error_lease_not_found.json", 5, DL_ENOTFOUND,
	     "requested lease not found"},
	};
	struct etcd_error e;
	struct etcd_range_response r;
	struct etcd_header h;
	char token[64];
	size_t len;
	char *d;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), REC "%s", cases[i].file);
		d = slurp(path, &len);
		assert_true(etcd_is_error(d, len));
		assert_int_equal(etcd_parse_error(d, len, &e, err, sizeof(err)),
				 0);
		assert_int_equal(e.code, cases[i].grpc);
		assert_non_null(strstr(e.message, cases[i].text));
		assert_int_equal(etcd_grpc_to_dl(e.code), cases[i].dl);
		/* every parser turns an error answer into its code */
		assert_int_equal(etcd_parse_range(d, len, &r, err, sizeof(err)),
				 cases[i].dl);
		assert_non_null(strstr(err, cases[i].text));
		assert_int_equal(
		    etcd_parse_header_only(d, len, &h, err, sizeof(err)),
		    cases[i].dl);
		assert_int_equal(etcd_parse_authenticate(d, len, token,
							 sizeof(token), err,
							 sizeof(err)),
				 cases[i].dl);
		free(d);
	}
	d = slurp(REC "range_hit.json", &len);
	assert_false(etcd_is_error(d, len));
	assert_int_equal(etcd_parse_error(d, len, &e, err, sizeof(err)),
			 DL_EPROTO);
	free(d);
	d = slurp(REC "lease_grant.json", &len);
	assert_false(etcd_is_error(d, len));
	free(d);
}

/* the shapes of other versions and of a stream's error */
static void test_error_shapes(void **state)
{
	static const char newer[] =
	    "{\"code\":16,\"message\":\"etcdserver: invalid auth token\"}";
	static const char stream[] =
	    "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":"
	    "\"etcdserver: no leader\",\"http_status\":\"Service "
	    "Unavailable\"}}";
	static const char ctl[] =
	    "{\"error\":\"a\\nb\\u001b[31m\",\"code\":14}";
	struct etcd_error e;
	struct etcd_watch_response w;
	(void)state;

	assert_int_equal(
	    etcd_parse_error(newer, strlen(newer), &e, err, sizeof(err)), 0);
	assert_int_equal(e.code, 16);
	assert_string_equal(e.message, "etcdserver: invalid auth token");
	assert_int_equal(
	    etcd_parse_error(stream, strlen(stream), &e, err, sizeof(err)), 0);
	assert_int_equal(e.code, 14);
	assert_string_equal(e.message, "etcdserver: no leader");
	assert_int_equal(
	    etcd_parse_watch(stream, strlen(stream), &w, err, sizeof(err)),
	    DL_EAGAIN);
	assert_string_equal(err, "etcd: etcdserver: no leader (code 14)");
	etcd_watch_response_release(&w);
	/* control bytes never reach the log */
	assert_int_equal(
	    etcd_parse_error(ctl, strlen(ctl), &e, err, sizeof(err)), 0);
	assert_string_equal(e.message, "a?b?[31m");
	assert_int_equal(etcd_grpc_to_dl(ETCD_GRPC_UNAVAILABLE), DL_EAGAIN);
	assert_int_equal(etcd_grpc_to_dl(ETCD_GRPC_PERMISSION_DENIED),
			 DL_EAUTH);
	assert_int_equal(etcd_grpc_to_dl(ETCD_GRPC_INTERNAL), DL_EPROTO);
}

/* ------------------------------------------------------- bad answers */

#define H "\"header\":{\"revision\":\"4\"}"

enum which { RANGE, PUT, DEL, TXN, GRANT, KEEP, AUTH, WATCH, ERR, HDR };

static int parse_any(enum which p, const char *d, size_t len)
{
	struct etcd_range_response r;
	struct etcd_put_response pu;
	struct etcd_delete_response de;
	struct etcd_txn_response t;
	struct etcd_lease_response l;
	struct etcd_watch_response w;
	struct etcd_error e;
	struct etcd_header h;
	char token[128];
	int rc = DL_EINVAL;

	switch (p) {
	case RANGE:
		rc = etcd_parse_range(d, len, &r, err, sizeof(err));
		etcd_range_response_release(&r);
		break;
	case PUT:
		rc = etcd_parse_put(d, len, &pu, err, sizeof(err));
		etcd_put_response_release(&pu);
		break;
	case DEL:
		rc = etcd_parse_delete(d, len, &de, err, sizeof(err));
		etcd_delete_response_release(&de);
		break;
	case TXN:
		rc = etcd_parse_txn(d, len, &t, err, sizeof(err));
		etcd_txn_response_release(&t);
		break;
	case GRANT:
		rc = etcd_parse_lease_grant(d, len, &l, err, sizeof(err));
		break;
	case KEEP:
		rc = etcd_parse_lease_keepalive(d, len, &l, err, sizeof(err));
		break;
	case AUTH:
		rc = etcd_parse_authenticate(d, len, token, sizeof(token), err,
					     sizeof(err));
		break;
	case WATCH:
		rc = etcd_parse_watch(d, len, &w, err, sizeof(err));
		etcd_watch_response_release(&w);
		break;
	case ERR: rc = etcd_parse_error(d, len, &e, err, sizeof(err)); break;
	case HDR:
		rc = etcd_parse_header_only(d, len, &h, err, sizeof(err));
		break;
	}
	return rc;
}

static void test_bad_answers(void **state)
{
	static const struct {
		enum which p;
		const char *json;
		int rc;
		const char *says; /* in err */
	} cases[] = {
	    {RANGE, "", DL_EPROTO, "malformed"},
	    {RANGE, "not json", DL_EPROTO, "malformed"},
	    {RANGE, "[1]", DL_EPROTO, "object"},
	    {RANGE, "{}", DL_EPROTO, "no header"},
	    {RANGE, "{\"header\":[]}", DL_EPROTO, "header is not an object"},
	    {RANGE, "{\"header\":{\"revision\":4}}", DL_EPROTO,
	     "revision is not a decimal string"},
	    {RANGE, "{\"header\":{\"revision\":\"-1\"}}", DL_EPROTO,
	     "out of range"},
	    {RANGE, "{\"header\":{\"revision\":\"+4\"}}", DL_EPROTO,
	     "not a decimal"},
	    {RANGE, "{\"header\":{\"revision\":\"4x\"}}", DL_EPROTO,
	     "not a decimal"},
	    {RANGE, "{\"header\":{\"revision\":\"\"}}", DL_EPROTO,
	     "not a decimal"},
	    {RANGE, "{\"header\":{\"revision\":\"1e3\"}}", DL_EPROTO,
	     "not a decimal"},
	    {RANGE, "{\"header\":{\"revision\":\"9223372036854775808\"}}",
	     DL_EPROTO, "out of range"},
	    {RANGE, "{\"header\":{\"cluster_id\":\"18446744073709551616\"}}",
	     DL_EPROTO, "out of range"},
	    {RANGE, "{\"header\":{\"cluster_id\":\"-1\"}}", DL_EPROTO,
	     "not a decimal"},
	    {RANGE, "{" H ",\"kvs\":{}}", DL_EPROTO, "kvs is not an array"},
	    {RANGE, "{" H ",\"kvs\":[1]}", DL_EPROTO, "not an object"},
	    {RANGE, "{" H ",\"kvs\":[{\"value\":\"eA==\"}]}", DL_EPROTO,
	     "no key"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"\"}]}", DL_EPROTO, "empty key"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":7}]}", DL_EPROTO,
	     "key is not a string"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA\"}]}", DL_EPROTO,
	     "not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA=\"}]}", DL_EPROTO,
	     "not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"e*==\"}]}", DL_EPROTO,
	     "not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA==eA==\"}]}", DL_EPROTO,
	     "not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"e=A=\"}]}", DL_EPROTO,
	     "not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eB==\"}]}", DL_EPROTO,
	     "not base64"}, /* stray bits */
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA-_\"}]}", DL_EPROTO,
	     "not base64"}, /* the URL alphabet */
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA==\",\"value\":\"eA= \"}]}",
	     DL_EPROTO, "value is not base64"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA==\",\"version\":1}]}",
	     DL_EPROTO, "version is not a decimal string"},
	    {RANGE, "{" H ",\"kvs\":[{\"key\":\"eA==\",\"lease\":\"x\"}]}",
	     DL_EPROTO, "lease is not a decimal"},
	    {RANGE, "{" H ",\"more\":\"true\"}", DL_EPROTO, "more is not a"},
	    {RANGE, "{" H ",\"count\":\"0\",\"kvs\":[{\"key\":\"eA==\"}]}",
	     DL_EPROTO, "count 0 below its 1 kvs"},
	    {RANGE, "{" H ",\"a\":[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]}",
	     DL_ELIMIT, "nested"},
	    {RANGE, "{" H ",\"kvs\":[],\"kvs\":[]}", DL_EPROTO, "duplicate"},
	    {RANGE, "{\"code\":\"16\",\"error\":\"x\"}", DL_EPROTO,
	     "no integer code"},
	    {RANGE, "{\"code\":70000,\"error\":\"x\"}", DL_EPROTO,
	     "error code"},
	    {RANGE, "{\"code\":14,\"message\":5}", DL_EPROTO, "not a string"},
	    {RANGE, "{\"error\":\"etcdserver: no leader\",\"code\":14}",
	     DL_EAGAIN, "etcd: etcdserver: no leader (code 14)"},
	    {PUT, "{" H ",\"prev_kv\":\"x\"}", DL_EPROTO,
	     "prev_kv is not an object"},
	    {PUT, "{" H ",\"prev_kv\":{}}", DL_EPROTO, "no key"},
	    {DEL, "{" H ",\"deleted\":1}", DL_EPROTO, "deleted is not"},
	    {DEL, "{" H ",\"prev_kvs\":[{\"key\":\"!!!!\"}]}", DL_EPROTO,
	     "not base64"},
	    {TXN, "{" H ",\"succeeded\":1}", DL_EPROTO, "succeeded is not"},
	    {TXN, "{" H ",\"responses\":{}}", DL_EPROTO, "not an array"},
	    {TXN, "{" H ",\"responses\":[{}]}", DL_EPROTO, "holds 0 known"},
	    {TXN, "{" H ",\"responses\":[{\"response_txn\":{}}]}", DL_EPROTO,
	     "holds 0 known"},
	    {TXN,
	     "{" H ",\"responses\":[{\"response_put\":{},\"response_range\":{}"
	     "}]}",
	     DL_EPROTO, "holds 2 known"},
	    {TXN, "{" H ",\"responses\":[{\"response_put\":[]}]}", DL_EPROTO,
	     "holds 1 known"},
	    {TXN,
	     "{" H ",\"responses\":[{\"response_range\":{\"kvs\":[{\"key\":"
	     "\"%%%%\"}]}}]}",
	     DL_EPROTO, "not base64"},
	    {GRANT, "{" H ",\"TTL\":\"30\"}", DL_EPROTO, "no lease ID"},
	    {GRANT, "{" H ",\"ID\":\"5\"}", DL_EPROTO, "no TTL"},
	    {GRANT, "{" H ",\"ID\":5,\"TTL\":\"30\"}", DL_EPROTO,
	     "ID is not a decimal"},
	    {GRANT,
	     "{" H ",\"ID\":\"5\",\"TTL\":\"30\",\"error\":\"too many\"}",
	     DL_EPROTO, "lease grant failed: too many"},
	    {GRANT, "{" H ",\"ID\":\"5\",\"TTL\":\"30\",\"error\":1}",
	     DL_EPROTO, "error is not a string"},
	    {KEEP, "{" H ",\"ID\":\"5\",\"TTL\":\"3\"}", DL_EPROTO,
	     "no result"},
	    {KEEP, "{\"result\":[]}", DL_EPROTO, "result is not an object"},
	    {KEEP, "{\"result\":{" H ",\"TTL\":\"3\"}}", DL_EPROTO,
	     "no lease ID"},
	    {AUTH, "{" H "}", DL_EPROTO, "no token"},
	    {AUTH, "{" H ",\"token\":5}", DL_EPROTO, "no token"},
	    {AUTH, "{" H ",\"token\":\"\"}", DL_EPROTO, "a token of 0"},
	    {AUTH, "{" H ",\"token\":\"a b\"}", DL_EPROTO, "not printable"},
	    {WATCH, "{" H "}", DL_EPROTO, "no result"},
	    {WATCH, "{\"result\":{}}", DL_EPROTO, "no header"},
	    {WATCH, "{\"result\":{" H ",\"created\":\"true\"}}", DL_EPROTO,
	     "created is not"},
	    {WATCH, "{\"result\":{" H ",\"watch_id\":0}}", DL_EPROTO,
	     "watch_id is not"},
	    {WATCH, "{\"result\":{" H ",\"watch_id\":\"-2\"}}", DL_EPROTO,
	     "out of range"},
	    {WATCH, "{\"result\":{" H ",\"compact_revision\":\"-9\"}}",
	     DL_EPROTO, "out of range"},
	    {WATCH, "{\"result\":{" H ",\"cancel_reason\":[]}}", DL_EPROTO,
	     "cancel_reason"},
	    {WATCH, "{\"result\":{" H ",\"events\":{}}}", DL_EPROTO,
	     "events is not an array"},
	    {WATCH, "{\"result\":{" H ",\"events\":[{}]}}", DL_EPROTO,
	     "event with no kv"},
	    {WATCH, "{\"result\":{" H ",\"events\":[5]}}", DL_EPROTO,
	     "event is not an object"},
	    {WATCH,
	     "{\"result\":{" H ",\"events\":[{\"type\":\"BOGUS\",\"kv\":{"
	     "\"key\":\"eA==\"}}]}}",
	     DL_EPROTO, "unknown type"},
	    {WATCH,
	     "{\"result\":{" H ",\"events\":[{\"type\":1,\"kv\":{\"key\":"
	     "\"eA==\"}}]}}",
	     DL_EPROTO, "unknown type"},
	    {WATCH,
	     "{\"result\":{" H ",\"events\":[{\"kv\":{\"key\":\"eA==\"},"
	     "\"prev_kv\":{\"key\":\"e\"}}]}}",
	     DL_EPROTO, "not base64"},
	    {ERR, "{" H "}", DL_EPROTO, "not an error"},
	    {ERR, "{\"error\":\"x\"}", DL_EPROTO, "no integer code"},
	    {ERR, "{\"error\":{\"grpc_code\":-1}}", DL_EPROTO, "error code"},
	    {HDR, "{\"header\":{\"raft_term\":2}}", DL_EPROTO,
	     "raft_term is not"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		int rc =
		    parse_any(cases[i].p, cases[i].json, strlen(cases[i].json));
		if (rc != cases[i].rc || !strstr(err, cases[i].says))
			fail_msg("case %zu (%s): rc %d, err '%s'; want %d, "
				 "'%s'",
				 i, cases[i].json, rc, err, cases[i].rc,
				 cases[i].says);
	}
}

/* a key one byte over its limit, a value one byte over its limit, an
 * answer one byte over its limit */
static void test_overlong_answers(void **state)
{
	size_t b64_value = (ETCD_VALUE_MAX + 1 + 2) / 3 * 4;
	size_t n = b64_value + 256;
	char *d = malloc(n), *p;
	struct etcd_range_response r;
	struct etcd_watch_response w;
	(void)state;

	assert_non_null(d);
	/* 4097 'x' bytes: base64 "eHh4" repeated, then "eA==" */
	p = d + sprintf(d, "{" H ",\"kvs\":[{\"key\":\"");
	for (int i = 0; i < ETCD_KEY_MAX / 3; i++)
		p += sprintf(p, "eHh4");
	p += sprintf(p, "eHg=\"}],\"count\":\"1\"}"); /* + 2 bytes: 4097 */
	assert_int_equal(etcd_parse_range(d, strlen(d), &r, err, sizeof(err)),
			 DL_ELIMIT);
	assert_non_null(strstr(err, "key is over 4096 bytes"));
	etcd_range_response_release(&r);
	/* exactly at the limit: 4095 + 1 */
	p = d + sprintf(d, "{" H ",\"kvs\":[{\"key\":\"");
	for (int i = 0; i < ETCD_KEY_MAX / 3; i++)
		p += sprintf(p, "eHh4");
	p += sprintf(p, "eA==\"}],\"count\":\"1\"}");
	assert_int_equal(etcd_parse_range(d, strlen(d), &r, err, sizeof(err)),
			 0);
	assert_int_equal(r.kvs[0].key_len, ETCD_KEY_MAX);
	etcd_range_response_release(&r);

	p = d + sprintf(d, "{" H ",\"kvs\":[{\"key\":\"eA==\",\"value\":\"");
	for (size_t i = 0; i < (ETCD_VALUE_MAX + 1) / 3; i++)
		p += sprintf(p, "eHh4");
	p += sprintf(p, "eHg=\"}],\"count\":\"1\"}"); /* 1 MiB + 1 */
	assert_int_equal(etcd_parse_range(d, strlen(d), &r, err, sizeof(err)),
			 DL_ELIMIT);
	assert_non_null(strstr(err, "value is over"));
	etcd_range_response_release(&r);
	free(d);

	/* the size is checked before anything is parsed */
	d = malloc(ETCD_ANSWER_MAX + 1);
	assert_non_null(d);
	memset(d, ' ', ETCD_ANSWER_MAX + 1);
	assert_int_equal(
	    etcd_parse_range(d, ETCD_ANSWER_MAX + 1, &r, err, sizeof(err)),
	    DL_ELIMIT);
	assert_int_equal(
	    etcd_parse_watch(d, ETCD_ANSWER_MAX + 1, &w, err, sizeof(err)),
	    DL_ELIMIT);
	etcd_watch_response_release(&w);
	assert_false(etcd_is_error(d, ETCD_ANSWER_MAX + 1));
	free(d);
}

/* ------------------------------------------------------------- watch */

/* etcd 3.4 refuses to create a watch whose stream came with an expired
 * token: watch id -1, canceled, the reason in cancel_reason (the answer
 * the client logs in again on) */
static void test_watch_refused_create(void **state)
{
	struct etcd_watch_response w;
	static const char ans[] =
	    "{\"result\":{\"header\":{\"cluster_id\":\"1\",\"member_id\":"
	    "\"2\",\"raft_term\":\"3\"},\"watch_id\":\"-1\",\"created\":"
	    "true,\"canceled\":true,\"cancel_reason\":\"etcdserver: invalid "
	    "auth token\"}}";
	(void)state;
	assert_int_equal(
	    etcd_parse_watch(ans, sizeof(ans) - 1, &w, err, sizeof(err)), 0);
	assert_int_equal(w.watch_id, -1);
	assert_true(w.canceled);
	assert_string_equal(w.cancel_reason, "etcdserver: invalid auth token");
	etcd_watch_response_release(&w);
}

static void test_recorded_watch(void **state)
{
	struct etcd_watch_response w;
	size_t len;
	char *d, *line, *save = NULL;
	int n = 0;
	(void)state;

	d = slurp(REC "watch_stream.jsonl", &len);
	for (line = strtok_r(d, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), n++) {
		assert_int_equal(
		    etcd_parse_watch(line, strlen(line), &w, err, sizeof(err)),
		    0);
		assert_int_equal(w.watch_id, 0); /* the first: omitted */
		assert_false(w.canceled);
		assert_int_equal(w.header.revision, n + 1);
		if (n == 0) {
			assert_true(w.created);
			assert_int_equal(w.n_events, 0);
			etcd_watch_response_release(&w);
			continue;
		}
		assert_false(w.created);
		assert_int_equal(w.n_events, 1);
		switch (n) {
		case 1:
			assert_int_equal(w.events[0].type, ETCD_EVENT_PUT);
			kv_is(&w.events[0].kv, "/rec/a", "hello", 2, 2, 1);
			assert_false(w.events[0].has_prev_kv);
			break;
		case 3:
			assert_int_equal(w.events[0].type, ETCD_EVENT_PUT);
			kv_is(&w.events[0].kv, "/rec/b", "second", 3, 4, 2);
			assert_true(w.events[0].has_prev_kv);
			kv_is(&w.events[0].prev_kv, "/rec/b", "{\"x\":1}", 3, 3,
			      1);
			break;
		case 5:
			assert_int_equal(w.events[0].type, ETCD_EVENT_DELETE);
			kv_is(&w.events[0].kv, "/rec/c", "", 0, 6, 0);
			kv_is(&w.events[0].prev_kv, "/rec/c", "three", 5, 5, 1);
			break;
		case 6:
			assert_int_equal(w.events[0].type, ETCD_EVENT_PUT);
			assert_true(w.events[0].kv.lease > 0);
			break;
		case 7:
			/* the lease's revoke deleted its key */
			assert_int_equal(w.events[0].type, ETCD_EVENT_DELETE);
			kv_is(&w.events[0].kv, "/rec/node", "", 0, 8, 0);
			assert_true(w.events[0].prev_kv.lease > 0);
			break;
		case 8:
			assert_int_equal(w.events[0].type, ETCD_EVENT_DELETE);
			kv_is(&w.events[0].kv, "/rec/b", "", 0, 9, 0);
			break;
		}
		etcd_watch_response_release(&w);
	}
	assert_int_equal(n, 9);
	free(d);

	d = slurp(REC "watch_compacted.jsonl", &len);
	line = strtok_r(d, "\n", &save);
	assert_int_equal(
	    etcd_parse_watch(line, strlen(line), &w, err, sizeof(err)), 0);
	assert_true(w.created);
	etcd_watch_response_release(&w);
	line = strtok_r(NULL, "\n", &save);
	assert_int_equal(
	    etcd_parse_watch(line, strlen(line), &w, err, sizeof(err)), 0);
	assert_true(w.canceled);
	assert_int_equal(w.compact_revision, 9);
	assert_int_equal(w.header.revision, 0); /* omitted in a cancel */
	assert_int_equal(w.n_events, 0);
	etcd_watch_response_release(&w);
	free(d);
}

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
	    cmocka_unit_test(test_prefix_end),
	    cmocka_unit_test(test_build_kv),
	    cmocka_unit_test(test_build_txn),
	    cmocka_unit_test(test_build_lease_auth_watch),
	    cmocka_unit_test(test_build_refuses),
	    cmocka_unit_test(test_base64_round_trip),
	    cmocka_unit_test(test_recorded_range),
	    cmocka_unit_test(test_recorded_put_delete),
	    cmocka_unit_test(test_recorded_txn),
	    cmocka_unit_test(test_recorded_lease_auth),
	    cmocka_unit_test(test_recorded_errors),
	    cmocka_unit_test(test_error_shapes),
	    cmocka_unit_test(test_bad_answers),
	    cmocka_unit_test(test_overlong_answers),
	    cmocka_unit_test(test_recorded_watch),
	    cmocka_unit_test(test_watch_refused_create),
	    cmocka_unit_test(test_splitter_recorded),
	    cmocka_unit_test(test_splitter_strings),
	    cmocka_unit_test(test_splitter_limits),
	    cmocka_unit_test(test_splitter_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
