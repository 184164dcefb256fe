/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_proto.h - the worker control channel's messages
 * (docs/worker-protocol.md, version 1) with no I/O: a reader that splits
 * what arrives into lines with a hard limit, a parser for the worker's
 * messages and the writers of the agent's. The channel itself (socket
 * pair, event loop, deadlines) is control.c; this part is unit-tested and
 * fuzzed on its own.
 */
#ifndef DLAUNCH_AGENT_CONTROL_PROTO_H
#define DLAUNCH_AGENT_CONTROL_PROTO_H
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/buf.h"

#define CONTROL_VERSION	  1	/* the highest version the agent speaks */
#define CONTROL_LINE_MAX  65536 /* bytes in a line, the newline included */
#define CONTROL_DEPTH_MAX 8	/* JSON nesting accepted in a line */
#define CONTROL_ID_MAX	  128	/* bytes in a dump request's id */

/* what a worker may say */
enum control_msg_type {
	CONTROL_MSG_UNKNOWN, /* a type this version does not know: ignored */
	CONTROL_MSG_HELLO,
	CONTROL_MSG_STEP,
	CONTROL_MSG_ABORTED,
	CONTROL_MSG_REFORMED,
	CONTROL_MSG_DUMPED,
};

/* the agent events a worker declares it handles (hello's "handles") */
#define CONTROL_HANDLES_ABORT	   1u
#define CONTROL_HANDLES_MEMBERSHIP 2u
#define CONTROL_HANDLES_PREEMPT	   4u
#define CONTROL_HANDLES_DUMP	   8u
#define CONTROL_HANDLES_IN_PLACE                                               \
	(CONTROL_HANDLES_ABORT | CONTROL_HANDLES_MEMBERSHIP)

/* One worker message; which members are set depends on type. */
struct control_msg {
	enum control_msg_type type;
	uint64_t version;	     /* HELLO */
	unsigned handles;	     /* HELLO: CONTROL_HANDLES_* */
	uint64_t round;		     /* ABORTED, REFORMED */
	uint64_t step;		     /* STEP, ABORTED, REFORMED */
	char id[CONTROL_ID_MAX + 1]; /* DUMPED */
};

/*
 * control_parse_line reads one line (len bytes, without its newline) as a
 * worker message into m. Returns 0 (an unknown type included), or
 * DL_EPROTO / DL_ELIMIT with the reason in err: not a JSON object, no
 * string "type", a member missing or of the wrong type or range, too deep
 * or too long.
 */
int control_parse_line(const char *line, size_t len, struct control_msg *m,
		       char *err, size_t err_size);

/* Splits a byte stream into lines of at most CONTROL_LINE_MAX bytes. The
 * caller reads into control_reader_space, commits what it read, and takes
 * lines with control_reader_next until it returns 0. */
struct control_reader {
	char data[CONTROL_LINE_MAX];
	size_t len;   /* bytes held */
	size_t start; /* where the next line begins */
};

void control_reader_init(struct control_reader *r);
/* control_reader_space: where to read next, and how much fits (*avail);
 * 0 only when a line has filled the buffer without its newline, which
 * control_reader_next reports as DL_ELIMIT. */
char *control_reader_space(struct control_reader *r, size_t *avail);
void control_reader_commit(struct control_reader *r, size_t n);
/* control_reader_next: 1 with the next whole line in *line and *len
 * (without its newline; valid until the next call of any reader
 * function), 0 when no whole line is held, DL_ELIMIT when one is longer
 * than CONTROL_LINE_MAX. */
int control_reader_next(struct control_reader *r, const char **line,
			size_t *len);

/* What a membership carries: the new round's values for one worker, the
 * same as its environment would have in that round. */
struct control_membership {
	uint64_t round;
	int rank, world_size, local_rank, local_world_size;
	int node_rank, nnodes, restart_count;
	const char *master_addr; /* borrowed */
	unsigned master_port;
	const char *store_prefix; /* borrowed */
};

/* The agent's messages, each appended to b as one line with its newline.
 * 0, or DL_ENOMEM / DL_ELIMIT (b unchanged). welcome's reform_timeout_ms
 * (the agent's bound on each step of a re-form), rejoin_timeout_ms (its
 * bound on the rejoin, from the last `aborted` to the new round) and
 * preempt_grace_ms (its --preempt-grace: a SIGTERM to a worker that
 * declared preempt is a notice, the stop step follows) are written when
 * non-zero. */
int control_write_welcome(struct buf *b, unsigned version,
			  uint64_t reform_timeout_ms,
			  uint64_t rejoin_timeout_ms,
			  uint64_t preempt_grace_ms);
int control_write_preempt(struct buf *b, uint64_t step);
int control_write_abort(struct buf *b, uint64_t round, const char *reason);
int control_write_membership(struct buf *b, const struct control_membership *m);
/* dump: write a report of every thread to path, then answer `dumped` with
 * id (docs/worker-protocol.md, docs/hangs.md) */
int control_write_dump(struct buf *b, const char *id, const char *path);

const char *control_msg_name(enum control_msg_type t);

#endif
