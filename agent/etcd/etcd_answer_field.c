/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_answer_field.c - what every parser of etcd's answers reads with
 * (etcd_answer_int.h): base64, the gateway's numbers in strings, typed
 * fields, a response header, key-values, and an answer's etcd error. No
 * I/O. Strict: a number in a string's place, a bad base64 digit, a
 * negative revision is DL_EPROTO, and every size is bounded.
 */
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/parse.h"
#include "etcd_answer_int.h"
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

/* etcd_ans_int reads obj[name], a decimal string (the gateway's int64/uint64),
 * into [min, max]; absent is 0 (a zero value). */
int etcd_ans_int(json_t *obj, const char *name, int is_signed, int64_t min,
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

int etcd_ans_i64(json_t *obj, const char *name, int64_t *out, char *err,
		 size_t err_size)
{
	return etcd_ans_int(obj, name, 1, 0, INT64_MAX, out, err, err_size);
}

int etcd_ans_bool(json_t *obj, const char *name, int *out, char *err,
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

static int etcd_ans_b64(json_t *obj, const char *name, int required, size_t max,
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

/* etcd_ans_object: obj[name] as an object, NULL when absent; *rc set when it
 * is there with another type */
json_t *etcd_ans_object(json_t *obj, const char *name, int *rc, char *err,
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

int etcd_ans_array(json_t *obj, const char *name, size_t max, json_t **out,
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

/* etcd_ans_message keeps at most size - 1 bytes of s, control bytes as '?' (an
 * error's text goes to the log) */
void etcd_ans_message(char *dst, size_t size, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		dst[i] =
		    (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	dst[i] = '\0';
}

int etcd_ans_header(json_t *obj, int required, struct etcd_header *h, char *err,
		    size_t err_size)
{
	int rc;
	json_t *v = etcd_ans_object(obj, "header", &rc, err, err_size);

	memset(h, 0, sizeof(*h));
	if (rc != 0)
		return rc;
	if (!v)
		return required ? proto(err, err_size, "etcd answer: no header")
				: 0;
	rc = etcd_ans_int(v, "cluster_id", 0, 0, UINT64_MAX, &h->cluster_id,
			  err, err_size);
	if (rc == 0)
		rc = etcd_ans_int(v, "member_id", 0, 0, UINT64_MAX,
				  &h->member_id, err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(v, "revision", &h->revision, err, err_size);
	if (rc == 0)
		rc = etcd_ans_int(v, "raft_term", 0, 0, UINT64_MAX,
				  &h->raft_term, err, err_size);
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

int etcd_ans_kv(json_t *v, struct etcd_kv *kv, char *err, size_t err_size)
{
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!json_is_object(v))
		return proto(err, err_size,
			     "etcd answer: a kv is not an object");
	rc = etcd_ans_b64(v, "key", 1, ETCD_KEY_MAX, &kv->key, &kv->key_len,
			  err, err_size);
	if (rc == 0 && kv->key_len == 0)
		rc = proto(err, err_size, "etcd answer: a kv has an empty key");
	if (rc == 0)
		rc = etcd_ans_b64(v, "value", 0, ETCD_VALUE_MAX, &kv->value,
				  &kv->value_len, err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(v, "create_revision", &kv->create_revision,
				  err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(v, "mod_revision", &kv->mod_revision, err,
				  err_size);
	if (rc == 0)
		rc = etcd_ans_i64(v, "version", &kv->version, err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(v, "lease", &kv->lease, err, err_size);
	return rc;
}

void etcd_ans_kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		etcd_kv_release(&kvs[i]);
	free(kvs);
}

/* etcd_ans_kvs reads obj[name], an array of kvs (absent: none) */
int etcd_ans_kvs(json_t *obj, const char *name, struct etcd_kv **out,
		 size_t *n_out, char *err, size_t err_size)
{
	json_t *arr;
	int rc = etcd_ans_array(obj, name, ETCD_KVS_MAX, &arr, err, err_size);

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
		rc = etcd_ans_kv(json_array_get(arr, i), &(*out)[i], err,
				 err_size);
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

/* etcd_ans_error reads an error answer's code and message; 1 when root is
 * one, 0 when not, negative on a malformed one. Unary errors are
 * {"error": "...", "message": "...", "code": N} (3.4) or {"code": N,
 * "message": "..."} (3.5+); a stream's are {"error": {"grpc_code": N,
 * "message": "..."}}. An answer with a header or a result is no error (a
 * lease grant has an "error" string of its own). */
int etcd_ans_error(json_t *root, struct etcd_error *e, char *err,
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
	etcd_ans_message(e->message, sizeof(e->message),
			 msg ? json_string_value(msg) : "");
	return 1;
}

/* etcd_ans_load parses an answer and turns an etcd error into its code, with
 * "etcd: MESSAGE (code N)" in err. *root: a new reference on success. */
int etcd_ans_load(const char *data, size_t len, json_t **root, char *err,
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
	rc = etcd_ans_error(*root, &e, err, err_size);
	if (rc == 1)
		rc = dl_errorf(err, err_size, etcd_grpc_to_dl(e.code),
			       "etcd: %s (code %d)", e.message, e.code);
	if (rc != 0) {
		json_decref(*root);
		*root = NULL;
	}
	return rc;
}
