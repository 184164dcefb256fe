/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_grpc.h - the few messages of etcd's gRPC API that the agent sends
 * on a stream of its own (LeaseKeepAlive, Watch), in protobuf inside
 * gRPC's framing. No I/O.
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

#include "dlaunch/buf.h"
#include "etcd_proto.h"

/* the longest keep-alive answer the lease's reader takes (etcd's are
 * tens of bytes; a longer one is not etcd's). A watch's reader takes up
 * to ETCD_ANSWER_MAX. */
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

/* -------------------------------------------------------------- watch */

/* etcd_grpc_watch_create_frame appends to out the framed
 * WatchRequest{create_request{...}} of wc, with the client's own watch id
 * (> 0: etcd 3.4 gives the watcher that id, so that the answers of
 * several watches on one stream can be told apart before etcd's
 * "created" comes back). wc's key must be non-empty, key and range_end
 * at most ETCD_KEY_MAX bytes, start_revision >= 0. Returns 0, DL_EINVAL
 * (bad input), DL_ELIMIT (out's limit) or DL_ENOMEM; out is unchanged on
 * any error. */
int etcd_grpc_watch_create_frame(const struct etcd_watch_create *wc,
				 int64_t watch_id, struct buf *out);
/* etcd_grpc_watch_cancel_frame appends the framed
 * WatchRequest{cancel_request{watch_id}} (watch_id >= 0); as above. */
int etcd_grpc_watch_cancel_frame(int64_t watch_id, struct buf *out);

/* etcd_grpc_parse_watch reads one WatchResponse message (protobuf bytes,
 * frame removed) into out as etcd_parse_watch does the gateway's JSON:
 * the same fields, checks and limits, keys and values owned and
 * NUL-terminated (an absent value is ""). watch_id is -1 where etcd
 * refused to create a watch. Returns 0, DL_EPROTO (err says what),
 * DL_ELIMIT (more than ETCD_KVS_MAX events, a key or value over its
 * limit, a message over ETCD_ANSWER_MAX) or DL_ENOMEM. out is released
 * with etcd_watch_response_release; on an error it is left released
 * already (releasing it again is harmless). */
int etcd_grpc_parse_watch(const unsigned char *msg, size_t n,
			  struct etcd_watch_response *out, char *err,
			  size_t err_size);

/* ------------------------------------------------------------- reader */

/* A reader of a stream of framed messages: bytes come in any pieces,
 * messages go out whole. Its storage grows with the messages, up to
 * max: a watch's answers may be megabytes where a keep-alive's are tens
 * of bytes. */
struct etcd_grpc_reader {
	unsigned char head[5];
	size_t head_len;
	unsigned char *msg; /* owned; NULL until the first message */
	size_t cap, max;    /* msg's size; the longest message taken */
	size_t want, len;   /* the message's length, and how much is here */
	int failed;	    /* 0, or the code every later feed returns */
};

typedef int (*etcd_grpc_message_fn)(void *arg, const unsigned char *msg,
				    size_t n);

/* etcd_grpc_reader_init prepares r for a stream of messages of at most
 * max bytes; nothing is allocated yet. */
void etcd_grpc_reader_init(struct etcd_grpc_reader *r, size_t max);
/* etcd_grpc_reader_reset: a new stream: drops a message begun and the
 * failure, keeps the storage and max */
void etcd_grpc_reader_reset(struct etcd_grpc_reader *r);
/* etcd_grpc_reader_release frees the storage (init again before use) */
void etcd_grpc_reader_release(struct etcd_grpc_reader *r);
/* etcd_grpc_reader_feed hands each message that data completes to fn
 * (msg valid until fn returns; a non-zero return from fn stops the feed
 * and is returned). A compressed message, or one over max, is DL_EPROTO
 * with err set; running out of memory DL_ENOMEM; either fails the
 * reader: every later feed returns the same code until a reset. */
int etcd_grpc_reader_feed(struct etcd_grpc_reader *r, const char *data,
			  size_t len, etcd_grpc_message_fn fn, void *arg,
			  char *err, size_t err_size);
/* etcd_grpc_reader_pending: bytes of a message begun and not ended */
size_t etcd_grpc_reader_pending(const struct etcd_grpc_reader *r);

#endif
