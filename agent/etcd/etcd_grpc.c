/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_grpc.c - the LeaseKeepAlive messages in protobuf and gRPC's
 * framing (etcd_grpc.h). No I/O.
 */
#include "etcd_grpc.h"

#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"

/* protobuf wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

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

size_t
etcd_grpc_keepalive_frame(int64_t id,
			  unsigned char out[ETCD_GRPC_KEEPALIVE_FRAME_MAX])
{
	/* LeaseKeepAliveRequest { int64 ID = 1; } */
	size_t n = 5;
	out[n++] = 1 << 3 | WT_VARINT;
	n += put_varint(out + n, (uint64_t)id);
	out[0] = 0; /* not compressed */
	out[1] = 0;
	out[2] = 0;
	out[3] = 0;
	out[4] = (unsigned char)(n - 5);
	return n;
}

int etcd_grpc_parse_keepalive(const unsigned char *msg, size_t n,
			      struct etcd_grpc_keepalive *out, char *err,
			      size_t err_size)
{
	/* LeaseKeepAliveResponse { ResponseHeader header = 1; int64 ID = 2;
	 * int64 TTL = 3; } */
	size_t pos = 0;
	memset(out, 0, sizeof(*out));
	while (pos < n) {
		uint64_t key, v;
		if (get_varint(msg, n, &pos, &key) != 0)
			goto bad;
		unsigned field = (unsigned)(key >> 3), type = key & 7;
		if (field == 0)
			goto bad;
		switch (type) {
		case WT_VARINT:
			if (get_varint(msg, n, &pos, &v) != 0)
				goto bad;
			if (field == 2)
				out->id = (int64_t)v;
			else if (field == 3)
				out->ttl = (int64_t)v;
			break;
		case WT_I64:
			if (n - pos < 8)
				goto bad;
			pos += 8;
			break;
		case WT_LEN:
			if (get_varint(msg, n, &pos, &v) != 0 || v > n - pos)
				goto bad;
			pos += (size_t)v;
			break;
		case WT_I32:
			if (n - pos < 4)
				goto bad;
			pos += 4;
			break;
		default: goto bad;
		}
		if ((field == 2 || field == 3) && type != WT_VARINT)
			goto bad;
	}
	if (out->id <= 0 || out->ttl < 0) {
		snprintf(err, err_size,
			 "etcd's keep-alive answer has lease %lld, TTL %lld",
			 (long long)out->id, (long long)out->ttl);
		return DL_EPROTO;
	}
	return 0;
bad:
	snprintf(
	    err, err_size,
	    "etcd's keep-alive answer is not protobuf (at byte %zu of %zu)",
	    pos, n);
	return DL_EPROTO;
}

void etcd_grpc_reader_init(struct etcd_grpc_reader *r)
{
	r->head_len = 0;
	r->want = 0;
	r->len = 0;
	r->failed = 0;
}

size_t etcd_grpc_reader_pending(const struct etcd_grpc_reader *r)
{
	return r->head_len + r->len;
}

int etcd_grpc_reader_feed(struct etcd_grpc_reader *r, const char *data,
			  size_t len, etcd_grpc_message_fn fn, void *arg,
			  char *err, size_t err_size)
{
	const unsigned char *p = (const unsigned char *)data;
	if (r->failed) {
		snprintf(err, err_size, "the gRPC stream failed before");
		return DL_EPROTO;
	}
	while (len) {
		size_t k;
		if (r->head_len < 5) {
			k = 5 - r->head_len < len ? 5 - r->head_len : len;
			memcpy(r->head + r->head_len, p, k);
			r->head_len += k;
			p += k;
			len -= k;
			if (r->head_len < 5)
				break;
			r->want = (size_t)r->head[1] << 24 |
				  (size_t)r->head[2] << 16 |
				  (size_t)r->head[3] << 8 | r->head[4];
			if (r->head[0] != 0 ||
			    r->want > ETCD_GRPC_MESSAGE_MAX) {
				r->failed = 1;
				snprintf(err, err_size,
					 "a gRPC message %s (flag %u, %zu "
					 "bytes)",
					 r->head[0] ? "compressed"
						    : "over the limit",
					 r->head[0], r->want);
				return DL_EPROTO;
			}
			r->len = 0;
		}
		k = r->want - r->len < len ? r->want - r->len : len;
		memcpy(r->msg + r->len, p, k);
		r->len += k;
		p += k;
		len -= k;
		if (r->len == r->want) {
			size_t n = r->len;
			int rc;
			r->head_len = 0;
			r->len = 0;
			rc = fn(arg, r->msg, n);
			if (rc)
				return rc;
		}
	}
	return 0;
}
