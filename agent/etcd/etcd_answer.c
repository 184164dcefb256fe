/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_answer.c - the parsers of etcd's v3 JSON gateway answers and of one
 * watch answer (etcd_proto.h). No I/O.
 *
 * Answers are read strictly (a number in a string's place, a bad base64
 * digit, a negative revision is DL_EPROTO), every size bounded, and
 * fields this code does not know are skipped: newer etcd versions add
 * some.
 */
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/parse.h"
#include "etcd_proto.h"

/* ------------------------------------------------------------- base64 */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* b64_decode decodes the padded standard encoding Go writes (and nothing
 * else: no whitespace, no missing padding, no stray bits) into a new
 * buffer of at most max bytes, NUL-terminated. 0, DL_EPROTO, DL_ELIMIT or
 * DL_ENOMEM. */
static int b64_decode(const char *s, size_t slen, size_t max, char **out,
		      size_t *out_len)
{
	size_t n, i, o = 0, pad = 0;
	char *buf;

	if (slen % 4 != 0)
		return DL_EPROTO;
	if (slen > 0 && s[slen - 1] == '=')
		pad = slen > 1 && s[slen - 2] == '=' ? 2 : 1;
	n = slen / 4 * 3 - pad;
	if (n > max)
		return DL_ELIMIT;
	buf = malloc(n + 1);
	if (!buf)
		return DL_ENOMEM;
	for (i = 0; i < slen; i += 4) {
		int v[4];
		int last = i + 4 == slen;
		for (int k = 0; k < 4; k++) {
			v[k] = b64_value((unsigned char)s[i + k]);
			if (v[k] < 0 && !(last && k >= 4 - (int)pad))
				goto bad;
			if (v[k] < 0)
				v[k] = 0;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
			     (uint32_t)v[2] << 6 | (uint32_t)v[3];
		if (last && pad == 2 && (w & 0xffff) != 0)
			goto bad;
		if (last && pad == 1 && (w & 0xff) != 0)
			goto bad;
		buf[o++] = (char)(w >> 16);
		if (!(last && pad == 2))
			buf[o++] = (char)(w >> 8);
		if (!(last && pad >= 1))
			buf[o++] = (char)w;
	}
	buf[o] = '\0';
	*out = buf;
	*out_len = o;
	return 0;
bad:
	free(buf);
	return DL_EPROTO;
}

/* ------------------------------------------------------------- parsers */

/* proto: fail with DL_EPROTO and a message naming the answer's field */
#define proto(err, err_size, ...)                                              \
	dl_errorf(err, err_size, DL_EPROTO, __VA_ARGS__)

/* get_int reads obj[name], a decimal string (the gateway's int64/uint64),
 * into [min, max]; absent is 0 (a zero value). */
static int get_int(json_t *obj, const char *name, int is_signed, int64_t min,
		   uint64_t max, void *out, char *err, size_t err_size)
{
	json_t *v = json_object_get(obj, name);
	const char *s, *d;
	int rc;

	if (!v) {
		if (is_signed)
			*(int64_t *)out = 0;
		else
			*(uint64_t *)out = 0;
		return 0;
	}
	if (!json_is_string(v))
		return proto(err, err_size,
			     "etcd answer: %s is not a decimal string", name);
	s = json_string_value(v);
	d = s[0] == '-' && is_signed ? s + 1 : s;
	if (json_string_length(v) > 20 || *d == '\0' ||
	    strspn(d, "0123456789") != strlen(d))
		return proto(err, err_size,
			     "etcd answer: %s is not a decimal string", name);
	if (is_signed)
		rc = parse_i64(s, min, (int64_t)max, out);
	else
		rc = parse_u64(s, (uint64_t)min, max, out);
	if (rc != 0)
		return proto(err, err_size, "etcd answer: %s %s out of range",
			     name, s);
	return 0;
}

static int get_i64(json_t *obj, const char *name, int64_t *out, char *err,
		   size_t err_size)
{
	return get_int(obj, name, 1, 0, INT64_MAX, out, err, err_size);
}

static int get_bool(json_t *obj, const char *name, int *out, char *err,
		    size_t err_size)
{
	json_t *v = json_object_get(obj, name);

	*out = 0;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return proto(err, err_size, "etcd answer: %s is not a boolean",
			     name);
	*out = json_is_true(v);
	return 0;
}

static int get_b64(json_t *obj, const char *name, int required, size_t max,
		   char **out, size_t *out_len, char *err, size_t err_size)
{
	json_t *v = json_object_get(obj, name);
	int rc;

	if (!v) {
		if (required)
			return proto(err, err_size, "etcd answer: no %s", name);
		*out = strdup("");
		*out_len = 0;
		return *out ? 0 : DL_ENOMEM;
	}
	if (!json_is_string(v))
		return proto(err, err_size, "etcd answer: %s is not a string",
			     name);
	if (json_string_length(v) > (max + 2) / 3 * 4)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer: %s is over %zu bytes", name,
				 max);
	rc = b64_decode(json_string_value(v), json_string_length(v), max, out,
			out_len);
	if (rc == DL_EPROTO)
		return proto(err, err_size, "etcd answer: %s is not base64",
			     name);
	if (rc == DL_ELIMIT)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer: %s is over %zu bytes", name,
				 max);
	return rc;
}

/* get_object: obj[name] as an object, NULL when absent; *rc set when it
 * is there with another type */
static json_t *get_object(json_t *obj, const char *name, int *rc, char *err,
			  size_t err_size)
{
	json_t *v = json_object_get(obj, name);

	*rc = 0;
	if (v && !json_is_object(v)) {
		*rc = proto(err, err_size, "etcd answer: %s is not an object",
			    name);
		return NULL;
	}
	return v;
}

static int get_array(json_t *obj, const char *name, size_t max, json_t **out,
		     char *err, size_t err_size)
{
	json_t *v = json_object_get(obj, name);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return proto(err, err_size, "etcd answer: %s is not an array",
			     name);
	if (json_array_size(v) > max)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer: %zu %s, over the limit of %zu",
				 json_array_size(v), name, max);
	*out = v;
	return 0;
}

/* copy_message keeps at most size - 1 bytes of s, control bytes as '?' (an
 * error's text goes to the log) */
static void copy_message(char *dst, size_t size, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		dst[i] =
		    (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	dst[i] = '\0';
}

static int parse_header(json_t *obj, int required, struct etcd_header *h,
			char *err, size_t err_size)
{
	int rc;
	json_t *v = get_object(obj, "header", &rc, err, err_size);

	memset(h, 0, sizeof(*h));
	if (rc != 0)
		return rc;
	if (!v)
		return required ? proto(err, err_size, "etcd answer: no header")
				: 0;
	rc = get_int(v, "cluster_id", 0, 0, UINT64_MAX, &h->cluster_id, err,
		     err_size);
	if (rc == 0)
		rc = get_int(v, "member_id", 0, 0, UINT64_MAX, &h->member_id,
			     err, err_size);
	if (rc == 0)
		rc = get_i64(v, "revision", &h->revision, err, err_size);
	if (rc == 0)
		rc = get_int(v, "raft_term", 0, 0, UINT64_MAX, &h->raft_term,
			     err, err_size);
	return rc;
}

void etcd_kv_release(struct etcd_kv *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

static int parse_kv(json_t *v, struct etcd_kv *kv, char *err, size_t err_size)
{
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(v))
		return proto(err, err_size,
			     "etcd answer: a kv is not an object");
	rc = get_b64(v, "key", 1, ETCD_KEY_MAX, &kv->key, &kv->key_len, err,
		     err_size);
	if (rc == 0 && kv->key_len == 0)
		rc = proto(err, err_size, "etcd answer: a kv has an empty key");
	if (rc == 0)
		rc = get_b64(v, "value", 0, ETCD_VALUE_MAX, &kv->value,
			     &kv->value_len, err, err_size);
	if (rc == 0)
		rc = get_i64(v, "create_revision", &kv->create_revision, err,
			     err_size);
	if (rc == 0)
		rc = get_i64(v, "mod_revision", &kv->mod_revision, err,
			     err_size);
	if (rc == 0)
		rc = get_i64(v, "version", &kv->version, err, err_size);
	if (rc == 0)
		rc = get_i64(v, "lease", &kv->lease, err, err_size);
	return rc;
}

static void kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		etcd_kv_release(&kvs[i]);
	free(kvs);
}

/* parse_kvs reads obj[name], an array of kvs (absent: none) */
static int parse_kvs(json_t *obj, const char *name, struct etcd_kv **out,
		     size_t *n_out, char *err, size_t err_size)
{
	json_t *arr;
	int rc = get_array(obj, name, ETCD_KVS_MAX, &arr, err, err_size);

	*out = NULL;
	*n_out = 0;
	if (rc != 0 || !arr || json_array_size(arr) == 0)
		return rc;
	*out = calloc(json_array_size(arr), sizeof(**out));
	if (!*out)
		return DL_ENOMEM;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		/* counted before parsing: release frees a half-made kv */
		(*n_out)++;
		rc =
		    parse_kv(json_array_get(arr, i), &(*out)[i], err, err_size);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int etcd_grpc_to_dl(int code)
{
	switch (code) {
	case ETCD_GRPC_UNAUTHENTICATED:
	case ETCD_GRPC_PERMISSION_DENIED: return DL_EAUTH;
	case ETCD_GRPC_UNAVAILABLE:
	case ETCD_GRPC_DEADLINE_EXCEEDED:
	case ETCD_GRPC_RESOURCE_EXHAUSTED:
	case ETCD_GRPC_ABORTED: return DL_EAGAIN;
	case ETCD_GRPC_OUT_OF_RANGE: return DL_ESTALE;
	case ETCD_GRPC_NOT_FOUND: return DL_ENOTFOUND;
	case ETCD_GRPC_FAILED_PRECONDITION: return DL_ECONFLICT;
	case ETCD_GRPC_INVALID_ARGUMENT: return DL_EINVAL;
	default: return DL_EPROTO;
	}
}

/* error_of reads an error answer's code and message; 1 when root is
 * one, 0 when not, negative on a malformed one. Unary errors are
 * {"error": "...", "message": "...", "code": N} (3.4) or {"code": N,
 * "message": "..."} (3.5+); a stream's are {"error": {"grpc_code": N,
 * "message": "..."}}. An answer with a header or a result is no error (a
 * lease grant has an "error" string of its own). */
static int error_of(json_t *root, struct etcd_error *e, char *err,
		    size_t err_size)
{
	json_t *ev = json_object_get(root, "error");
	json_t *code, *msg;
	json_int_t c;

	memset(e, 0, sizeof(*e));
	if (json_object_get(root, "header") || json_object_get(root, "result"))
		return 0;
	if (json_is_object(ev)) {
		code = json_object_get(ev, "grpc_code");
		if (!code)
			code = json_object_get(ev, "code");
		msg = json_object_get(ev, "message");
	} else {
		code = json_object_get(root, "code");
		msg = json_object_get(root, "message");
		if (msg && !json_is_string(msg))
			return proto(err, err_size,
				     "etcd answer: an error message is not a "
				     "string");
		if (!msg || !json_string_length(msg))
			msg = ev;
		if (!code && !ev)
			return 0;
	}
	if (!json_is_integer(code))
		return proto(err, err_size,
			     "etcd answer: an error with no integer code");
	c = json_integer_value(code);
	if (c < 0 || c > 255)
		return proto(err, err_size, "etcd answer: error code %lld",
			     (long long)c);
	if (msg && !json_is_string(msg))
		return proto(err, err_size,
			     "etcd answer: an error message is not a string");
	e->code = (int)c;
	copy_message(e->message, sizeof(e->message),
		     msg ? json_string_value(msg) : "");
	return 1;
}

/* load parses an answer and turns an etcd error into its code, with
 * "etcd: MESSAGE (code N)" in err. *root: a new reference on success. */
static int load(const char *data, size_t len, json_t **root, char *err,
		size_t err_size)
{
	struct etcd_error e;
	int rc;

	*root = NULL;
	if (len > ETCD_ANSWER_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer of %zu bytes is over the limit "
				 "of %d",
				 len, ETCD_ANSWER_MAX);
	rc = jsonh_parse(data, len, ETCD_JSON_DEPTH_MAX, root, err, err_size);
	if (rc == DL_EINVAL)
		rc = DL_EPROTO; /* not JSON: not etcd */
	if (rc != 0)
		return rc;
	rc = error_of(*root, &e, err, err_size);
	if (rc == 1)
		rc = dl_errorf(err, err_size, etcd_grpc_to_dl(e.code),
			       "etcd: %s (code %d)", e.message, e.code);
	if (rc != 0) {
		json_decref(*root);
		*root = NULL;
	}
	return rc;
}

int etcd_is_error(const char *data, size_t len)
{
	struct etcd_error e;
	json_t *root;
	int rc;

	if (len > ETCD_ANSWER_MAX ||
	    jsonh_parse(data, len, ETCD_JSON_DEPTH_MAX, &root, NULL, 0) != 0)
		return 0;
	rc = error_of(root, &e, NULL, 0);
	json_decref(root);
	return rc == 1;
}

int etcd_parse_error(const char *data, size_t len, struct etcd_error *out,
		     char *err, size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > ETCD_ANSWER_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer of %zu bytes is over the limit",
				 len);
	rc = jsonh_parse(data, len, ETCD_JSON_DEPTH_MAX, &root, err, err_size);
	if (rc != 0)
		return rc == DL_EINVAL ? DL_EPROTO : rc;
	rc = error_of(root, out, err, err_size);
	json_decref(root);
	if (rc == 0)
		return proto(err, err_size, "etcd answer is not an error");
	return rc < 0 ? rc : 0;
}

static int range_from(json_t *root, int header_required,
		      struct etcd_range_response *out, char *err,
		      size_t err_size)
{
	int rc =
	    parse_header(root, header_required, &out->header, err, err_size);

	if (rc == 0)
		rc = parse_kvs(root, "kvs", &out->kvs, &out->n_kvs, err,
			       err_size);
	if (rc == 0)
		rc = get_bool(root, "more", &out->more, err, err_size);
	if (rc == 0)
		rc = get_i64(root, "count", &out->count, err, err_size);
	if (rc == 0 && (uint64_t)out->count < out->n_kvs)
		rc = proto(err, err_size,
			   "etcd answer: count %lld below its %zu kvs",
			   (long long)out->count, out->n_kvs);
	return rc;
}

static int put_from(json_t *root, int header_required,
		    struct etcd_put_response *out, char *err, size_t err_size)
{
	int rc =
	    parse_header(root, header_required, &out->header, err, err_size);
	json_t *prev;

	if (rc != 0)
		return rc;
	prev = get_object(root, "prev_kv", &rc, err, err_size);
	if (rc == 0 && prev) {
		out->has_prev_kv = 1;
		rc = parse_kv(prev, &out->prev_kv, err, err_size);
	}
	return rc;
}

static int delete_from(json_t *root, int header_required,
		       struct etcd_delete_response *out, char *err,
		       size_t err_size)
{
	int rc =
	    parse_header(root, header_required, &out->header, err, err_size);

	if (rc == 0)
		rc = get_i64(root, "deleted", &out->deleted, err, err_size);
	if (rc == 0)
		rc = parse_kvs(root, "prev_kvs", &out->prev_kvs,
			       &out->n_prev_kvs, err, err_size);
	return rc;
}

int etcd_parse_range(const char *data, size_t len,
		     struct etcd_range_response *out, char *err,
		     size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = range_from(root, 1, out, err, err_size);
	json_decref(root);
	return rc;
}

int etcd_parse_put(const char *data, size_t len, struct etcd_put_response *out,
		   char *err, size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = put_from(root, 1, out, err, err_size);
	json_decref(root);
	return rc;
}

int etcd_parse_delete(const char *data, size_t len,
		      struct etcd_delete_response *out, char *err,
		      size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = delete_from(root, 1, out, err, err_size);
	json_decref(root);
	return rc;
}

static const char *const op_response_names[] = {
    "response_range", "response_put", "response_delete_range"};

/* one txn response: {"response_range"|"response_put"|
 * "response_delete_range": {...}}, exactly one of them */
static int op_response_from(json_t *v, struct etcd_op_response *r, char *err,
			    size_t err_size)
{
	json_t *inner = NULL;
	int found = 0, rc = 0;

	if (!json_is_object(v))
		return proto(err, err_size,
			     "etcd answer: a txn response is not an object");
	for (int k = 0; k <= ETCD_OP_DELETE; k++) {
		json_t *x = json_object_get(v, op_response_names[k]);
		if (!x)
			continue;
		found++;
		r->kind = (enum etcd_op_kind)k;
		inner = x;
	}
	if (found != 1 || !json_is_object(inner))
		return proto(err, err_size,
			     "etcd answer: a txn response holds %d known "
			     "answers",
			     found);
	/* inner headers carry only a revision: not required */
	switch (r->kind) {
	case ETCD_OP_RANGE:
		rc = range_from(inner, 0, &r->range, err, err_size);
		break;
	case ETCD_OP_PUT:
		rc = put_from(inner, 0, &r->put, err, err_size);
		break;
	case ETCD_OP_DELETE:
		rc = delete_from(inner, 0, &r->del, err, err_size);
		break;
	}
	return rc;
}

int etcd_parse_txn(const char *data, size_t len, struct etcd_txn_response *out,
		   char *err, size_t err_size)
{
	json_t *root, *arr;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = parse_header(root, 1, &out->header, err, err_size);
	if (rc == 0)
		rc =
		    get_bool(root, "succeeded", &out->succeeded, err, err_size);
	if (rc == 0)
		rc = get_array(root, "responses", ETCD_RESPONSES_MAX, &arr, err,
			       err_size);
	if (rc == 0 && arr && json_array_size(arr) > 0) {
		out->responses =
		    calloc(json_array_size(arr), sizeof(*out->responses));
		if (!out->responses)
			rc = DL_ENOMEM;
		for (size_t i = 0; rc == 0 && i < json_array_size(arr); i++) {
			out->n_responses++;
			rc =
			    op_response_from(json_array_get(arr, i),
					     &out->responses[i], err, err_size);
		}
	}
	json_decref(root);
	return rc;
}

static int lease_from(json_t *obj, struct etcd_lease_response *out, char *err,
		      size_t err_size)
{
	int rc = parse_header(obj, 1, &out->header, err, err_size);

	if (rc == 0)
		rc = get_i64(obj, "ID", &out->id, err, err_size);
	if (rc == 0)
		rc = get_i64(obj, "TTL", &out->ttl_s, err, err_size);
	if (rc == 0 && out->id == 0)
		rc = proto(err, err_size, "etcd answer: no lease ID");
	return rc;
}

int etcd_parse_lease_grant(const char *data, size_t len,
			   struct etcd_lease_response *out, char *err,
			   size_t err_size)
{
	json_t *root, *e;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	e = json_object_get(root, "error");
	if (e && !json_is_string(e))
		rc = proto(err, err_size, "etcd answer: error is not a string");
	else if (e && json_string_length(e) > 0) {
		char m[ETCD_MESSAGE_MAX];
		copy_message(m, sizeof(m), json_string_value(e));
		rc = proto(err, err_size, "etcd: lease grant failed: %s", m);
	}
	if (rc == 0)
		rc = lease_from(root, out, err, err_size);
	if (rc == 0 && out->ttl_s <= 0)
		rc = proto(err, err_size,
			   "etcd answer: lease granted with "
			   "no TTL");
	json_decref(root);
	return rc;
}

int etcd_parse_lease_keepalive(const char *data, size_t len,
			       struct etcd_lease_response *out, char *err,
			       size_t err_size)
{
	json_t *root, *result;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	result = get_object(root, "result", &rc, err, err_size);
	if (rc == 0 && !result)
		rc = proto(err, err_size,
			   "etcd answer: keepalive with no "
			   "result");
	if (rc == 0)
		rc = lease_from(result, out, err, err_size);
	if (rc == 0 && out->ttl_s <= 0)
		rc = dl_errorf(err, err_size, DL_ENOTFOUND,
			       "etcd: lease %lld has expired",
			       (long long)out->id);
	json_decref(root);
	return rc;
}

int etcd_parse_header_only(const char *data, size_t len,
			   struct etcd_header *out, char *err, size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = parse_header(root, 1, out, err, err_size);
	json_decref(root);
	return rc;
}

int etcd_parse_authenticate(const char *data, size_t len, char *token,
			    size_t token_size, char *err, size_t err_size)
{
	struct etcd_header h;
	json_t *root, *t;
	const char *s;
	size_t n;
	int rc;

	if (token_size > 0)
		token[0] = '\0';
	rc = load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	rc = parse_header(root, 1, &h, err, err_size);
	t = json_object_get(root, "token");
	if (rc == 0 && !json_is_string(t))
		rc = proto(err, err_size, "etcd answer: no token");
	if (rc == 0) {
		s = json_string_value(t);
		n = json_string_length(t);
		if (n == 0 || n > ETCD_TOKEN_MAX)
			rc = proto(err, err_size,
				   "etcd answer: a token of %zu bytes", n);
		for (size_t i = 0; rc == 0 && i < n; i++)
			if ((unsigned char)s[i] <= 0x20 ||
			    (unsigned char)s[i] >= 0x7f)
				rc = proto(err, err_size,
					   "etcd answer: a token with a byte "
					   "that is not printable");
		if (rc == 0 && n >= token_size)
			rc = dl_errorf(err, err_size, DL_ELIMIT,
				       "etcd answer: a token of %zu bytes", n);
		if (rc == 0)
			memcpy(token, s, n + 1);
	}
	json_decref(root);
	return rc;
}

void etcd_range_response_release(struct etcd_range_response *r)
{
	kvs_free(r->kvs, r->n_kvs);
	memset(r, 0, sizeof(*r));
}

void etcd_put_response_release(struct etcd_put_response *r)
{
	etcd_kv_release(&r->prev_kv);
	memset(r, 0, sizeof(*r));
}

void etcd_delete_response_release(struct etcd_delete_response *r)
{
	kvs_free(r->prev_kvs, r->n_prev_kvs);
	memset(r, 0, sizeof(*r));
}

void etcd_txn_response_release(struct etcd_txn_response *r)
{
	for (size_t i = 0; i < r->n_responses; i++) {
		etcd_range_response_release(&r->responses[i].range);
		etcd_put_response_release(&r->responses[i].put);
		etcd_delete_response_release(&r->responses[i].del);
	}
	free(r->responses);
	memset(r, 0, sizeof(*r));
}

/* --------------------------------------------------------------- watch */

static int event_from(json_t *v, struct etcd_event *ev, char *err,
		      size_t err_size)
{
	json_t *type, *kv, *prev;
	int rc;

	if (!json_is_object(v))
		return proto(err, err_size,
			     "etcd answer: an event is not an object");
	type = json_object_get(v, "type");
	if (!type || (json_is_string(type) &&
		      strcmp(json_string_value(type), "PUT") == 0))
		ev->type = ETCD_EVENT_PUT;
	else if (json_is_string(type) &&
		 strcmp(json_string_value(type), "DELETE") == 0)
		ev->type = ETCD_EVENT_DELETE;
	else
		return proto(err, err_size,
			     "etcd answer: an event of unknown type");
	kv = get_object(v, "kv", &rc, err, err_size);
	if (rc != 0)
		return rc;
	if (!kv)
		return proto(err, err_size, "etcd answer: an event with no kv");
	rc = parse_kv(kv, &ev->kv, err, err_size);
	if (rc != 0)
		return rc;
	prev = get_object(v, "prev_kv", &rc, err, err_size);
	if (rc == 0 && prev) {
		ev->has_prev_kv = 1;
		rc = parse_kv(prev, &ev->prev_kv, err, err_size);
	}
	return rc;
}

int etcd_parse_watch(const char *data, size_t len,
		     struct etcd_watch_response *out, char *err,
		     size_t err_size)
{
	json_t *root, *res = NULL, *arr = NULL, *reason;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	res = get_object(root, "result", &rc, err, err_size);
	if (rc == 0 && !res)
		rc = proto(err, err_size,
			   "etcd answer: a watch answer with "
			   "no result");
	/* the header of a cancel may be empty of all but ids */
	if (rc == 0)
		rc = parse_header(res, 1, &out->header, err, err_size);
	/* -1: etcd refused to create the watch (canceled, with a reason:
	 * an invalid auth token, say); any other negative id is not etcd's */
	if (rc == 0)
		rc = get_int(res, "watch_id", 1, -1, INT64_MAX, &out->watch_id,
			     err, err_size);
	if (rc == 0)
		rc = get_bool(res, "created", &out->created, err, err_size);
	if (rc == 0)
		rc = get_bool(res, "canceled", &out->canceled, err, err_size);
	if (rc == 0)
		rc = get_bool(res, "fragment", &out->fragment, err, err_size);
	if (rc == 0)
		rc = get_i64(res, "compact_revision", &out->compact_revision,
			     err, err_size);
	if (rc == 0) {
		reason = json_object_get(res, "cancel_reason");
		if (reason && !json_is_string(reason))
			rc = proto(err, err_size,
				   "etcd answer: cancel_reason is not a "
				   "string");
		else if (reason)
			copy_message(out->cancel_reason,
				     sizeof(out->cancel_reason),
				     json_string_value(reason));
	}
	if (rc == 0)
		rc =
		    get_array(res, "events", ETCD_KVS_MAX, &arr, err, err_size);
	if (rc == 0 && arr && json_array_size(arr) > 0) {
		out->events =
		    calloc(json_array_size(arr), sizeof(*out->events));
		if (!out->events)
			rc = DL_ENOMEM;
		for (size_t i = 0; rc == 0 && i < json_array_size(arr); i++) {
			out->n_events++;
			rc = event_from(json_array_get(arr, i), &out->events[i],
					err, err_size);
		}
	}
	json_decref(root);
	return rc;
}

void etcd_watch_response_release(struct etcd_watch_response *w)
{
	for (size_t i = 0; i < w->n_events; i++) {
		etcd_kv_release(&w->events[i].kv);
		etcd_kv_release(&w->events[i].prev_kv);
	}
	free(w->events);
	memset(w, 0, sizeof(*w));
}
