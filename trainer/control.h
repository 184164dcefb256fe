/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.h - dlaunch-train's side of the worker control channel
 * (docs/worker-protocol.md): the agent's messages parsed by a small strict
 * reader (control_msg.c, a pure function), the lines the worker sends
 * (control_msg.c), and the channel itself with its reader thread
 * (control.c).
 *
 * dlaunch-train acts on `abort`, `membership` and `dump` and says so in
 * its `hello`; `preempt` is parsed (so that its members are checked) but
 * not acted on, and not declared.
 */
#ifndef DLAUNCH_TRAIN_CONTROL_H
#define DLAUNCH_TRAIN_CONTROL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define CONTROL_VERSION	       1
#define CONTROL_MAX_LINE_BYTES 65536 /* the newline included */
#define CONTROL_DUMP_ID_MAX    128   /* bytes of a dump's id (the agent's) */
#define CONTROL_DUMP_PATH_MAX  4096  /* bytes of its path, NUL included */

enum control_type {
	CONTROL_UNKNOWN = 0, /* a type this worker does not know: ignored */
	CONTROL_WELCOME,
	CONTROL_ABORT,
	CONTROL_MEMBERSHIP,
	CONTROL_PREEMPT,
	CONTROL_DUMP,
};

struct control_membership {
	uint64_t round;
	int rank, world_size;
	int local_rank, local_world_size;
	int node_rank, nnodes;
	int restart_count;
	char master_addr[256];
	uint16_t master_port;
	char store_prefix[256];
};

struct control_msg {
	enum control_type type;
	uint64_t version; /* welcome */
	/* welcome, optional (0 when absent): the agent's bound on each step
	 * of a re-form, and on its rejoin (from the last `aborted` to the
	 * new round) */
	uint64_t reform_timeout_ms, rejoin_timeout_ms;
	uint64_t round;	  /* abort, membership */
	uint64_t step;	  /* preempt */
	char reason[256]; /* abort (cut to fit) */
	struct control_membership m;
	/* dump: the request's id (1 to CONTROL_DUMP_ID_MAX bytes) and the
	 * file to write (an absolute path is checked when acting on it) */
	char dump_id[CONTROL_DUMP_ID_MAX + 1];
	char dump_path[CONTROL_DUMP_PATH_MAX];
};

/*
 * control_parse reads one line (len bytes, without its newline) into *out.
 * The line must be one JSON object with a string member "type"; for the
 * types it knows, the members the protocol names must be present with the
 * right JSON type and range (membership: round, rank < world_size,
 * world_size, local_rank < local_world_size, master_addr, master_port
 * 1..65535, ...). Unknown members are skipped, after a check that they are
 * valid JSON. Returns 0, or DL_EINVAL / DL_ELIMIT with a message in err
 * (may be NULL). Never reads past line + len; nesting is bounded.
 */
int control_parse(const char *line, size_t len, struct control_msg *out,
		  char *err, size_t err_size);

/* control_format_*: the worker's lines, each with its newline, in buf;
 * return the length, or -1 when buf is too small. */
int control_format_hello(char *buf, size_t size);
int control_format_step(char *buf, size_t size, uint64_t step);
int control_format_aborted(char *buf, size_t size, uint64_t round,
			   uint64_t step);
int control_format_reformed(char *buf, size_t size, uint64_t round,
			    uint64_t step);
/* control_format_dumped: {"type":"dumped","id":ID} (and "error": why,
 * when error is not NULL: the file could not be written), id and error
 * escaped as JSON strings. */
int control_format_dumped(char *buf, size_t size, const char *id,
			  const char *error);

/*
 * The dump file (docs/worker-protocol.md, "dump"): one JSON object,
 * {"pid": P, ...the members fn appends...}, written to path.tmp (created
 * 0600, never following a link) and renamed to path, so a reader sees the
 * whole file or none. fn(ctx, out) appends members, each after a comma
 * (e.g. ,"rank":0,"flight":[...],"threads":"..."), and returns 0 or a
 * DL_E* code; fn NULL: the pid alone. path must be absolute. Returns 0,
 * or a DL_E* code with a message in err. Any thread.
 */
struct buf;
typedef int (*control_dump_fn)(void *ctx, struct buf *out);
int control_dump_write(const char *path, control_dump_fn fn, void *ctx,
		       char *err, size_t err_size);
/* control_json_string appends s to out as a JSON string (quotes, escapes;
 * bytes that are not UTF-8 become U+FFFD). 0 or a buf error. */
int control_json_string(struct buf *out, const char *s);

/*
 * The channel (control.c). control_open takes the descriptor named by
 * DLAUNCH_CONTROL_FD (none: *out = NULL and 0), marks it close-on-exec,
 * sends hello and starts the reader thread. A bad variable is an error
 * (DL_EINVAL, message in err).
 *
 * The reader thread keeps the newest abort and membership that pass the
 * fencing rule (a round never lower than one already seen in a
 * membership); on an abort it also calls the abort hook at once, so that a
 * collective in flight on the main thread is cancelled. Bad input or a
 * closed channel ends the channel: logged once, and the worker is plain
 * from then on (control_in_place false).
 */
struct control;

typedef void (*control_abort_fn)(void *ctx);

int control_open(struct control **out, char *err, size_t err_size);
void control_close(struct control *c);

/* control_set_abort_hook: fn(ctx) runs on the reader thread, under the
 * channel's lock, for each accepted abort and at once if one is pending;
 * set NULL before freeing what ctx points to (the call waits for a hook
 * running). */
void control_set_abort_hook(struct control *c, control_abort_fn fn, void *ctx);

/* control_set_dump_hook: what a `dump` writes besides the pid
 * (control_dump_write's fn); the reader thread writes the file and
 * answers `dumped` (with "error" when the file could not be written)
 * itself, so a dump is answered while the main thread is stuck anywhere.
 * fn runs on the reader thread, not under the channel's lock; set NULL
 * before freeing what ctx points to (the call waits for a dump being
 * written). Before any hook is set a dump writes the pid alone. */
void control_set_dump_hook(struct control *c, control_dump_fn fn, void *ctx);

/* control_in_place: the agent welcomed us and the channel is healthy, so
 * a failed collective may be followed by an abort rather than the end. */
int control_in_place(struct control *c);

/* control_membership_wait_ms: how long to wait for `membership` after
 * answering `aborted`: the agent's own bound on that wait (its step
 * bound plus its rejoin bound, as its welcome said) when it told both and
 * that is shorter than fallback_ms, else fallback_ms (--timeout). Past
 * the agent's bound it has given up the in-place path for this node. */
uint64_t control_membership_wait_ms(struct control *c, uint64_t fallback_ms);

/* control_abort_pending: an accepted abort not yet taken; its round in
 * *round. */
int control_abort_pending(struct control *c, uint64_t *round);

/* control_wait_abort: waits (at most timeout_ms) for an abort; 0 with its
 * round, DL_ETIMEDOUT, or DL_ECLOSED when the channel is gone. */
int control_wait_abort(struct control *c, uint64_t timeout_ms, uint64_t *round);

/* control_take_abort: consumes the pending abort (after answering it). */
void control_take_abort(struct control *c);

/* control_abort_flag: non-zero while an abort is pending, readable from
 * any thread without the channel's lock (dist_config.cancel: an abort
 * cancels the bootstrap of a group); NULL for a NULL c. Valid while c
 * lives. */
const atomic_int *control_abort_flag(struct control *c);

/* control_wait_membership: waits (at most timeout_ms) for a membership of
 * a round above after_round; 0 with it in *m (consumed), DL_ETIMEDOUT or
 * DL_ECLOSED. */
int control_wait_membership(struct control *c, uint64_t after_round,
			    uint64_t timeout_ms, struct control_membership *m);

/* control_send_*: the worker's messages; a failed write ends the channel
 * (logged once). NULL c is allowed (no channel: nothing is sent). */
void control_send_step(struct control *c, uint64_t step);
void control_send_aborted(struct control *c, uint64_t round, uint64_t step);
void control_send_reformed(struct control *c, uint64_t round, uint64_t step);

/*
 * State agreement after a group forms (control_state.c), the commit rule
 * of docs/worker-protocol.md ("dlaunch-train"): every rank offers its
 * committed state st (step, parameters, optimizer state, sampler position,
 * RNG); the leader is the lowest rank at the highest step; each rank
 * behind it receives the leader's state over the group (the checkpoint
 * image, ckpt_encode, so it is checksummed) and replaces st with it; a
 * rank at the highest step whose state differs from the leader's is an
 * error (DL_ECONFLICT): replicas that should be identical are not. Last,
 * the digests of all ranks are compared again. d may be NULL (one
 * process: nothing to agree on).
 */
struct dist;
struct ckpt_state;

struct control_agreement {
	uint64_t step;	 /* the step every rank now stands at */
	int leader;	 /* the rank whose state won */
	int n_behind;	 /* ranks that received it */
	int received;	 /* this rank received it (st replaced) */
	uint64_t digest; /* of the agreed state */
};

int control_agree(struct dist *d, struct ckpt_state *st,
		  struct control_agreement *out, char *err, size_t err_size);

/* control_state_digest: FNV-1a 64 of st's checkpoint image (the same on
 * every rank for the same state); 0 with DL_ENOMEM in *rc on failure. */
uint64_t control_state_digest(const struct ckpt_state *st, int *rc);

#endif
