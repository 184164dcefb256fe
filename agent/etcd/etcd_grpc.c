/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_grpc.c - the LeaseKeepAlive and Watch messages in protobuf and
 * gRPC's framing (etcd_grpc.h). No I/O.
 *
 * Answers are decoded by one reader driven by tables, one a message, that
 * say for each field etcd sends its number, its name and where and how it
 * is kept in the C struct (etcd_proto.h's, filled as the JSON gateway's
 * parsers fill them): the tables are the part of rpc.proto and kv.proto
 * that the agent reads, and can be checked against them line by line.
 * Requests are written by one writer that counts before it writes, so
 * that a frame's lengths come from the very code that writes it.
 */
#include "etcd_grpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"

/* protobuf wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* bytes of a gRPC message's head: the compressed flag, the length */
#define FRAME_HEAD 5
/* protobuf's greatest field number */
#define FIELD_NUM_MAX ((1u << 29) - 1)

/* --------------------------------------------------------------- writing */

/* A protobuf writer into p; with p NULL it only counts the bytes. */
struct pb_out {
	unsigned char *p;
	size_t n;
};

static void put_raw(struct pb_out *o, const void *data, size_t len)
{
	if (o->p && len)
		memcpy(o->p + o->n, data, len);
	o->n += len;
}

static void put_varint(struct pb_out *o, uint64_t v)
{
	unsigned char b[10];
	size_t n = 0;
	while (v >= 0x80) {
		b[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	b[n++] = (unsigned char)v;
	put_raw(o, b, n);
}

static void put_key(struct pb_out *o, unsigned num, unsigned type)
{
	put_varint(o, (uint64_t)num << 3 | type);
}

/* put_uint writes a varint field (an int64 as its two's complement, a
 * bool as 1); proto3 leaves out a zero */
static void put_uint(struct pb_out *o, unsigned num, uint64_t v)
{
	if (!v)
		return;
	put_key(o, num, WT_VARINT);
	put_varint(o, v);
}

/* put_bytes writes a bytes field; proto3 leaves out an empty one */
static void put_bytes(struct pb_out *o, unsigned num, const void *data,
		      size_t len)
{
	if (!len)
		return;
	put_key(o, num, WT_LEN);
	put_varint(o, len);
	put_raw(o, data, len);
}

/* put_head writes a gRPC message's head: not compressed, len bytes */
static void put_head(struct pb_out *o, size_t len)
{
	unsigned char h[FRAME_HEAD] = {
	    0, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
	    (unsigned char)(len >> 8), (unsigned char)len};
	put_raw(o, h, sizeof(h));
}

size_t
etcd_grpc_keepalive_frame(int64_t id,
			  unsigned char out[ETCD_GRPC_KEEPALIVE_FRAME_MAX])
{
	/* LeaseKeepAliveRequest { int64 ID = 1; } */
	struct pb_out body = {NULL, 0}, w = {out, 0};
	put_uint(&body, 1, (uint64_t)id);
	put_head(&w, body.n);
	put_uint(&w, 1, (uint64_t)id);
	return w.n;
}

/* writes the message of a oneof member of WatchRequest */
typedef void (*pb_body_fn)(struct pb_out *o, const void *arg);

/* append_watch_request appends to out the framed WatchRequest whose
 * member num is the message body writes: all of it, or nothing (0,
 * DL_ELIMIT, DL_ENOMEM). */
static int append_watch_request(struct buf *out, unsigned num, pb_body_fn body,
				const void *arg)
{
	struct pb_out inner = {NULL, 0}, outer = {NULL, 0}, w;
	int rc;

	body(&inner, arg);
	put_key(&outer, num, WT_LEN);
	put_varint(&outer, inner.n);
	rc = buf_reserve(out, FRAME_HEAD + outer.n + inner.n);
	if (rc)
		return rc;
	w.p = (unsigned char *)out->data + out->len;
	w.n = 0;
	put_head(&w, outer.n + inner.n);
	put_key(&w, num, WT_LEN);
	put_varint(&w, inner.n);
	body(&w, arg);
	out->len += w.n;
	out->data[out->len] = '\0';
	return 0;
}

struct watch_create_args {
	const struct etcd_watch_create *wc;
	int64_t watch_id;
};

static void watch_create_body(struct pb_out *o, const void *arg)
{
	/* WatchCreateRequest { bytes key = 1; bytes range_end = 2; int64
	 * start_revision = 3; bool progress_notify = 4; repeated FilterType
	 * filters = 5; bool prev_kv = 6; int64 watch_id = 7; bool fragment =
	 * 8; } */
	const struct watch_create_args *a = arg;
	const struct etcd_watch_create *wc = a->wc;
	put_bytes(o, 1, wc->key.data, wc->key.len);
	put_bytes(o, 2, wc->range_end.data, wc->range_end.len);
	put_uint(o, 3, (uint64_t)wc->start_revision);
	put_uint(o, 4, wc->progress_notify != 0);
	put_uint(o, 6, wc->prev_kv != 0);
	put_uint(o, 7, (uint64_t)a->watch_id);
}

/* bytes_ok: b is bytes etcd can take as a key or a range end (empty is
 * "absent") */
static int bytes_ok(struct etcd_bytes b)
{
	return b.len <= ETCD_KEY_MAX && (b.data || !b.len);
}

int etcd_grpc_watch_create_frame(const struct etcd_watch_create *wc,
				 int64_t watch_id, struct buf *out)
{
	struct watch_create_args a = {wc, watch_id};
	/* WatchRequest { oneof { WatchCreateRequest create_request = 1; ...
	 * } } */
	if (!wc->key.len || !bytes_ok(wc->key) || !bytes_ok(wc->range_end) ||
	    wc->start_revision < 0 || watch_id <= 0)
		return DL_EINVAL;
	return append_watch_request(out, 1, watch_create_body, &a);
}

static void watch_cancel_body(struct pb_out *o, const void *arg)
{
	/* WatchCancelRequest { int64 watch_id = 1; } */
	const int64_t *watch_id = arg;
	put_uint(o, 1, (uint64_t)*watch_id);
}

int etcd_grpc_watch_cancel_frame(int64_t watch_id, struct buf *out)
{
	/* WatchRequest { oneof { ...; WatchCancelRequest cancel_request = 2;
	 * } }; watch 0 is etcd's first, an empty cancel_request */
	if (watch_id < 0)
		return DL_EINVAL;
	return append_watch_request(out, 2, watch_cancel_body, &watch_id);
}

/* --------------------------------------------------------------- reading */

/* One field as it is on the wire. */
struct pb_field {
	unsigned num, type;
	uint64_t v;		/* WT_VARINT */
	const unsigned char *p; /* WT_LEN: its bytes */
	size_t len;
};

/* get_varint reads a varint at *pos of msg[0..n): 0, or -1 when it is cut
 * short or longer than 10 bytes */
static int get_varint(const unsigned char *msg, size_t n, size_t *pos,
		      uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 70; shift += 7) {
		if (*pos >= n)
			return -1;
		unsigned char b = msg[(*pos)++];
		if (shift == 63 && b > 1)
			return -1;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* pb_next reads the field at *pos of msg[0..n) into f and moves *pos past
 * it: 1, 0 at the end, -1 when it is not protobuf (cut short, field 0, a
 * group's wire type, which proto3 has none of) */
static int pb_next(const unsigned char *msg, size_t n, size_t *pos,
		   struct pb_field *f)
{
	static const size_t fixed[8] = {[WT_I64] = 8, [WT_I32] = 4};
	uint64_t key;

	if (*pos >= n)
		return 0;
	if (get_varint(msg, n, pos, &key) != 0 || key >> 3 == 0 ||
	    key >> 3 > FIELD_NUM_MAX)
		return -1;
	f->num = (unsigned)(key >> 3);
	f->type = key & 7;
	f->v = 0;
	switch (f->type) {
	case WT_VARINT: return get_varint(msg, n, pos, &f->v) == 0 ? 1 : -1;
	case WT_LEN:
		if (get_varint(msg, n, pos, &f->v) != 0 || f->v > n - *pos)
			return -1;
		f->len = (size_t)f->v;
		break;
	case WT_I64:
	case WT_I32: f->len = fixed[f->type]; break;
	default: return -1;
	}
	if (f->len > n - *pos)
		return -1;
	f->p = msg + *pos;
	*pos += f->len;
	return 1;
}

/* How a known field is kept in its C struct (its wire type follows). */
enum pb_kind {
	PB_INT64,    /* int64_t, at least .min */
	PB_UINT64,   /* uint64_t */
	PB_BOOL,     /* int, 0 or 1 */
	PB_ENUM,     /* an enum, 0 to .max */
	PB_BYTES,    /* char *, owned, NUL-terminated ("" when absent), its
			length at .aux; .min to .max bytes */
	PB_TEXT,     /* char[.max]: cut to fit, control bytes as '?' (it is
			for the log) */
	PB_MESSAGE,  /* a struct of .sub's; the int at .aux set to 1 when it
			is there (NO_AUX: none) */
	PB_REPEATED, /* an array of .sub's structs, allocated, its count
			(size_t) at .aux; at most .max of them */
};

#define NO_AUX SIZE_MAX

struct pb_message;

/* A field of a message that the agent reads. */
struct pb_known {
	unsigned num;
	const char *name;
	enum pb_kind kind;
	size_t off, aux;
	int64_t min;
	uint64_t max;
	const struct pb_message *sub;
};

/* A message (named as in the .proto): its known fields, and which must
 * be there (bit num). A message with a repeated field is read once, not
 * merged (etcd's answers have it at their top only). */
struct pb_message {
	const char *name;
	size_t size;
	const struct pb_known *fields;
	size_t n_fields;
	uint64_t required;
};

#define FIELDS(a) a, sizeof(a) / sizeof(a[0])
/* a table's entry, by kind: field number, C struct, member (its length,
 * count or presence flag), and the bounds */
#define KNOWN(...)                                                             \
	{                                                                      \
		__VA_ARGS__                                                    \
	}
#define INT64(n, T, m, lo)                                                     \
	KNOWN(n, #m, PB_INT64, offsetof(T, m), NO_AUX, lo, 0, NULL)
#define UINT64(n, T, m)                                                        \
	KNOWN(n, #m, PB_UINT64, offsetof(T, m), NO_AUX, 0, 0, NULL)
#define BOOL(n, T, m) KNOWN(n, #m, PB_BOOL, offsetof(T, m), NO_AUX, 0, 1, NULL)
#define ENUM(n, T, m, hi)                                                      \
	KNOWN(n, #m, PB_ENUM, offsetof(T, m), NO_AUX, 0, hi, NULL)
#define BYTES(n, T, m, lo, hi)                                                 \
	KNOWN(n, #m, PB_BYTES, offsetof(T, m), offsetof(T, m##_len), lo, hi,   \
	      NULL)
#define TEXT(n, T, m)                                                          \
	KNOWN(n, #m, PB_TEXT, offsetof(T, m), NO_AUX, 0, sizeof(((T *)0)->m),  \
	      NULL)
#define MESSAGE(n, T, m, has, sub)                                             \
	KNOWN(n, #m, PB_MESSAGE, offsetof(T, m), has, 0, 0, sub)
#define REPEATED(n, T, m, count, hi, sub)                                      \
	KNOWN(n, #m, PB_REPEATED, offsetof(T, m), offsetof(T, count), 0, hi,   \
	      sub)

/* the enum of an event's type is kept through an int */
_Static_assert(sizeof(enum etcd_event_type) == sizeof(int),
	       "enum etcd_event_type is not an int");

/* mvccpb.KeyValue { bytes key = 1; int64 create_revision = 2; int64
 * mod_revision = 3; int64 version = 4; bytes value = 5; int64 lease = 6; } */
static const struct pb_known kv_fields[] = {
    BYTES(1, struct etcd_kv, key, 1, ETCD_KEY_MAX),
    INT64(2, struct etcd_kv, create_revision, 0),
    INT64(3, struct etcd_kv, mod_revision, 0),
    INT64(4, struct etcd_kv, version, 0),
    BYTES(5, struct etcd_kv, value, 0, ETCD_VALUE_MAX),
    INT64(6, struct etcd_kv, lease, 0),
};
static const struct pb_message kv_message = {"KeyValue", sizeof(struct etcd_kv),
					     FIELDS(kv_fields), 1u << 1};

/* mvccpb.Event { EventType type = 1; KeyValue kv = 2; KeyValue prev_kv =
 * 3; } */
static const struct pb_known event_fields[] = {
    ENUM(1, struct etcd_event, type, ETCD_EVENT_DELETE),
    MESSAGE(2, struct etcd_event, kv, NO_AUX, &kv_message),
    MESSAGE(3, struct etcd_event, prev_kv,
	    offsetof(struct etcd_event, has_prev_kv), &kv_message),
};
static const struct pb_message event_message = {
    "Event", sizeof(struct etcd_event), FIELDS(event_fields), 1u << 2};

/* ResponseHeader { uint64 cluster_id = 1; uint64 member_id = 2; int64
 * revision = 3; uint64 raft_term = 4; } */
static const struct pb_known header_fields[] = {
    UINT64(1, struct etcd_header, cluster_id),
    UINT64(2, struct etcd_header, member_id),
    INT64(3, struct etcd_header, revision, 0),
    UINT64(4, struct etcd_header, raft_term),
};
static const struct pb_message header_message = {
    "ResponseHeader", sizeof(struct etcd_header), FIELDS(header_fields), 0};

/* WatchResponse { ResponseHeader header = 1; int64 watch_id = 2; bool
 * created = 3; bool canceled = 4; int64 compact_revision = 5; string
 * cancel_reason = 6; bool fragment = 7; repeated mvccpb.Event events =
 * 11; }. watch_id -1: etcd refused to create the watch; any other
 * negative id is not etcd's. */
static const struct pb_known watch_fields[] = {
    MESSAGE(1, struct etcd_watch_response, header, NO_AUX, &header_message),
    INT64(2, struct etcd_watch_response, watch_id, -1),
    BOOL(3, struct etcd_watch_response, created),
    BOOL(4, struct etcd_watch_response, canceled),
    INT64(5, struct etcd_watch_response, compact_revision, 0),
    TEXT(6, struct etcd_watch_response, cancel_reason),
    BOOL(7, struct etcd_watch_response, fragment),
    REPEATED(11, struct etcd_watch_response, events, n_events, ETCD_KVS_MAX,
	     &event_message),
};
static const struct pb_message watch_message = {
    "WatchResponse", sizeof(struct etcd_watch_response), FIELDS(watch_fields),
    1u << 1};

/* LeaseKeepAliveResponse { ResponseHeader header = 1; int64 ID = 2; int64
 * TTL = 3; }: the header is not read; the values are checked after */
static const struct pb_known keepalive_fields[] = {
    INT64(2, struct etcd_grpc_keepalive, id, INT64_MIN),
    INT64(3, struct etcd_grpc_keepalive, ttl, INT64_MIN),
};
static const struct pb_message keepalive_message = {
    "LeaseKeepAliveResponse", sizeof(struct etcd_grpc_keepalive),
    FIELDS(keepalive_fields), 0};

/* What one answer is read with: the whole of it (for the offsets in
 * errors), and the caller's message buffer. */
struct pb_reading {
	const char *what; /* "watch answer" */
	const unsigned char *start;
	size_t n;
	char *err;
	size_t err_size;
};

static int pb_decode(const struct pb_reading *rd, const struct pb_message *m,
		     const unsigned char *msg, size_t n, void *dst);

/* at: the member of dst at offset off */
static void *at(void *dst, size_t off)
{
	return (char *)dst + off;
}

/* pb_int64: a varint as the int64 it encodes (two's complement) */
static int64_t pb_int64(uint64_t v)
{
	return v <= INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}

static int pb_broken(const struct pb_reading *rd, const unsigned char *msg,
		     size_t pos)
{
	return dl_errorf(rd->err, rd->err_size, DL_EPROTO,
			 "etcd's %s is not protobuf (at byte %zu of %zu)",
			 rd->what, (size_t)(msg - rd->start) + pos, rd->n);
}

static int pb_bad(const struct pb_reading *rd, const struct pb_message *m,
		  const struct pb_known *k, const char *what)
{
	return dl_errorf(rd->err, rd->err_size, DL_EPROTO,
			 "etcd's %s: %s.%s %s", rd->what, m->name, k->name,
			 what);
}

static unsigned wire_type(enum pb_kind kind)
{
	return kind >= PB_BYTES ? WT_LEN : WT_VARINT;
}

static int pb_wire_type(const struct pb_reading *rd, const struct pb_message *m,
			const struct pb_known *k, unsigned type)
{
	char what[48];
	snprintf(what, sizeof(what), "has wire type %u, not %u", type,
		 wire_type(k->kind));
	return pb_bad(rd, m, k, what);
}

/* store_bytes keeps a copy of f's bytes, NUL-terminated, in place of what
 * an earlier copy of the field held (protobuf: the last one counts) */
static int store_bytes(const struct pb_reading *rd, const struct pb_message *m,
		       const struct pb_known *k, const struct pb_field *f,
		       void *dst)
{
	char **p = at(dst, k->off);
	if (f->len > k->max)
		return dl_errorf(rd->err, rd->err_size, DL_ELIMIT,
				 "etcd's %s: %s.%s is over %llu bytes",
				 rd->what, m->name, k->name,
				 (unsigned long long)k->max);
	if (f->len < (uint64_t)k->min)
		return pb_bad(rd, m, k, "is empty");
	free(*p);
	*p = malloc(f->len + 1);
	*(size_t *)at(dst, k->aux) = 0;
	if (!*p)
		return dl_errorf(rd->err, rd->err_size, DL_ENOMEM,
				 "no memory for etcd's %s", rd->what);
	memcpy(*p, f->p, f->len);
	(*p)[f->len] = '\0';
	*(size_t *)at(dst, k->aux) = f->len;
	return 0;
}

/* store_text keeps what fits of f's bytes, control bytes (and NUL) as '?'
 * since the text goes to the log */
static void store_text(const struct pb_known *k, const struct pb_field *f,
		       void *dst)
{
	char *s = at(dst, k->off);
	size_t i;
	for (i = 0; i < f->len && i + 1 < k->max; i++)
		s[i] = f->p[i] < 0x20 || f->p[i] == 0x7f ? '?' : (char)f->p[i];
	s[i] = '\0';
}

/* store_repeated reads f into the next element of the array that
 * alloc_repeated made; counted first, so that a release frees a
 * half-read one */
static int store_repeated(const struct pb_reading *rd, const struct pb_known *k,
			  const struct pb_field *f, void *dst)
{
	size_t *count = at(dst, k->aux);
	char *array;
	/* the array's pointer is of the struct's type: copied, not cast */
	memcpy(&array, at(dst, k->off), sizeof(array));
	return pb_decode(rd, k->sub, f->p, f->len,
			 array + (*count)++ * k->sub->size);
}

/* store keeps field f (of known field k) in dst */
static int store(const struct pb_reading *rd, const struct pb_message *m,
		 const struct pb_known *k, const struct pb_field *f, void *dst)
{
	int64_t v = pb_int64(f->v);
	switch (k->kind) {
	case PB_INT64:
		if (v < k->min)
			return pb_bad(rd, m, k, "is out of range");
		*(int64_t *)at(dst, k->off) = v;
		return 0;
	case PB_UINT64: *(uint64_t *)at(dst, k->off) = f->v; return 0;
	case PB_BOOL: *(int *)at(dst, k->off) = f->v != 0; return 0;
	case PB_ENUM:
		if (f->v > k->max)
			return pb_bad(rd, m, k, "is of no known value");
		*(int *)at(dst, k->off) = (int)f->v;
		return 0;
	case PB_BYTES: return store_bytes(rd, m, k, f, dst);
	case PB_TEXT: store_text(k, f, dst); return 0;
	case PB_MESSAGE:
		if (k->aux != NO_AUX)
			*(int *)at(dst, k->aux) = 1;
		return pb_decode(rd, k->sub, f->p, f->len, at(dst, k->off));
	case PB_REPEATED: return store_repeated(rd, k, f, dst);
	}
	return pb_bad(rd, m, k, "is of no known kind");
}

static const struct pb_known *pb_find(const struct pb_message *m, unsigned num)
{
	for (size_t i = 0; i < m->n_fields; i++)
		if (m->fields[i].num == num)
			return &m->fields[i];
	return NULL;
}

/* alloc_repeated makes the arrays of m's repeated fields, counted
 * beforehand so that a message over the limit costs no memory (a message
 * that is not protobuf is left to pb_decode to say) */
static int alloc_repeated(const struct pb_reading *rd,
			  const struct pb_message *m, const unsigned char *msg,
			  size_t n, void *dst)
{
	for (size_t i = 0; i < m->n_fields; i++) {
		const struct pb_known *k = &m->fields[i];
		struct pb_field f;
		size_t pos = 0, count = 0;
		void *array;
		if (k->kind != PB_REPEATED)
			continue;
		while (pb_next(msg, n, &pos, &f) > 0)
			count += f.num == k->num;
		if (count > k->max)
			return dl_errorf(rd->err, rd->err_size, DL_ELIMIT,
					 "etcd's %s: %zu %s, over the limit of "
					 "%llu",
					 rd->what, count, k->name,
					 (unsigned long long)k->max);
		if (!count)
			continue;
		if (!(array = calloc(count, k->sub->size)))
			return dl_errorf(rd->err, rd->err_size, DL_ENOMEM,
					 "no memory for etcd's %s", rd->what);
		memcpy(at(dst, k->off), &array, sizeof(array));
	}
	return 0;
}

/* pb_finish: what must be there is, and absent bytes are "" */
static int pb_finish(const struct pb_reading *rd, const struct pb_message *m,
		     uint64_t seen, void *dst)
{
	for (size_t i = 0; i < m->n_fields; i++) {
		const struct pb_known *k = &m->fields[i];
		char **p = at(dst, k->off);
		if (k->num < 64 && (m->required >> k->num & 1) &&
		    !(seen >> k->num & 1))
			return pb_bad(rd, m, k, "is missing");
		if (k->kind == PB_BYTES && !*p && !(*p = calloc(1, 1)))
			return dl_errorf(rd->err, rd->err_size, DL_ENOMEM,
					 "no memory for etcd's %s", rd->what);
	}
	return 0;
}

/* pb_decode reads message m of msg[0..n) into dst (zeroed by the caller;
 * what it owns is freed by its release whatever happens here): the
 * fields that m knows are checked and kept, the others skipped. */
static int pb_decode(const struct pb_reading *rd, const struct pb_message *m,
		     const unsigned char *msg, size_t n, void *dst)
{
	struct pb_field f;
	size_t pos = 0;
	uint64_t seen = 0;
	int more = 0, rc = alloc_repeated(rd, m, msg, n, dst);

	while (rc == 0 && (more = pb_next(msg, n, &pos, &f)) > 0) {
		const struct pb_known *k = pb_find(m, f.num);
		if (!k)
			continue;
		if (f.type != wire_type(k->kind))
			return pb_wire_type(rd, m, k, f.type);
		if (k->num < 64)
			seen |= 1ull << k->num;
		rc = store(rd, m, k, &f, dst);
	}
	if (rc != 0)
		return rc;
	if (more < 0)
		return pb_broken(rd, msg, pos);
	return pb_finish(rd, m, seen, dst);
}

int etcd_grpc_parse_keepalive(const unsigned char *msg, size_t n,
			      struct etcd_grpc_keepalive *out, char *err,
			      size_t err_size)
{
	struct pb_reading rd = {"keep-alive answer", msg, n, err, err_size};
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pb_decode(&rd, &keepalive_message, msg, n, out);
	if (rc == 0 && (out->id <= 0 || out->ttl < 0))
		rc = dl_errorf(err, err_size, DL_EPROTO,
			       "etcd's keep-alive answer has lease %lld, TTL "
			       "%lld",
			       (long long)out->id, (long long)out->ttl);
	return rc;
}

int etcd_grpc_parse_watch(const unsigned char *msg, size_t n,
			  struct etcd_watch_response *out, char *err,
			  size_t err_size)
{
	struct pb_reading rd = {"watch answer", msg, n, err, err_size};
	int rc;

	memset(out, 0, sizeof(*out));
	if (n > ETCD_ANSWER_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "etcd's watch answer of %zu bytes is over the "
				 "limit of %d",
				 n, ETCD_ANSWER_MAX);
	rc = pb_decode(&rd, &watch_message, msg, n, out);
	if (rc != 0)
		etcd_watch_response_release(out);
	return rc;
}

/* ---------------------------------------------------------------- reader */

void etcd_grpc_reader_init(struct etcd_grpc_reader *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void etcd_grpc_reader_reset(struct etcd_grpc_reader *r)
{
	r->head_len = 0;
	r->want = 0;
	r->len = 0;
	r->failed = 0;
}

void etcd_grpc_reader_release(struct etcd_grpc_reader *r)
{
	free(r->msg);
	etcd_grpc_reader_init(r, r->max);
}

size_t etcd_grpc_reader_pending(const struct etcd_grpc_reader *r)
{
	return r->head_len + r->len;
}

/* reader_fail: the stream is broken; every later feed says so */
static int reader_fail(struct etcd_grpc_reader *r, int code)
{
	r->failed = code;
	return code;
}

/* reader_head takes the head once it is whole: the message's length */
static int reader_head(struct etcd_grpc_reader *r, char *err, size_t err_size)
{
	r->want = (size_t)r->head[1] << 24 | (size_t)r->head[2] << 16 |
		  (size_t)r->head[3] << 8 | r->head[4];
	r->len = 0;
	if (r->head[0] != 0 || r->want > r->max)
		return reader_fail(
		    r, dl_errorf(err, err_size, DL_EPROTO,
				 "a gRPC message %s (flag %u, %zu bytes)",
				 r->head[0] ? "compressed" : "over the limit",
				 r->head[0], r->want));
	return 0;
}

/* reader_room makes room for need bytes of the message, doubling the
 * storage (kept for the next messages) up to max; need <= want <= max */
static int reader_room(struct etcd_grpc_reader *r, size_t need, char *err,
		       size_t err_size)
{
	size_t cap = r->cap ? r->cap : 256;
	unsigned char *p;

	if (need <= r->cap)
		return 0;
	while (cap < need)
		cap = cap > r->max / 2 ? r->max : cap * 2;
	if (cap > r->max)
		cap = r->max;
	p = realloc(r->msg, cap);
	if (!p)
		return reader_fail(r, dl_errorf(err, err_size, DL_ENOMEM,
						"no memory for a gRPC message "
						"of %zu bytes",
						r->want));
	r->msg = p;
	r->cap = cap;
	return 0;
}

/* take: how much of len bytes goes to what still wants want bytes */
static size_t take(size_t want, size_t len)
{
	return want < len ? want : len;
}

int etcd_grpc_reader_feed(struct etcd_grpc_reader *r, const char *data,
			  size_t len, etcd_grpc_message_fn fn, void *arg,
			  char *err, size_t err_size)
{
	const unsigned char *p = (const unsigned char *)data;
	int rc;

	if (r->failed)
		return dl_errorf(err, err_size, r->failed,
				 "the gRPC stream failed before");
	while (len) {
		size_t k;
		if (r->head_len < FRAME_HEAD) {
			k = take(FRAME_HEAD - r->head_len, len);
			memcpy(r->head + r->head_len, p, k);
			r->head_len += k;
			p += k;
			len -= k;
			if (r->head_len < FRAME_HEAD)
				break;
			if ((rc = reader_head(r, err, err_size)) != 0)
				return rc;
		}
		k = take(r->want - r->len, len);
		if ((rc = reader_room(r, r->len + k, err, err_size)) != 0)
			return rc;
		if (k)
			memcpy(r->msg + r->len, p, k);
		r->len += k;
		p += k;
		len -= k;
		if (r->len == r->want) {
			size_t n = r->len;
			r->head_len = 0;
			r->len = 0;
			/* an empty message may come before any storage */
			rc = fn(arg, n ? r->msg : (const unsigned char *)"", n);
			if (rc)
				return rc;
		}
	}
	return 0;
}
