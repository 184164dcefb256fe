/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_grpc.h - the few messages of etcd's gRPC API that the agent sends
 * on a stream of its own, in protobuf inside gRPC's framing. No I/O.
 *
 * etcd serves gRPC on its client port (HTTP/2: prior knowledge on http,
 * ALPN on https). A lease's keep-alives on one LeaseKeepAlive stream cost
 * etcd a fraction of what each keep-alive costs through the JSON gateway,
 * which opens a gRPC stream of its own inside etcd for every request
 * (docs/etcd.md, "Keep-alives on a stream").
 *
 * A gRPC message on the wire: one byte (1: compressed, which the agent
 * never asks for and refuses), the length (4 bytes, big-endian), the
 * protobuf bytes. Protobuf: each field a key (field number << 3 | wire
 * type) as a varint, then a varint (type 0), 8 bytes (1), a length and
 * bytes (2) or 4 bytes (5). Fields the parser does not know are skipped,
 * as newer etcd versions add some.
 */
#ifndef DLAUNCH_AGENT_ETCD_GRPC_H
#define DLAUNCH_AGENT_ETCD_GRPC_H
#include <stddef.h>
#include <stdint.h>

/* the longest message the reader keeps (etcd's answers here are tens of
 * bytes; a longer one is not etcd's) */
#define ETCD_GRPC_MESSAGE_MAX 4096
/* bytes of a framed LeaseKeepAliveRequest, at most */
#define ETCD_GRPC_KEEPALIVE_FRAME_MAX 16

/* etcd_grpc_keepalive_frame writes the framed LeaseKeepAliveRequest of
 * lease id (id > 0) to out and returns its length. */
size_t
etcd_grpc_keepalive_frame(int64_t id,
			  unsigned char out[ETCD_GRPC_KEEPALIVE_FRAME_MAX]);

/* What a LeaseKeepAliveResponse says: the lease and its TTL left, 0 when
 * etcd has no such lease (it expired). */
struct etcd_grpc_keepalive {
	int64_t id;
	int64_t ttl;
};

/* etcd_grpc_parse_keepalive reads one message's protobuf bytes: 0, or
 * DL_EPROTO with err saying what is wrong. */
int etcd_grpc_parse_keepalive(const unsigned char *msg, size_t n,
			      struct etcd_grpc_keepalive *out, char *err,
			      size_t err_size);

/* A reader of a stream of framed messages: bytes come in any pieces,
 * messages go out whole. */
struct etcd_grpc_reader {
	unsigned char head[5];
	size_t head_len;
	unsigned char msg[ETCD_GRPC_MESSAGE_MAX];
	size_t want, len; /* the message's length, and how much is here */
	int failed;
};

typedef int (*etcd_grpc_message_fn)(void *arg, const unsigned char *msg,
				    size_t n);

void etcd_grpc_reader_init(struct etcd_grpc_reader *r);
/* etcd_grpc_reader_feed hands each message that data completes to fn (a
 * non-zero return from fn stops the feed and is returned). A compressed
 * message, or one over ETCD_GRPC_MESSAGE_MAX, is DL_EPROTO with err set,
 * and so is every later feed. */
int etcd_grpc_reader_feed(struct etcd_grpc_reader *r, const char *data,
			  size_t len, etcd_grpc_message_fn fn, void *arg,
			  char *err, size_t err_size);
/* etcd_grpc_reader_pending: bytes of a message begun and not ended */
size_t etcd_grpc_reader_pending(const struct etcd_grpc_reader *r);

#endif
