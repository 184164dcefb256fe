/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_proto.c - request bodies for etcd's v3 JSON gateway (etcd_proto.h).
 * No I/O.
 *
 * The gateway is grpc-gateway over etcd's protobuf messages: bytes are
 * base64, int64 and uint64 are decimal strings, zero values are left out.
 * The bodies are written exactly that way. The answers are read in
 * etcd_answer.c, the streams split in etcd_stream.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "etcd_proto.h"

#define CRED_MAX 1024 /* bytes of a user name or password */

/* ------------------------------------------------------------- base64 */

static const char b64_digits[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* b64_encode returns a new NUL-terminated string (NULL: out of memory);
 * len is at most ETCD_VALUE_MAX, checked by the callers. */
static char *b64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	char *out = malloc((len + 2) / 3 * 4 + 1);
	size_t i, o = 0;

	if (!out)
		return NULL;
	for (i = 0; i + 2 < len; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		out[o++] = b64_digits[v >> 18];
		out[o++] = b64_digits[(v >> 12) & 63];
		out[o++] = b64_digits[(v >> 6) & 63];
		out[o++] = b64_digits[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = b64_digits[v >> 18];
		out[o++] = b64_digits[(v >> 12) & 63];
		out[o++] = i + 1 < len ? b64_digits[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return out;
}

/* ------------------------------------------------------------ builders */

size_t etcd_prefix_end(const void *prefix, size_t len, unsigned char *out)
{
	const unsigned char *p = prefix;

	for (size_t i = len; i > 0; i--) {
		if (p[i - 1] < 0xff) {
			memcpy(out, p, i - 1);
			out[i - 1] = (unsigned char)(p[i - 1] + 1);
			return i;
		}
	}
	out[0] = 0;
	return 1;
}

/* set_b64: obj[name] = base64 of b when b is present */
static int set_b64(json_t *obj, const char *name, struct etcd_bytes b,
		   size_t max, char *err, size_t err_size)
{
	char *s;
	int rc;

	if (b.len == 0)
		return 0;
	if (!b.data)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: %s has a length but no bytes",
				 name);
	if (b.len > max)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd request: %s of %zu bytes is over the "
				 "limit of %zu",
				 name, b.len, max);
	s = b64_encode(b.data, b.len);
	if (!s)
		return DL_ENOMEM;
	rc = json_object_set_new(obj, name, json_string(s)) ? DL_ENOMEM : 0;
	free(s);
	return rc;
}

/* set_i64: obj[name] = n as a decimal string, when n is not 0 */
static int set_i64(json_t *obj, const char *name, int64_t n, int64_t min,
		   char *err, size_t err_size)
{
	char s[24];

	if (n < min)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: %s %lld is below %lld", name,
				 (long long)n, (long long)min);
	if (n == 0)
		return 0;
	snprintf(s, sizeof(s), "%lld", (long long)n);
	return json_object_set_new(obj, name, json_string(s)) ? DL_ENOMEM : 0;
}

static int set_true(json_t *obj, const char *name, int flag)
{
	if (!flag)
		return 0;
	return json_object_set_new(obj, name, json_true()) ? DL_ENOMEM : 0;
}

static int need_key(struct etcd_bytes key, char *err, size_t err_size)
{
	if (key.len == 0 || !key.data)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: the key is empty");
	return 0;
}

/* op_fill writes op's fields into body; rc of the first failure */
static int op_fill(const struct etcd_op *op, json_t *body, char *err,
		   size_t err_size)
{
	int rc = need_key(op->key, err, err_size);

	if (rc == 0)
		rc = set_b64(body, "key", op->key, ETCD_KEY_MAX, err, err_size);
	switch (op->kind) {
	case ETCD_OP_RANGE:
		if (rc == 0)
			rc = set_b64(body, "range_end", op->range_end,
				     ETCD_KEY_MAX, err, err_size);
		if (rc == 0)
			rc =
			    set_i64(body, "limit", op->limit, 0, err, err_size);
		if (rc == 0)
			rc = set_i64(body, "revision", op->revision, 0, err,
				     err_size);
		if (rc == 0)
			rc = set_true(body, "keys_only", op->keys_only);
		if (rc == 0)
			rc = set_true(body, "count_only", op->count_only);
		if (rc == 0)
			rc = set_true(body, "serializable", op->serializable);
		break;
	case ETCD_OP_PUT:
		if (rc == 0)
			rc = set_b64(body, "value", op->value, ETCD_VALUE_MAX,
				     err, err_size);
		if (rc == 0)
			rc =
			    set_i64(body, "lease", op->lease, 0, err, err_size);
		if (rc == 0)
			rc = set_true(body, "prev_kv", op->prev_kv);
		break;
	case ETCD_OP_DELETE:
		if (rc == 0)
			rc = set_b64(body, "range_end", op->range_end,
				     ETCD_KEY_MAX, err, err_size);
		if (rc == 0)
			rc = set_true(body, "prev_kv", op->prev_kv);
		break;
	default:
		rc = dl_errorf(err, err_size, DL_EINVAL,
			       "etcd request: unknown operation %d",
			       (int)op->kind);
	}
	return rc;
}

/* finish: hand body out on success, drop it otherwise */
static int finish(int rc, json_t *body, json_t **out)
{
	if (rc != 0) {
		json_decref(body);
		return rc;
	}
	*out = body;
	return 0;
}

int etcd_build_op(const struct etcd_op *op, json_t **out, char *err,
		  size_t err_size)
{
	json_t *body = json_object();

	if (!body)
		return DL_ENOMEM;
	return finish(op_fill(op, body, err, err_size), body, out);
}

static struct etcd_bytes bytes(const void *data, size_t len)
{
	struct etcd_bytes b = {data, data ? len : 0};
	return b;
}

int etcd_build_range(const void *key, size_t key_len, const void *range_end,
		     size_t range_end_len, int64_t limit, int64_t revision,
		     json_t **out, char *err, size_t err_size)
{
	struct etcd_op op = {.kind = ETCD_OP_RANGE,
			     .key = bytes(key, key_len),
			     .range_end = bytes(range_end, range_end_len),
			     .limit = limit,
			     .revision = revision};
	return etcd_build_op(&op, out, err, err_size);
}

int etcd_build_read(const char *k, json_t **out, char *err, size_t err_size)
{
	struct etcd_op op = {.kind = ETCD_OP_RANGE,
			     .key = bytes(k, strlen(k)),
			     .serializable = 1};
	return etcd_build_op(&op, out, err, err_size);
}

int etcd_build_put(const void *key, size_t key_len, const void *value,
		   size_t value_len, int64_t lease, json_t **out, char *err,
		   size_t err_size)
{
	struct etcd_op op = {.kind = ETCD_OP_PUT,
			     .key = bytes(key, key_len),
			     .value = bytes(value, value_len),
			     .lease = lease};
	return etcd_build_op(&op, out, err, err_size);
}

int etcd_build_delete(const void *key, size_t key_len, const void *range_end,
		      size_t range_end_len, json_t **out, char *err,
		      size_t err_size)
{
	struct etcd_op op = {.kind = ETCD_OP_DELETE,
			     .key = bytes(key, key_len),
			     .range_end = bytes(range_end, range_end_len)};
	return etcd_build_op(&op, out, err, err_size);
}

static const char *const cmp_targets[] = {"VERSION", "CREATE", "MOD", "VALUE",
					  "LEASE"};
static const char *const cmp_fields[] = {"version", "create_revision",
					 "mod_revision", "value", "lease"};
static const char *const cmp_results[] = {"EQUAL", "NOT_EQUAL", "GREATER",
					  "LESS"};

static int compare_fill(const struct etcd_compare *c, json_t *o, char *err,
			size_t err_size)
{
	int rc;

	if ((unsigned)c->target > ETCD_CMP_LEASE ||
	    (unsigned)c->result > ETCD_CMP_LESS)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: unknown compare %d/%d",
				 (int)c->target, (int)c->result);
	rc = need_key(c->key, err, err_size);
	if (rc == 0)
		rc = set_b64(o, "key", c->key, ETCD_KEY_MAX, err, err_size);
	/* the enums' zero values are written out: the body says what it
	 * compares even to a reader who does not know the defaults */
	if (rc == 0 && json_object_set_new(o, "target",
					   json_string(cmp_targets[c->target])))
		rc = DL_ENOMEM;
	if (rc == 0 && json_object_set_new(o, "result",
					   json_string(cmp_results[c->result])))
		rc = DL_ENOMEM;
	if (rc != 0)
		return rc;
	if (c->target == ETCD_CMP_VALUE) {
		/* an empty value is written too: comparing with "" is not
		 * comparing with nothing */
		char *s;
		if (c->value.len > ETCD_VALUE_MAX)
			return dl_errorf(err, err_size, DL_ELIMIT,
					 "etcd request: compare value of %zu "
					 "bytes is over the limit",
					 c->value.len);
		if (c->value.len > 0 && !c->value.data)
			return DL_EINVAL;
		s = b64_encode(c->value.data, c->value.len);
		if (!s)
			return DL_ENOMEM;
		rc = json_object_set_new(o, "value", json_string(s)) ? DL_ENOMEM
								     : 0;
		free(s);
		return rc;
	}
	{
		char s[24];
		if (c->number < 0)
			return dl_errorf(err, err_size, DL_EINVAL,
					 "etcd request: compare with %lld",
					 (long long)c->number);
		snprintf(s, sizeof(s), "%lld", (long long)c->number);
		return json_object_set_new(o, cmp_fields[c->target],
					   json_string(s))
			   ? DL_ENOMEM
			   : 0;
	}
}

static const char *const op_request_names[] = {"request_range", "request_put",
					       "request_delete_range"};

static int ops_array(json_t *body, const char *name, const struct etcd_op *ops,
		     size_t n, char *err, size_t err_size)
{
	json_t *arr;
	int rc = 0;

	if (n > ETCD_RESPONSES_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd request: %zu operations in a txn", n);
	if (n == 0)
		return 0;
	arr = json_array();
	if (!arr || json_object_set_new(body, name, arr))
		return DL_ENOMEM;
	for (size_t i = 0; i < n && rc == 0; i++) {
		json_t *wrap = json_object(), *req = json_object();
		if (!wrap || !req || json_array_append_new(arr, wrap)) {
			json_decref(wrap);
			json_decref(req);
			return DL_ENOMEM;
		}
		rc = op_fill(&ops[i], req, err, err_size);
		if ((unsigned)ops[i].kind > ETCD_OP_DELETE) {
			json_decref(req);
			break;
		}
		if (json_object_set_new(wrap, op_request_names[ops[i].kind],
					req))
			rc = DL_ENOMEM;
	}
	return rc;
}

int etcd_build_txn(const struct etcd_compare *cmp, size_t n_cmp,
		   const struct etcd_op *success, size_t n_success,
		   const struct etcd_op *failure, size_t n_failure,
		   json_t **out, char *err, size_t err_size)
{
	json_t *body = json_object(), *arr = NULL;
	int rc = 0;

	if (!body)
		return DL_ENOMEM;
	if (n_cmp > ETCD_RESPONSES_MAX)
		rc = dl_errorf(err, err_size, DL_ELIMIT,
			       "etcd request: %zu compares in a txn", n_cmp);
	if (rc == 0 && n_cmp > 0) {
		arr = json_array();
		if (!arr || json_object_set_new(body, "compare", arr))
			rc = DL_ENOMEM;
	}
	for (size_t i = 0; i < n_cmp && rc == 0; i++) {
		json_t *o = json_object();
		if (!o || json_array_append_new(arr, o))
			rc = DL_ENOMEM;
		else
			rc = compare_fill(&cmp[i], o, err, err_size);
	}
	if (rc == 0)
		rc = ops_array(body, "success", success, n_success, err,
			       err_size);
	if (rc == 0)
		rc = ops_array(body, "failure", failure, n_failure, err,
			       err_size);
	return finish(rc, body, out);
}

int etcd_build_put_json(const char *key, const json_t *doc, int64_t lease,
			json_t **out, char *err, size_t err_size)
{
	struct etcd_op put;
	char *value = json_dumps(doc, JSON_COMPACT);
	int rc;
	*out = NULL;
	if (!value)
		return dl_errorf(err, err_size, DL_ENOMEM, "out of memory");
	memset(&put, 0, sizeof(put));
	put.kind = ETCD_OP_PUT;
	put.key.data = key;
	put.key.len = strlen(key);
	put.value.data = value;
	put.value.len = strlen(value);
	put.lease = lease;
	rc = etcd_build_txn(NULL, 0, &put, 1, NULL, 0, out, err, err_size);
	free(value);
	return rc;
}

int etcd_build_lease_grant(int64_t ttl_s, int64_t id, json_t **out, char *err,
			   size_t err_size)
{
	json_t *body;
	int rc;

	if (ttl_s <= 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: lease TTL %lld s is not "
				 "positive",
				 (long long)ttl_s);
	body = json_object();
	if (!body)
		return DL_ENOMEM;
	rc = set_i64(body, "TTL", ttl_s, 1, err, err_size);
	if (rc == 0)
		rc = set_i64(body, "ID", id, 0, err, err_size);
	return finish(rc, body, out);
}

static int lease_id_body(int64_t id, json_t **out, char *err, size_t err_size)
{
	json_t *body;

	if (id <= 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: lease id %lld", (long long)id);
	body = json_object();
	if (!body)
		return DL_ENOMEM;
	return finish(set_i64(body, "ID", id, 1, err, err_size), body, out);
}

int etcd_build_lease_keepalive(int64_t id, json_t **out, char *err,
			       size_t err_size)
{
	return lease_id_body(id, out, err, err_size);
}

int etcd_build_lease_revoke(int64_t id, json_t **out, char *err,
			    size_t err_size)
{
	return lease_id_body(id, out, err, err_size);
}

int etcd_build_authenticate(const char *name, const char *password,
			    json_t **out, char *err, size_t err_size)
{
	json_t *body;
	int rc = 0;

	if (!name || !*name || !password || !*password)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: empty user name or password");
	if (strlen(name) > CRED_MAX || strlen(password) > CRED_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd request: user name or password over "
				 "%d bytes",
				 CRED_MAX);
	body = json_object();
	if (!body)
		return DL_ENOMEM;
	/* json_string refuses what is not UTF-8 */
	if (json_object_set_new(body, "name", json_string(name)) ||
	    json_object_set_new(body, "password", json_string(password)))
		rc = dl_errorf(err, err_size, DL_EINVAL,
			       "etcd request: user name or password is not "
			       "UTF-8");
	return finish(rc, body, out);
}

int etcd_build_watch_create(const struct etcd_watch_create *w, json_t **out,
			    char *err, size_t err_size)
{
	json_t *body = json_object(), *req = json_object();
	int rc = 0;

	if (!body || !req || json_object_set_new(body, "create_request", req)) {
		json_decref(body);
		json_decref(req);
		return DL_ENOMEM;
	}
	rc = need_key(w->key, err, err_size);
	if (rc == 0)
		rc = set_b64(req, "key", w->key, ETCD_KEY_MAX, err, err_size);
	if (rc == 0)
		rc = set_b64(req, "range_end", w->range_end, ETCD_KEY_MAX, err,
			     err_size);
	if (rc == 0)
		rc = set_i64(req, "start_revision", w->start_revision, 0, err,
			     err_size);
	if (rc == 0)
		rc = set_true(req, "progress_notify", w->progress_notify);
	if (rc == 0)
		rc = set_true(req, "prev_kv", w->prev_kv);
	return finish(rc, body, out);
}

int etcd_build_watch_cancel(int64_t watch_id, json_t **out, char *err,
			    size_t err_size)
{
	json_t *body, *req;
	char s[24];

	if (watch_id < 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "etcd request: watch id %lld",
				 (long long)watch_id);
	body = json_object();
	req = json_object();
	snprintf(s, sizeof(s), "%lld", (long long)watch_id);
	/* watch id 0 is a real watch (the first): written, not omitted */
	if (!body || !req || json_object_set_new(body, "cancel_request", req) ||
	    json_object_set_new(req, "watch_id", json_string(s))) {
		json_decref(body);
		if (!body)
			json_decref(req);
		return DL_ENOMEM;
	}
	*out = body;
	return 0;
}

char *etcd_body_dump(const json_t *body)
{
	return json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
}
