/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_fake.c - the recorded fake of the etcd client (etcd_fake.h).
 */
#include "etcd_fake.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dlaunch/error.h"

struct etcd_call calls[FAKE_CALLS_MAX];
size_t ncalls;
struct etcd_watch watches[FAKE_CALLS_MAX];
size_t nwatches;
char fake_log[4096];

/* note appends "VERB(WHAT);" to fake_log */
static void note(const char *verb, const char *what)
{
	size_t len = strlen(fake_log);
	snprintf(fake_log + len, sizeof(fake_log) - len, "%s(%s);", verb, what);
}

void fake_reset(void)
{
	for (size_t i = 0; i < ncalls; i++) {
		json_decref(calls[i].success);
		calls[i].success = NULL;
	}
	ncalls = nwatches = 0;
	fake_log[0] = '\0';
}

struct etcd_call *etcd_call(struct etcd_client *c, const char *what,
			    const char *path, json_t *body, unsigned flags,
			    etcd_cb cb, void *arg)
{
	struct etcd_call *k;
	(void)c;
	(void)flags;
	if (ncalls == FAKE_CALLS_MAX)
		return NULL;
	k = &calls[ncalls++];
	memset(k, 0, sizeof(*k));
	snprintf(k->what, sizeof(k->what), "%s", what);
	snprintf(k->path, sizeof(k->path), "%s", path);
	if (strcmp(path, "/v3/kv/txn") == 0) {
		json_t *ops = json_object_get(body, "success");
		size_t n = json_array_size(ops);
		const char *first = json_string_value(json_object_get(
		    json_object_get(json_array_get(ops, 0), "request_put"),
		    "key"));
		const char *last = json_string_value(json_object_get(
		    json_object_get(json_array_get(ops, n ? n - 1 : 0),
				    "request_put"),
		    "key"));
		k->ops = n;
		k->success = json_incref(ops);
		snprintf(k->first_key, sizeof(k->first_key), "%s",
			 first ? first : "");
		snprintf(k->last_key, sizeof(k->last_key), "%s",
			 last ? last : "");
	}
	k->cb = cb;
	k->arg = arg;
	note("call", what);
	return k;
}

void etcd_cancel(struct etcd_call *call)
{
	if (!call)
		return;
	call->canceled = 1;
	note("cancel", call->what);
}

struct etcd_watch *etcd_watch_new(struct etcd_client *c, const char *what,
				  const void *key, size_t key_len,
				  const void *range_end, size_t range_end_len,
				  int64_t start_revision, int prev_kv,
				  etcd_watch_cb cb, void *arg)
{
	struct etcd_watch *w;
	(void)c;
	(void)key;
	(void)key_len;
	(void)range_end;
	(void)range_end_len;
	(void)prev_kv;
	if (nwatches == FAKE_CALLS_MAX)
		return NULL;
	w = &watches[nwatches++];
	memset(w, 0, sizeof(*w));
	snprintf(w->what, sizeof(w->what), "%s", what);
	w->start_revision = start_revision;
	w->cb = cb;
	w->arg = arg;
	snprintf(fake_log + strlen(fake_log),
		 sizeof(fake_log) - strlen(fake_log), "watch(%s@%lld);", what,
		 (long long)start_revision);
	return w;
}

void etcd_watch_free(struct etcd_watch *w)
{
	if (!w)
		return;
	w->freed = 1;
	note("unwatch", w->what);
}

void answer(size_t i, const char *body)
{
	struct etcd_answer a = {0, body, strlen(body), ""};
	assert_true(i < ncalls);
	assert_false(calls[i].canceled);
	assert_false(calls[i].answered);
	calls[i].answered = 1;
	calls[i].cb(calls[i].arg, &a);
}

void answer_error(size_t i, int rc, const char *why)
{
	struct etcd_answer a = {rc, "", 0, why};
	assert_true(i < ncalls);
	assert_false(calls[i].canceled);
	assert_false(calls[i].answered);
	calls[i].answered = 1;
	calls[i].cb(calls[i].arg, &a);
}

size_t pending(void)
{
	size_t n = 0;
	for (size_t i = 0; i < ncalls; i++)
		n += !calls[i].canceled && !calls[i].answered;
	return n;
}

size_t answer_left(const char *body)
{
	size_t n = 0;
	for (size_t i = 0; i < ncalls; i++)
		if (!calls[i].canceled && !calls[i].answered) {
			answer(i, body);
			n++;
		}
	return n;
}

size_t txns_pending(void)
{
	size_t n = 0;
	for (size_t i = 0; i < ncalls; i++)
		n += strcmp(calls[i].path, "/v3/kv/txn") == 0 &&
		     !calls[i].canceled && !calls[i].answered;
	return n;
}

size_t oldest_txn(void)
{
	size_t i;
	for (i = 0; i < ncalls; i++)
		if (strcmp(calls[i].path, "/v3/kv/txn") == 0 &&
		    !calls[i].canceled && !calls[i].answered)
			break;
	return i;
}

void b64(const char *in, char *out)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0;
	const unsigned char *s = (const unsigned char *)in;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)s[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		out[o++] = t[(v >> 18) & 63];
		out[o++] = t[(v >> 12) & 63];
		out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? t[v & 63] : '=';
	}
	out[o] = '\0';
}

int is_key(const char *k, const char *key)
{
	char want[128];
	b64(key, want);
	return strcmp(k, want) == 0;
}

static int b64_digit(char c)
{
	const char *d =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *at = c ? strchr(d, c) : NULL;
	return at ? (int)(at - d) : -1;
}

char *txn_put(size_t i, const char *key)
{
	size_t k;
	json_t *op;
	if (i >= ncalls)
		return NULL;
	json_array_foreach(calls[i].success, k, op)
	{
		json_t *put = json_object_get(op, "request_put");
		const char *v =
		    json_string_value(json_object_get(put, "value"));
		const char *pk = json_string_value(json_object_get(put, "key"));
		char *out;
		size_t n = 0;
		unsigned acc = 0;
		int bits = 0;
		if (!pk || !v || !is_key(pk, key))
			continue;
		out = malloc(strlen(v) + 1);
		assert_non_null(out);
		for (; *v && *v != '='; v++) {
			int d = b64_digit(*v);
			assert_true(d >= 0);
			acc = (acc << 6) | (unsigned)d;
			bits += 6;
			if (bits >= 8) {
				bits -= 8;
				out[n++] = (char)((acc >> bits) & 0xff);
			}
		}
		out[n] = '\0';
		return out;
	}
	return NULL;
}
