/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_answer.c - the parsers of etcd's v3 JSON gateway answers and of one
 * watch answer (etcd_proto.h), on the field readers of
 * etcd_answer_field.c (etcd_answer_int.h). No I/O.
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
#include "etcd_answer_int.h"
#include "etcd_proto.h"

int etcd_is_error(const char *data, size_t len)
{
	struct etcd_error e;
	json_t *root;
	int rc;

	if (len > ETCD_ANSWER_MAX ||
	    jsonh_parse(data, len, ETCD_JSON_DEPTH_MAX, &root, NULL, 0) != 0)
		return 0;
	rc = etcd_ans_error(root, &e, NULL, 0);
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
	rc = etcd_ans_error(root, out, err, err_size);
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
	    etcd_ans_header(root, header_required, &out->header, err, err_size);

	if (rc == 0)
		rc = etcd_ans_kvs(root, "kvs", &out->kvs, &out->n_kvs, err,
				  err_size);
	if (rc == 0)
		rc = etcd_ans_bool(root, "more", &out->more, err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(root, "count", &out->count, err, err_size);
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
	    etcd_ans_header(root, header_required, &out->header, err, err_size);
	json_t *prev;

	if (rc != 0)
		return rc;
	prev = etcd_ans_object(root, "prev_kv", &rc, err, err_size);
	if (rc == 0 && prev) {
		out->has_prev_kv = 1;
		rc = etcd_ans_kv(prev, &out->prev_kv, err, err_size);
	}
	return rc;
}

static int delete_from(json_t *root, int header_required,
		       struct etcd_delete_response *out, char *err,
		       size_t err_size)
{
	int rc =
	    etcd_ans_header(root, header_required, &out->header, err, err_size);

	if (rc == 0)
		rc =
		    etcd_ans_i64(root, "deleted", &out->deleted, err, err_size);
	if (rc == 0)
		rc = etcd_ans_kvs(root, "prev_kvs", &out->prev_kvs,
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = etcd_ans_header(root, 1, &out->header, err, err_size);
	if (rc == 0)
		rc = etcd_ans_bool(root, "succeeded", &out->succeeded, err,
				   err_size);
	if (rc == 0)
		rc = etcd_ans_array(root, "responses", ETCD_RESPONSES_MAX, &arr,
				    err, err_size);
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
	int rc = etcd_ans_header(obj, 1, &out->header, err, err_size);

	if (rc == 0)
		rc = etcd_ans_i64(obj, "ID", &out->id, err, err_size);
	if (rc == 0)
		rc = etcd_ans_i64(obj, "TTL", &out->ttl_s, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	e = json_object_get(root, "error");
	if (e && !json_is_string(e))
		rc = proto(err, err_size, "etcd answer: error is not a string");
	else if (e && json_string_length(e) > 0) {
		char m[ETCD_MESSAGE_MAX];
		etcd_ans_message(m, sizeof(m), json_string_value(e));
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

/* keepalive_one: one object of a keep-alive stream's answer */
static int keepalive_one(const char *data, size_t len,
			 struct etcd_lease_response *out, char *err,
			 size_t err_size)
{
	json_t *root, *result;
	int rc;

	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	result = etcd_ans_object(root, "result", &rc, err, err_size);
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

struct keepalive_first {
	struct etcd_lease_response *out;
	char *err;
	size_t err_size;
	int rc, seen;
};

/* keepalive_object: the stream's first object is the answer; what the
 * gateway writes after it (an error when the stream ended badly) is
 * not about this keep-alive. 1 stops the splitter. */
static int keepalive_object(void *arg, const char *obj, size_t len)
{
	struct keepalive_first *f = arg;
	f->seen = 1;
	f->rc = keepalive_one(obj, len, f->out, f->err, f->err_size);
	return 1;
}

/* The keep-alive is one of etcd's streams: the gateway writes each
 * answer as an object, and when the stream ends with an error (a
 * member under load cancelling it) an error object after the answer.
 * The lease was renewed by the first; only it counts. */
int etcd_parse_lease_keepalive(const char *data, size_t len,
			       struct etcd_lease_response *out, char *err,
			       size_t err_size)
{
	struct keepalive_first f = {out, err, err_size, 0, 0};
	struct etcd_splitter s;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > ETCD_ANSWER_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd answer of %zu bytes is over the limit "
				 "of %d",
				 len, ETCD_ANSWER_MAX);
	etcd_splitter_init(&s, ETCD_ANSWER_MAX);
	rc = etcd_splitter_feed(&s, data, len, keepalive_object, &f, err,
				err_size);
	etcd_splitter_release(&s);
	if (f.seen)
		return f.rc;
	if (rc != 0)
		return rc; /* not an object: not etcd */
	return proto(err, err_size, "etcd answer: keepalive %s",
		     len ? "cut short" : "empty");
}

int etcd_parse_header_only(const char *data, size_t len,
			   struct etcd_header *out, char *err, size_t err_size)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc == 0)
		rc = etcd_ans_header(root, 1, out, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	rc = etcd_ans_header(root, 1, &h, err, err_size);
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
	etcd_ans_kvs_free(r->kvs, r->n_kvs);
	memset(r, 0, sizeof(*r));
}

void etcd_put_response_release(struct etcd_put_response *r)
{
	etcd_kv_release(&r->prev_kv);
	memset(r, 0, sizeof(*r));
}

void etcd_delete_response_release(struct etcd_delete_response *r)
{
	etcd_ans_kvs_free(r->prev_kvs, r->n_prev_kvs);
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
	kv = etcd_ans_object(v, "kv", &rc, err, err_size);
	if (rc != 0)
		return rc;
	if (!kv)
		return proto(err, err_size, "etcd answer: an event with no kv");
	rc = etcd_ans_kv(kv, &ev->kv, err, err_size);
	if (rc != 0)
		return rc;
	prev = etcd_ans_object(v, "prev_kv", &rc, err, err_size);
	if (rc == 0 && prev) {
		ev->has_prev_kv = 1;
		rc = etcd_ans_kv(prev, &ev->prev_kv, err, err_size);
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
	rc = etcd_ans_load(data, len, &root, err, err_size);
	if (rc != 0)
		return rc;
	res = etcd_ans_object(root, "result", &rc, err, err_size);
	if (rc == 0 && !res)
		rc = proto(err, err_size,
			   "etcd answer: a watch answer with "
			   "no result");
	/* the header of a cancel may be empty of all but ids */
	if (rc == 0)
		rc = etcd_ans_header(res, 1, &out->header, err, err_size);
	/* -1: etcd refused to create the watch (canceled, with a reason:
	 * an invalid auth token, say); any other negative id is not etcd's */
	if (rc == 0)
		rc = etcd_ans_int(res, "watch_id", 1, -1, INT64_MAX,
				  &out->watch_id, err, err_size);
	if (rc == 0)
		rc =
		    etcd_ans_bool(res, "created", &out->created, err, err_size);
	if (rc == 0)
		rc = etcd_ans_bool(res, "canceled", &out->canceled, err,
				   err_size);
	if (rc == 0)
		rc = etcd_ans_bool(res, "fragment", &out->fragment, err,
				   err_size);
	if (rc == 0)
		rc = etcd_ans_i64(res, "compact_revision",
				  &out->compact_revision, err, err_size);
	if (rc == 0) {
		reason = json_object_get(res, "cancel_reason");
		if (reason && !json_is_string(reason))
			rc = proto(err, err_size,
				   "etcd answer: cancel_reason is not a "
				   "string");
		else if (reason)
			etcd_ans_message(out->cancel_reason,
					 sizeof(out->cancel_reason),
					 json_string_value(reason));
	}
	if (rc == 0)
		rc = etcd_ans_array(res, "events", ETCD_KVS_MAX, &arr, err,
				    err_size);
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

int etcd_answer_range(const struct etcd_answer *a,
		      struct etcd_range_response *r, char *err, size_t err_size)
{
	if (a->rc != 0)
		return dl_errorf(err, err_size, a->rc, "%s", a->error);
	return etcd_parse_range(a->body, a->len, r, err, err_size);
}

int etcd_answer_txn(const struct etcd_answer *a, struct etcd_txn_response *t,
		    char *err, size_t err_size)
{
	if (a->rc != 0)
		return dl_errorf(err, err_size, a->rc, "%s", a->error);
	return etcd_parse_txn(a->body, a->len, t, err, err_size);
}
