/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_flight.h - the collective library's flight recorder: per process, a
 * ring of the last N collectives (sequence number, kind, size, entered or
 * finished, when) and where the training loop stands (step, phase), read
 * by another thread to answer the agent's `dump` (docs/worker-protocol.md,
 * docs/hangs.md) while the one issuing collectives may be stuck in one.
 *
 * The front of the collective library (dist.c) records every collective of
 * a group whose dist_config.flight is set: blocking ones when they start
 * and when they return successfully, asynchronous ones (iall_reduce) when
 * issued and when they complete (TCP: on the progress thread; NCCL: when
 * dist_wait sees the stream done). Point-to-point transfers are not
 * recorded: their order differs between ranks. A failed collective stays
 * "entered". The sequence number starts at 1 in each group
 * (dist_flight_begin_group): every rank counts the same collectives in
 * the same order, so one collective has the same number on every rank.
 *
 * Cost on the path of a collective: no allocation, no lock, no system
 * call beyond a coarse wall-clock read (vDSO): each slot has a sequence
 * counter (a seqlock); writers are the issuing thread and, for finishing
 * an asynchronous operation, the progress thread; readers copy a slot and
 * retry when it changed meanwhile.
 */
#ifndef DLAUNCH_DIST_FLIGHT_H
#define DLAUNCH_DIST_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

struct buf;
struct dist_flight;

#define DIST_FLIGHT_DEFAULT_ENTRIES 64
#define DIST_FLIGHT_MAX_ENTRIES	    4096

enum dist_flight_op {
	DIST_FLIGHT_ALL_REDUCE = 0,
	DIST_FLIGHT_BROADCAST,
	DIST_FLIGHT_REDUCE,
	DIST_FLIGHT_ALL_GATHER,
	DIST_FLIGHT_BARRIER,
};

/* one recorded collective, as dist_flight_snapshot copies it out */
struct dist_flight_entry {
	uint64_t seq; /* from 1 in the group */
	enum dist_flight_op op;
	uint64_t bytes;	 /* this rank's send buffer (all_gather: its part) */
	int finished;	 /* 0: entered (in flight, or failed) */
	int64_t t_ms;	 /* wall clock (ms since the epoch) when entered */
	int64_t done_ms; /* wall clock when finished, 0 if not */
	int64_t step;	 /* the training step (dist_flight_set_step), or -1 */
};

/* dist_flight_new: a recorder of the last entries collectives (0 to
 * DIST_FLIGHT_MAX_ENTRIES; 0: it records no collective, and keeps only
 * the rank, step and phase), or NULL when out of memory or past the
 * maximum. Owned by the caller (dist_flight_free, NULL allowed), which
 * must outlive every group it is given to and every reader. */
struct dist_flight *dist_flight_new(size_t entries);
void dist_flight_free(struct dist_flight *f);

/* dist_flight_from_env: the recorder DLAUNCH_FLIGHT_ENTRIES asks for
 * (unset or empty: DIST_FLIGHT_DEFAULT_ENTRIES; 0: recording off).
 * A value that is no integer in [0, DIST_FLIGHT_MAX_ENTRIES] is DL_EINVAL
 * with a message in err; out of memory is DL_ENOMEM. */
int dist_flight_from_env(struct dist_flight **out, char *err, size_t err_size);

/* dist_flight_entries: the ring's size (0 for NULL: recording off). */
size_t dist_flight_entries(const struct dist_flight *f);

/* dist_flight_begin_group: a new group where this process is rank; the
 * next collective is seq 1 and the entries of earlier groups are no
 * longer shown. Called by dist_init; NULL f is allowed (as for every
 * function below, which then does nothing). */
void dist_flight_begin_group(struct dist_flight *f, int rank);

/* dist_flight_enter: a collective starts; returns its handle for
 * dist_flight_finish (never 0 when recorded; 0 for a NULL f). One thread
 * at a time (the group's issuing thread). */
uint64_t dist_flight_enter(struct dist_flight *f, enum dist_flight_op op,
			   uint64_t bytes);
/* dist_flight_finish: the collective of handle finished (any thread; a
 * handle of 0, or of an entry the ring has since reused, is ignored, and
 * so is a second finish). */
void dist_flight_finish(struct dist_flight *f, uint64_t handle);

/* Where the training loop stands, shown with the entries: the step it
 * works on (-1: none) and a phase, a string with static storage
 * ("train_step", "evaluate", ...; NULL: none). Any thread. */
void dist_flight_set_step(struct dist_flight *f, int64_t step);
void dist_flight_set_phase(struct dist_flight *f, const char *phase);
int64_t dist_flight_step(const struct dist_flight *f);
const char *dist_flight_phase(const struct dist_flight *f);
/* dist_flight_rank: the rank of the current group, -1 before the first */
int dist_flight_rank(const struct dist_flight *f);

/* dist_flight_snapshot copies the current group's entries, oldest first,
 * into out (room for max) and returns how many; any thread, while
 * recording goes on. An entry being rewritten during the copy is retried
 * a few times and left out if it keeps changing. */
size_t dist_flight_snapshot(const struct dist_flight *f,
			    struct dist_flight_entry *out, size_t max);

/* dist_flight_op_name: "all_reduce", "broadcast", "reduce", "all_gather",
 * "barrier" ("unknown" otherwise). */
const char *dist_flight_op_name(enum dist_flight_op op);

/* dist_flight_format_json appends the entries as a JSON array (the
 * "flight" member of a worker's dump file: docs/worker-protocol.md) to
 * out; dist_flight_format_where appends one line of text saying where the
 * training loop stands (rank, step, phase, the oldest collective in flight
 * and for how long) for the dump's "threads" member;
 * dist_flight_format_dump appends the members a dump file takes from the
 * recorder, each after a comma: "rank" (when known), "flight" (unless
 * recording is off) and "threads". 0, DL_ENOMEM or DL_ELIMIT (out's
 * ceiling). NULL f: "[]", and a line saying there is no recorder. */
int dist_flight_format_json(const struct dist_flight *f, struct buf *out);
int dist_flight_format_where(const struct dist_flight *f, struct buf *out);
int dist_flight_format_dump(const struct dist_flight *f, struct buf *out);

#endif
