/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_answer.c - the parsers of the etcd gateway's answers
 * (agent/etcd/etcd_answer.c) on the answers a real etcd 3.4 gave
 * (tests/etcd/recorded/, made by tests/etcd/record.sh): ranges, puts,
 * deletes, transactions, leases, authentication, errors and watch
 * answers; and on hand-made bad and overlong ones.
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
#include "etcd_proto_fix.h"

static char err[512];

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

	/* the keep-alive is a stream: an error object the gateway writes
	 * after the answer (the stream ended badly) leaves the renewal; an
	 * error first is the answer; a cut or empty stream is none */
	{
		static const char trailed[] =
		    "{\"result\":{\"header\":{\"revision\":\"9\"},\"ID\":"
		    "\"77\",\"TTL\":\"5\"}}\n{\"error\":{\"grpc_code\":1,"
		    "\"http_code\":408,\"message\":\"context canceled\"}}";
		static const char first_err[] =
		    "{\"error\":{\"grpc_code\":14,\"http_code\":503,"
		    "\"message\":\"etcdserver: no leader\"}}";
		assert_int_equal(etcd_parse_lease_keepalive(trailed,
							    strlen(trailed), &k,
							    err, sizeof(err)),
				 0);
		assert_int_equal(k.id, 77);
		assert_int_equal(k.ttl_s, 5);
		assert_int_not_equal(
		    etcd_parse_lease_keepalive(first_err, strlen(first_err), &k,
					       err, sizeof(err)),
		    0);
		assert_non_null(strstr(err, "no leader"));
		assert_int_equal(etcd_parse_lease_keepalive(trailed, 20, &k,
							    err, sizeof(err)),
				 DL_EPROTO);
		assert_non_null(strstr(err, "cut short"));
		assert_int_equal(
		    etcd_parse_lease_keepalive("", 0, &k, err, sizeof(err)),
		    DL_EPROTO);
		assert_int_equal(
		    etcd_parse_lease_keepalive("nope", 4, &k, err, sizeof(err)),
		    DL_EPROTO);
	}

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

int main(void)
{
	const struct CMUnitTest tests[] = {
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
