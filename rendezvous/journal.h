/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.h - durability of the rendezvous state (private to rendezvous/).
 *
 * DIR/journal holds checksummed records appended and fsynced before the
 * answer that depends on them is sent: a job's whole durable state after
 * each change, a job's deletion, a KV put. DIR/snapshot holds the whole
 * state up to a sequence number; it is rewritten atomically (temporary
 * file, fsync, rename, fsync of the directory) when the journal has grown,
 * and the journal is then truncated. On open, the snapshot and then the
 * newer journal records are replayed into the state; a torn or damaged
 * tail is cut off with a warning.
 *
 * Record: "RDZJ" | u32 payload length | u32 crc32c(seq | payload) |
 * u64 seq | payload (JSON), integers little-endian.
 */
#ifndef DLAUNCH_RDZV_JOURNAL_H
#define DLAUNCH_RDZV_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dlaunch/rdzv_state.h"

#define RDZV_JOURNAL_RECORD_MAX (256u * 1024 * 1024)

struct rdzv_journal;

/* rdzv_journal_open creates dir if needed, replays it into st (jobs get
 * fresh timers from now_ms) and opens the journal for appending. */
int rdzv_journal_open(const char *dir, struct rdzv_state *st, uint64_t now_ms,
		      struct rdzv_journal **out, char *err, size_t err_size);
void rdzv_journal_close(struct rdzv_journal *jr); /* NULL is allowed */

/* rdzv_journal_job appends job's current state (or its deletion when st
 * no longer has it) and fsyncs; may compact afterwards. */
int rdzv_journal_job(struct rdzv_journal *jr, const struct rdzv_state *st,
		     const char *job);
/* rdzv_journal_kv appends a KV put and fsyncs; may compact afterwards. */
int rdzv_journal_kv(struct rdzv_journal *jr, const struct rdzv_state *st,
		    const char *job, const char *key, const void *data,
		    size_t len);

/* rdzv_journal_rewrite writes the whole state as a new snapshot and
 * empties the journal: after a failed append (a full or failing disk) it
 * is how the server becomes durable again. */
int rdzv_journal_rewrite(struct rdzv_journal *jr, const struct rdzv_state *st);

/* Counters for /metrics. */
uint64_t rdzv_journal_bytes(const struct rdzv_journal *jr);
uint64_t rdzv_journal_compactions(const struct rdzv_journal *jr);

#endif
