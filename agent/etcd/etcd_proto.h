/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_proto.h - etcd's v3 API as its JSON gateway speaks it: request
 * bodies built, answers parsed, a watch stream split into objects. No I/O:
 * the etcd backend (rdzv_etcd.c) sends what this builds and hands back
 * what it receives, so all of the protocol is unit-tested and fuzzed here.
 * Bodies are built in etcd_proto.c, answers parsed in etcd_answer.c,
 * streams split in etcd_stream.c.
 *
 * The gateway's habits, all handled here:
 *   - keys and values are base64 (standard alphabet, padded);
 *   - 64-bit integers (revisions, lease ids, TTLs, counts) are JSON
 *     strings of decimal digits; 32-bit ones (an error's code) numbers;
 *   - fields holding their zero value are omitted: a failed txn has no
 *     "succeeded", a PUT event no "type", the first watch no "watch_id",
 *     an expired lease's keepalive no "TTL", a miss no "kvs";
 *   - errors are {"error": "...", "message": "...", "code": N} (3.4 sends
 *     both strings, later versions "message" only; a stream's error is
 *     {"error": {"grpc_code": N, "message": ...}});
 *   - a streamed answer (watch, keepalive) is one {"result": {...}} object
 *     per line.
 *
 * Parsers are strict about what they read (types, ranges, base64, sizes)
 * and ignore fields they do not know, as newer etcd versions add some.
 * Every parser returns 0 or a negative DL_* code with a message in err:
 * DL_EPROTO for an answer that is not what etcd sends, DL_ELIMIT for one
 * over a limit, DL_ENOMEM, or, when the answer is an etcd error, the code
 * etcd_grpc_to_dl gives for it. Parsed keys and values are owned by the
 * struct they are in and freed by its _release; each is followed by a NUL
 * byte (not counted in its length) so text can be read as a C string.
 */
#ifndef DLAUNCH_AGENT_ETCD_PROTO_H
#define DLAUNCH_AGENT_ETCD_PROTO_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* limits on what an answer may hold */
#define ETCD_KEY_MAX	    4096	       /* bytes of a decoded key */
#define ETCD_VALUE_MAX	    (1024 * 1024)      /* bytes of a decoded value */
#define ETCD_ANSWER_MAX	    (16 * 1024 * 1024) /* bytes of one answer */
#define ETCD_KVS_MAX	    65536 /* kvs in a range, events in a watch */
#define ETCD_RESPONSES_MAX  128	  /* operations in a txn */
#define ETCD_JSON_DEPTH_MAX 16
#define ETCD_MESSAGE_MAX    1024 /* bytes of an error message kept */
#define ETCD_TOKEN_MAX	    4096

/* gRPC status codes etcd answers with (the "code" of an error) */
enum etcd_grpc_code {
	ETCD_GRPC_OK = 0,
	ETCD_GRPC_CANCELLED = 1,
	ETCD_GRPC_UNKNOWN = 2,
	ETCD_GRPC_INVALID_ARGUMENT = 3,
	ETCD_GRPC_DEADLINE_EXCEEDED = 4,
	ETCD_GRPC_NOT_FOUND = 5,
	ETCD_GRPC_ALREADY_EXISTS = 6,
	ETCD_GRPC_PERMISSION_DENIED = 7,
	ETCD_GRPC_RESOURCE_EXHAUSTED = 8,
	ETCD_GRPC_FAILED_PRECONDITION = 9,
	ETCD_GRPC_ABORTED = 10,
	ETCD_GRPC_OUT_OF_RANGE =
	    11, /* "required revision has been compacted" */
	ETCD_GRPC_UNIMPLEMENTED = 12,
	ETCD_GRPC_INTERNAL = 13,
	ETCD_GRPC_UNAVAILABLE = 14, /* no leader, member stopping: retry */
	ETCD_GRPC_DATA_LOSS = 15,
	ETCD_GRPC_UNAUTHENTICATED = 16, /* token expired or invalid: renew */
};

/* ------------------------------------------------------------ requests */

/* A request's key or range end: bytes, not a C string (len 0 with data
 * NULL is "absent"). */
struct etcd_bytes {
	const void *data;
	size_t len;
};

/* etcd_prefix_end writes into out (at least len bytes, and at least 1)
 * the range end that makes [prefix, end) every key starting with prefix:
 * prefix with its last byte below 0xff incremented and what follows it
 * dropped, or the single byte 0 (every key from prefix on) when there is
 * none, as clientv3.GetPrefixRangeEnd does. Returns the end's length. */
size_t etcd_prefix_end(const void *prefix, size_t len, unsigned char *out);

enum etcd_op_kind {
	ETCD_OP_RANGE = 0,
	ETCD_OP_PUT,
	ETCD_OP_DELETE,
};

/* One KV operation: a request of its own (range, put, deleterange) or a
 * step of a txn. Zero fields are left out of the body. */
struct etcd_op {
	enum etcd_op_kind kind;
	struct etcd_bytes key;	     /* required, at most ETCD_KEY_MAX */
	struct etcd_bytes range_end; /* range, delete: [key, range_end) */
	struct etcd_bytes value;     /* put */
	int64_t lease;		     /* put: bind the key to this lease */
	int64_t limit;		     /* range: at most this many kvs */
	int64_t revision;	     /* range: read at this revision */
	int prev_kv;		     /* put, delete: answer the old kv(s) */
	int count_only;		     /* range */
	int keys_only;		     /* range */
	int serializable;	     /* range: answered by the member alone,
					without a round of agreement (may
					lag; not inside a txn) */
};

/* etcd_build_op makes the body of op's own request (POST /v3/kv/range,
 * /v3/kv/put or /v3/kv/deleterange) in *out, a new reference. Returns 0,
 * DL_EINVAL (no key, a negative number) or DL_ELIMIT (key or value too
 * long), DL_ENOMEM. */
int etcd_build_op(const struct etcd_op *op, json_t **out, char *err,
		  size_t err_size);

/* Shorthands for etcd_build_op. range_end may be NULL (one key). */
int etcd_build_range(const void *key, size_t key_len, const void *range_end,
		     size_t range_end_len, int64_t limit, int64_t revision,
		     json_t **out, char *err, size_t err_size);
int etcd_build_put(const void *key, size_t key_len, const void *value,
		   size_t value_len, int64_t lease, json_t **out, char *err,
		   size_t err_size);
int etcd_build_delete(const void *key, size_t key_len, const void *range_end,
		      size_t range_end_len, json_t **out, char *err,
		      size_t err_size);
/* etcd_build_read: a read of the one key k (a C string) that one member
 * answers alone (serializable): a watch from the revision it was read at
 * follows it, so a member that lags costs time, never an event */
int etcd_build_read(const char *k, json_t **out, char *err, size_t err_size);

/* What a txn compare looks at (etcd's Compare.target) */
enum etcd_cmp_target {
	ETCD_CMP_VERSION = 0,
	ETCD_CMP_CREATE, /* create_revision (0: the key does not exist) */
	ETCD_CMP_MOD,	 /* mod_revision */
	ETCD_CMP_VALUE,	 /* value */
	ETCD_CMP_LEASE,	 /* lease */
};

enum etcd_cmp_result {
	ETCD_CMP_EQUAL = 0,
	ETCD_CMP_NOT_EQUAL,
	ETCD_CMP_GREATER,
	ETCD_CMP_LESS,
};

struct etcd_compare {
	struct etcd_bytes key;
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	int64_t number;		 /* VERSION, CREATE, MOD, LEASE */
	struct etcd_bytes value; /* VALUE */
};

/* etcd_build_txn makes the body of POST /v3/kv/txn: when every compare
 * holds, the success ops run, else the failure ops (each list may be
 * empty; at most ETCD_RESPONSES_MAX ops in each). 0 or as etcd_build_op. */
int etcd_build_txn(const struct etcd_compare *cmp, size_t n_cmp,
		   const struct etcd_op *success, size_t n_success,
		   const struct etcd_op *failure, size_t n_failure,
		   json_t **out, char *err, size_t err_size);

/* etcd_build_put_json makes the body of a transaction that only puts doc
 * (dumped compact) at key, under lease (0: none). 0, DL_ENOMEM, or as
 * etcd_build_op. */
int etcd_build_put_json(const char *key, const json_t *doc, int64_t lease,
			json_t **out, char *err, size_t err_size);

/* Leases: POST /v3/lease/grant {"TTL"} (ttl_s > 0; id 0 lets etcd pick),
 * /v3/lease/keepalive {"ID"}, /v3/lease/revoke {"ID"} (id > 0). */
int etcd_build_lease_grant(int64_t ttl_s, int64_t id, json_t **out, char *err,
			   size_t err_size);
int etcd_build_lease_keepalive(int64_t id, json_t **out, char *err,
			       size_t err_size);
int etcd_build_lease_revoke(int64_t id, json_t **out, char *err,
			    size_t err_size);

/* POST /v3/auth/authenticate {"name", "password"}: both non-empty C
 * strings of at most 1024 bytes. */
int etcd_build_authenticate(const char *name, const char *password,
			    json_t **out, char *err, size_t err_size);

struct etcd_watch_create {
	struct etcd_bytes key;
	struct etcd_bytes range_end;
	int64_t start_revision; /* 0: from now on */
	int prev_kv;		/* events carry the kv before them */
	int progress_notify;	/* empty answers when idle, with revision */
};

/* POST /v3/watch {"create_request": ...} and {"cancel_request":
 * {"watch_id"}} (watch_id >= 0). */
int etcd_build_watch_create(const struct etcd_watch_create *w, json_t **out,
			    char *err, size_t err_size);
int etcd_build_watch_cancel(int64_t watch_id, json_t **out, char *err,
			    size_t err_size);

/* etcd_body_dump encodes a body compactly, its keys in the order they
 * were set, into a new string (free() it; NULL when out of memory). */
char *etcd_body_dump(const json_t *body);

/* ------------------------------------------------------------- answers */

struct etcd_header {
	uint64_t cluster_id;
	uint64_t member_id;
	int64_t revision; /* the store's revision when the answer was made */
	uint64_t raft_term;
};

struct etcd_kv {
	char *key; /* NUL-terminated copies, owned */
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version; /* 0: deleted (in a DELETE event) */
	int64_t lease;	 /* 0: none */
};

struct etcd_error {
	int code; /* enum etcd_grpc_code */
	char message[ETCD_MESSAGE_MAX];
};

/* etcd_grpc_to_dl maps an error's gRPC code to a DL_* code: unauthenticated
 * and permission denied -> DL_EAUTH, unavailable, deadline exceeded,
 * resource exhausted and aborted -> DL_EAGAIN, out of range (compacted) ->
 * DL_ESTALE, not found -> DL_ENOTFOUND, failed precondition -> DL_ECONFLICT,
 * invalid argument -> DL_EINVAL, others DL_EPROTO. */
int etcd_grpc_to_dl(int code);

/* etcd_is_error: 1 when data is an etcd error answer (parse it with
 * etcd_parse_error), 0 when it is anything else. */
int etcd_is_error(const char *data, size_t len);

/* etcd_parse_error reads an error answer into *out. Returns 0, or
 * DL_EPROTO when data is not one. */
int etcd_parse_error(const char *data, size_t len, struct etcd_error *out,
		     char *err, size_t err_size);

struct etcd_range_response {
	struct etcd_header header;
	struct etcd_kv *kvs;
	size_t n_kvs;
	int more;      /* the limit cut the answer */
	int64_t count; /* keys in the range, whatever the limit */
};

struct etcd_put_response {
	struct etcd_header header;
	int has_prev_kv;
	struct etcd_kv prev_kv;
};

struct etcd_delete_response {
	struct etcd_header header;
	int64_t deleted;
	struct etcd_kv *prev_kvs;
	size_t n_prev_kvs;
};

/* One answer in a txn: kind says which member holds it. */
struct etcd_op_response {
	enum etcd_op_kind kind;
	struct etcd_range_response range;
	struct etcd_put_response put;
	struct etcd_delete_response del;
};

struct etcd_txn_response {
	struct etcd_header header;
	int succeeded; /* the compares held (absent in the answer: 0) */
	struct etcd_op_response *responses;
	size_t n_responses;
};

struct etcd_lease_response {
	struct etcd_header header;
	int64_t id;
	int64_t ttl_s; /* grant: granted; keepalive: remaining */
};

/* The parsers; each fills *out (zeroed first; release it even on error)
 * from len bytes of one answer. */
int etcd_parse_range(const char *data, size_t len,
		     struct etcd_range_response *out, char *err,
		     size_t err_size);
int etcd_parse_put(const char *data, size_t len, struct etcd_put_response *out,
		   char *err, size_t err_size);
int etcd_parse_delete(const char *data, size_t len,
		      struct etcd_delete_response *out, char *err,
		      size_t err_size);
int etcd_parse_txn(const char *data, size_t len, struct etcd_txn_response *out,
		   char *err, size_t err_size);
/* lease grant: an answer with an "error" string that is not empty is
 * refused with DL_EPROTO and that string in err. */
int etcd_parse_lease_grant(const char *data, size_t len,
			   struct etcd_lease_response *out, char *err,
			   size_t err_size);
/* keepalive ({"result": {...}}): a lease etcd no longer has comes back
 * with no TTL: DL_ENOTFOUND ("lease ... has expired"). */
int etcd_parse_lease_keepalive(const char *data, size_t len,
			       struct etcd_lease_response *out, char *err,
			       size_t err_size);
/* lease revoke and compaction: only a header */
int etcd_parse_header_only(const char *data, size_t len,
			   struct etcd_header *out, char *err, size_t err_size);
/* authenticate: the token (1..ETCD_TOKEN_MAX printable bytes) is copied
 * into token (token_size bytes, enough for it or DL_ELIMIT). */
int etcd_parse_authenticate(const char *data, size_t len, char *token,
			    size_t token_size, char *err, size_t err_size);

void etcd_kv_release(struct etcd_kv *kv);
void etcd_range_response_release(struct etcd_range_response *r);
void etcd_put_response_release(struct etcd_put_response *r);
void etcd_delete_response_release(struct etcd_delete_response *r);
void etcd_txn_response_release(struct etcd_txn_response *r);

/* --------------------------------------------------------------- watch */

enum etcd_event_type {
	ETCD_EVENT_PUT = 0, /* the gateway omits it */
	ETCD_EVENT_DELETE = 1,
};

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv; /* a DELETE's kv has its key and mod_revision */
	int has_prev_kv;
	struct etcd_kv prev_kv;
};

/* One answer of a watch stream. created, canceled and events are
 * independent: a creation has no events, a progress notification neither
 * (its header.revision is the point the watch has reached), a cancel after
 * a compaction has compact_revision (the oldest revision still there: read
 * the state again and watch from it). */
struct etcd_watch_response {
	struct etcd_header header;
	int64_t watch_id;
	int created;
	int canceled;
	int fragment; /* more of this revision's events follow */
	int64_t compact_revision;
	char cancel_reason[ETCD_MESSAGE_MAX];
	struct etcd_event *events;
	size_t n_events;
};

/* etcd_parse_watch reads one object of the stream: {"result": {...}}, or
 * an error ({"error": {...}}: its mapped code, the message in err). */
int etcd_parse_watch(const char *data, size_t len,
		     struct etcd_watch_response *out, char *err,
		     size_t err_size);
void etcd_watch_response_release(struct etcd_watch_response *w);

/*
 * The splitter cuts a stream of JSON objects, arriving in chunks of any
 * size (curl's write callbacks), into whole objects. It follows strings
 * and nesting rather than newlines, so whitespace between objects (the
 * gateway's "\n") is skipped and any other byte between them is an error.
 * Each object it yields begins with '{' and ends with the '}' that closes
 * it; whether what lies between is JSON is for the parser to say.
 *
 * An object longer than max_object_bytes is refused: DL_ELIMIT, with
 * nothing of it kept. An error stops the splitter: every later feed
 * returns the same code until etcd_splitter_reset, which the caller does
 * when it opens a new stream (a watch that lost an answer must resume
 * from the last revision it saw, not go on).
 */
struct etcd_splitter {
	char *buf; /* the object begun, owned */
	size_t len, cap;
	size_t max_object_bytes;
	size_t depth;
	int in_string, escaped;
	int failed; /* 0 or the code that stopped it */
};

/* Called with each whole object (len bytes, valid until it returns);
 * returns 0 to go on or a negative code to stop the feed with it. */
typedef int (*etcd_object_fn)(void *arg, const char *obj, size_t len);

void etcd_splitter_init(struct etcd_splitter *s, size_t max_object_bytes);
void etcd_splitter_release(struct etcd_splitter *s);
/* back to the start of a stream, keeping the limit */
void etcd_splitter_reset(struct etcd_splitter *s);

/* etcd_splitter_feed takes len more bytes of the stream and calls fn for
 * each object they complete, in order. Returns 0, fn's own negative code,
 * DL_ELIMIT (an object over the limit), DL_EPROTO (a byte outside an
 * object that is not whitespace, an object closed by ']') or DL_ENOMEM.
 * Any of them, fn's own codes included, stops the splitter (the rest of
 * data is dropped). */
int etcd_splitter_feed(struct etcd_splitter *s, const char *data, size_t len,
		       etcd_object_fn fn, void *arg, char *err,
		       size_t err_size);

/* etcd_splitter_pending: bytes of an object begun and not finished (a
 * stream that ends with some was cut). */
size_t etcd_splitter_pending(const struct etcd_splitter *s);

/* ------------------------------------------------- the end of a call */

/* The end of a call: rc 0 and etcd's answer in body, or a DL_E* code and
 * a one-line reason in error (etcd's own message when it answered one:
 * DL_ECONFLICT, DL_ENOTFOUND, ...; DL_EAUTH: the credentials were
 * refused; DL_EPROTO: not an etcd gateway; DL_ETIMEDOUT: no endpoint
 * answered; DL_EINVAL: TLS or URL set-up that retrying cannot mend). */
struct etcd_answer {
	int rc;
	const char *body;
	size_t len;
	const char *error;
};

/* etcd_answer_range / etcd_answer_txn: the call's outcome and, when it
 * succeeded, its answer parsed into r (released by the caller only then);
 * otherwise the code with the reason in err. */
int etcd_answer_range(const struct etcd_answer *a,
		      struct etcd_range_response *r, char *err,
		      size_t err_size);
int etcd_answer_txn(const struct etcd_answer *a, struct etcd_txn_response *t,
		    char *err, size_t err_size);

#endif
