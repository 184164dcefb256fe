/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_etcd_proto.c - libFuzzer harness for the etcd gateway protocol
 * layer (agent/etcd/etcd_proto.h): the stream splitter and every answer parser.
 * Whatever the bytes, each must either parse or refuse with an error,
 * never crash, leak or read past its input.
 *
 * The first byte picks the target (byte % 11): 0 the splitter, then the
 * parsers of range, put, deleterange, txn, lease grant, keepalive,
 * authenticate, a watch answer, an error, a header-only answer, on the
 * rest of the input.
 *
 * The splitter is checked against itself: the input fed in one chunk and
 * fed in chunks whose sizes come from the input must yield the same
 * objects and end with the same code (a small object limit, so refusals
 * are reached too); each object it yields goes through the watch and
 * keepalive parsers.
 *
 * The layer is private to agent/etcd/ (agent/etcd/etcd_proto.h), so this
 * harness is built with -Iagent/etcd. Corpus: tests/fuzz/corpus/etcd_proto (the
 * answers in tests/etcd/recorded/, each behind its selector byte).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OBJECT_MAX 2048

struct seen {
	unsigned char *bytes; /* objects, each followed by a 0xff byte */
	size_t len, cap;
	size_t n;
};

static int keep(void *arg, const char *obj, size_t len)
{
	struct seen *s = arg;
	struct etcd_watch_response w;
	struct etcd_lease_response l;
	char err[256];

	if (len == 0 || len > OBJECT_MAX || obj[0] != '{' ||
	    obj[len - 1] != '}')
		abort(); /* the splitter's promise */
	if (s->len + len + 1 > s->cap) {
		size_t cap = (s->len + len + 1) * 2;
		unsigned char *nb = realloc(s->bytes, cap);
		if (!nb)
			abort();
		s->bytes = nb;
		s->cap = cap;
	}
	memcpy(s->bytes + s->len, obj, len);
	s->len += len;
	s->bytes[s->len++] = 0xff;
	s->n++;
	etcd_parse_watch(obj, len, &w, err, sizeof(err));
	etcd_watch_response_release(&w);
	etcd_parse_lease_keepalive(obj, len, &l, err, sizeof(err));
	return 0;
}

static void fuzz_splitter(const uint8_t *data, size_t size)
{
	struct etcd_splitter one, many;
	struct seen a = {0}, b = {0};
	char err[256];
	int rc_one, rc_many = 0;
	size_t i = 0, step = 0;

	etcd_splitter_init(&one, OBJECT_MAX);
	etcd_splitter_init(&many, OBJECT_MAX);
	rc_one = etcd_splitter_feed(&one, (const char *)data, size, keep, &a,
				    err, sizeof(err));
	while (i < size) {
		/* chunk sizes 1..16 from the bytes themselves */
		size_t n = (size_t)(data[step++ % size] & 15) + 1;
		if (n > size - i)
			n = size - i;
		int rc = etcd_splitter_feed(&many, (const char *)data + i, n,
					    keep, &b, err, sizeof(err));
		if (rc != 0 && rc_many == 0)
			rc_many = rc;
		if (rc_many != 0 && rc != rc_many)
			abort(); /* stopped means stopped */
		i += n;
	}
	if (rc_one != rc_many || a.n != b.n || a.len != b.len ||
	    (a.len && memcmp(a.bytes, b.bytes, a.len) != 0))
		abort();
	if (rc_one == 0 &&
	    etcd_splitter_pending(&one) != etcd_splitter_pending(&many))
		abort();
	etcd_splitter_release(&one);
	etcd_splitter_release(&many);
	free(a.bytes);
	free(b.bytes);
}

static void check_kvs(const struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (kvs[i].key_len == 0 || kvs[i].key_len > ETCD_KEY_MAX ||
		    kvs[i].key[kvs[i].key_len] != '\0' ||
		    kvs[i].value_len > ETCD_VALUE_MAX ||
		    kvs[i].value[kvs[i].value_len] != '\0')
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;
	char err[256], token[ETCD_TOKEN_MAX + 1];
	struct etcd_range_response r;
	struct etcd_put_response pu;
	struct etcd_delete_response d;
	struct etcd_txn_response t;
	struct etcd_lease_response l;
	struct etcd_watch_response w;
	struct etcd_error e;
	struct etcd_header h;

	if (size == 0)
		return 0;
	switch (data[0] % 11) {
	case 0: fuzz_splitter(data + 1, n); break;
	case 1:
		if (etcd_parse_range(p, n, &r, err, sizeof(err)) == 0) {
			check_kvs(r.kvs, r.n_kvs);
			if ((uint64_t)r.count < r.n_kvs)
				abort();
		}
		etcd_range_response_release(&r);
		break;
	case 2:
		if (etcd_parse_put(p, n, &pu, err, sizeof(err)) == 0 &&
		    pu.has_prev_kv)
			check_kvs(&pu.prev_kv, 1);
		etcd_put_response_release(&pu);
		break;
	case 3:
		if (etcd_parse_delete(p, n, &d, err, sizeof(err)) == 0)
			check_kvs(d.prev_kvs, d.n_prev_kvs);
		etcd_delete_response_release(&d);
		break;
	case 4:
		etcd_parse_txn(p, n, &t, err, sizeof(err));
		etcd_txn_response_release(&t);
		break;
	case 5:
		if (etcd_parse_lease_grant(p, n, &l, err, sizeof(err)) == 0 &&
		    (l.id <= 0 || l.ttl_s <= 0))
			abort();
		break;
	case 6: etcd_parse_lease_keepalive(p, n, &l, err, sizeof(err)); break;
	case 7:
		if (etcd_parse_authenticate(p, n, token, sizeof(token), err,
					    sizeof(err)) == 0 &&
		    token[0] == '\0')
			abort();
		break;
	case 8:
		if (etcd_parse_watch(p, n, &w, err, sizeof(err)) == 0)
			for (size_t i = 0; i < w.n_events; i++)
				check_kvs(&w.events[i].kv, 1);
		etcd_watch_response_release(&w);
		break;
	case 9:
		if (etcd_parse_error(p, n, &e, err, sizeof(err)) == 0) {
			if (!etcd_is_error(p, n) ||
			    strlen(e.message) >= sizeof(e.message))
				abort();
		}
		break;
	case 10: etcd_parse_header_only(p, n, &h, err, sizeof(err)); break;
	}
	return 0;
}
