/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_flight.c - the collective library's flight recorder (contract in
 * dist_flight.h): a ring of slots, each guarded by its own sequence
 * counter (a seqlock), so that the thread issuing collectives never waits
 * for the thread answering a dump, and the dump never sees half an entry.
 *
 * Every collective ever recorded has an index (0, 1, ...); it lives in
 * slot index % entries until the ring comes round. A slot's writers are
 * the issuing thread (enter) and whichever thread completes the operation
 * (finish); they take the slot by moving its counter from even to odd
 * (compare-and-swap, uncontended but for the rare case of both at once)
 * and release it by moving it to the next even value. Readers copy the
 * slot between two reads of the counter and retry when it moved.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist_flight.h"
#include "dlaunch/buf.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"

#define READ_TRIES 64 /* copies of a slot that keeps changing */

struct slot {
	atomic_uint_fast64_t ver;    /* odd while a writer holds it */
	atomic_uint_fast64_t handle; /* index + 1 of its collective; 0 none */
	atomic_uint_fast64_t seq;
	atomic_uint_fast64_t bytes;
	atomic_int_fast64_t t_ms, done_ms, step;
	atomic_int op, finished;
};

struct dist_flight {
	size_t cap;
	atomic_uint_fast64_t next;	 /* collectives recorded so far */
	atomic_uint_fast64_t group_base; /* index of the group's first */
	atomic_int rank;
	atomic_int_fast64_t step;
	atomic_uintptr_t phase; /* const char *, static storage */
	struct slot slots[];
};

/* wall_ms: the coarse wall clock (a vDSO read, no system call) */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct dist_flight *dist_flight_new(size_t entries)
{
	struct dist_flight *f;

	if (entries > DIST_FLIGHT_MAX_ENTRIES)
		return NULL;
	f = calloc(1, sizeof(*f) + entries * sizeof(f->slots[0]));
	if (f == NULL)
		return NULL;
	f->cap = entries;
	atomic_init(&f->rank, -1);
	atomic_init(&f->step, -1);
	return f;
}

void dist_flight_free(struct dist_flight *f)
{
	free(f);
}

int dist_flight_from_env(struct dist_flight **out, char *err, size_t err_size)
{
	const char *v = getenv("DLAUNCH_FLIGHT_ENTRIES");
	int n = DIST_FLIGHT_DEFAULT_ENTRIES;

	*out = NULL;
	if (v != NULL && *v != '\0' &&
	    parse_int(v, 0, DIST_FLIGHT_MAX_ENTRIES, &n) != 0)
		return dl_errorf(err, err_size, DL_EINVAL,
				 "DLAUNCH_FLIGHT_ENTRIES='%s' is not an "
				 "integer in [0, %d] (0 turns the flight "
				 "recorder off)",
				 v, DIST_FLIGHT_MAX_ENTRIES);
	*out = dist_flight_new((size_t)n);
	if (*out == NULL)
		return dl_errorf(err, err_size, DL_ENOMEM,
				 "out of memory for the flight recorder");
	return 0;
}

size_t dist_flight_entries(const struct dist_flight *f)
{
	return f ? f->cap : 0;
}

void dist_flight_begin_group(struct dist_flight *f, int rank)
{
	if (f == NULL)
		return;
	atomic_store_explicit(
	    &f->group_base,
	    atomic_load_explicit(&f->next, memory_order_relaxed),
	    memory_order_release);
	atomic_store_explicit(&f->rank, rank, memory_order_relaxed);
}

/* slot_take: the slot for writing; returns the even counter it had */
static uint64_t slot_take(struct slot *s)
{
	uint64_t v = atomic_load_explicit(&s->ver, memory_order_relaxed);

	for (;;) {
		if (v & 1) { /* the other writer: a few stores, no wait */
			v = atomic_load_explicit(&s->ver, memory_order_relaxed);
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&s->ver, &v, v + 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			break;
	}
	/* a reader that sees the stores below sees the odd counter */
	atomic_thread_fence(memory_order_release);
	return v;
}

static void slot_give(struct slot *s, uint64_t v)
{
	atomic_store_explicit(&s->ver, v + 2, memory_order_release);
}

uint64_t dist_flight_enter(struct dist_flight *f, enum dist_flight_op op,
			   uint64_t bytes)
{
	uint64_t index, base, v;
	struct slot *s;

	if (f == NULL || f->cap == 0)
		return 0;
	index = atomic_load_explicit(&f->next, memory_order_relaxed);
	base = atomic_load_explicit(&f->group_base, memory_order_relaxed);
	s = &f->slots[index % f->cap];
	v = slot_take(s);
	atomic_store_explicit(&s->handle, index + 1, memory_order_relaxed);
	atomic_store_explicit(&s->seq, index - base + 1, memory_order_relaxed);
	atomic_store_explicit(&s->bytes, bytes, memory_order_relaxed);
	atomic_store_explicit(&s->t_ms, wall_ms(), memory_order_relaxed);
	atomic_store_explicit(&s->done_ms, 0, memory_order_relaxed);
	atomic_store_explicit(
	    &s->step, atomic_load_explicit(&f->step, memory_order_relaxed),
	    memory_order_relaxed);
	atomic_store_explicit(&s->op, (int)op, memory_order_relaxed);
	atomic_store_explicit(&s->finished, 0, memory_order_relaxed);
	slot_give(s, v);
	atomic_store_explicit(&f->next, index + 1, memory_order_release);
	return index + 1;
}

void dist_flight_finish(struct dist_flight *f, uint64_t handle)
{
	struct slot *s;
	uint64_t v;

	if (f == NULL || handle == 0 || f->cap == 0)
		return;
	s = &f->slots[(handle - 1) % f->cap];
	v = slot_take(s);
	if (atomic_load_explicit(&s->handle, memory_order_relaxed) == handle &&
	    !atomic_load_explicit(&s->finished, memory_order_relaxed)) {
		atomic_store_explicit(&s->done_ms, wall_ms(),
				      memory_order_relaxed);
		atomic_store_explicit(&s->finished, 1, memory_order_relaxed);
	}
	slot_give(s, v);
}

void dist_flight_set_step(struct dist_flight *f, int64_t step)
{
	if (f)
		atomic_store_explicit(&f->step, step, memory_order_relaxed);
}

void dist_flight_set_phase(struct dist_flight *f, const char *phase)
{
	if (f)
		atomic_store_explicit(&f->phase, (uintptr_t)phase,
				      memory_order_release);
}

int64_t dist_flight_step(const struct dist_flight *f)
{
	return f ? atomic_load_explicit(&f->step, memory_order_relaxed) : -1;
}

const char *dist_flight_phase(const struct dist_flight *f)
{
	return f ? (const char *)atomic_load_explicit(&f->phase,
						      memory_order_acquire)
		 : NULL;
}

int dist_flight_rank(const struct dist_flight *f)
{
	return f ? atomic_load_explicit(&f->rank, memory_order_relaxed) : -1;
}

/* slot_read: a consistent copy of the slot if it holds handle */
static int slot_read(struct slot *s, uint64_t handle,
		     struct dist_flight_entry *e)
{
	for (int tries = 0; tries < READ_TRIES; tries++) {
		uint64_t v1 =
		    atomic_load_explicit(&s->ver, memory_order_acquire);
		uint64_t h;

		if (v1 & 1)
			continue;
		h = atomic_load_explicit(&s->handle, memory_order_relaxed);
		e->seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
		e->bytes =
		    atomic_load_explicit(&s->bytes, memory_order_relaxed);
		e->t_ms = atomic_load_explicit(&s->t_ms, memory_order_relaxed);
		e->done_ms =
		    atomic_load_explicit(&s->done_ms, memory_order_relaxed);
		e->step = atomic_load_explicit(&s->step, memory_order_relaxed);
		e->op = (enum dist_flight_op)atomic_load_explicit(
		    &s->op, memory_order_relaxed);
		e->finished =
		    atomic_load_explicit(&s->finished, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->ver, memory_order_relaxed) != v1)
			continue;
		return h == handle;
	}
	return 0;
}

size_t dist_flight_snapshot(const struct dist_flight *f,
			    struct dist_flight_entry *out, size_t max)
{
	struct dist_flight *w = (struct dist_flight *)f; /* atomics: loads */
	uint64_t next, base, lo;
	size_t n = 0;

	if (f == NULL || max == 0 || f->cap == 0)
		return 0;
	next = atomic_load_explicit(&w->next, memory_order_acquire);
	base = atomic_load_explicit(&w->group_base, memory_order_acquire);
	lo = next > f->cap ? next - f->cap : 0;
	if (lo < base)
		lo = base;
	if (next - lo > max)
		lo = next - max;
	for (uint64_t i = lo; i < next; i++)
		if (slot_read(&w->slots[i % f->cap], i + 1, &out[n]))
			n++;
	return n;
}

const char *dist_flight_op_name(enum dist_flight_op op)
{
	switch (op) {
	case DIST_FLIGHT_ALL_REDUCE: return "all_reduce";
	case DIST_FLIGHT_BROADCAST: return "broadcast";
	case DIST_FLIGHT_REDUCE: return "reduce";
	case DIST_FLIGHT_ALL_GATHER: return "all_gather";
	case DIST_FLIGHT_BARRIER: return "barrier";
	}
	return "unknown";
}

/* take: the entries into a new array (free it); *n how many */
static struct dist_flight_entry *take(const struct dist_flight *f, size_t *n)
{
	struct dist_flight_entry *e;

	*n = 0;
	if (f == NULL)
		return NULL;
	e = malloc((f->cap ? f->cap : 1) * sizeof(*e));
	if (e != NULL)
		*n = dist_flight_snapshot(f, e, f->cap);
	return e;
}

int dist_flight_format_json(const struct dist_flight *f, struct buf *out)
{
	size_t n;
	struct dist_flight_entry *e = take(f, &n);
	int rc;

	if (f != NULL && e == NULL)
		return DL_ENOMEM;
	rc = buf_append_str(out, "[");
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = buf_printf(out,
				"%s{\"seq\":%llu,\"op\":\"%s\",\"bytes\":%llu,"
				"\"state\":\"%s\",\"t_ms\":%lld",
				i ? "," : "", (unsigned long long)e[i].seq,
				dist_flight_op_name(e[i].op),
				(unsigned long long)e[i].bytes,
				e[i].finished ? "finished" : "entered",
				(long long)e[i].t_ms);
		if (rc == 0 && e[i].finished)
			rc = buf_printf(out, ",\"done_ms\":%lld",
					(long long)e[i].done_ms);
		if (rc == 0)
			rc = buf_printf(out, ",\"step\":%lld}",
					(long long)e[i].step);
	}
	if (rc == 0)
		rc = buf_append_str(out, "]");
	free(e);
	return rc;
}

int dist_flight_format_where(const struct dist_flight *f, struct buf *out)
{
	size_t n, in_flight = 0;
	struct dist_flight_entry *e = take(f, &n);
	const struct dist_flight_entry *oldest = NULL;
	const char *phase = dist_flight_phase(f);
	int64_t now = wall_ms();
	int rc;

	if (f == NULL)
		return buf_append_str(out, "training thread: no flight "
					   "recorder");
	if (e == NULL)
		return DL_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!e[i].finished) {
			in_flight++;
			if (oldest == NULL)
				oldest = &e[i];
		}
	rc = buf_printf(out, "training thread: rank %d, step %lld, phase %s",
			dist_flight_rank(f), (long long)dist_flight_step(f),
			phase ? phase : "none");
	if (rc == 0 && oldest)
		rc = buf_printf(out,
				"; in %s seq %llu (%llu bytes, step %lld) for "
				"%lld ms; %zu collective(s) not finished",
				dist_flight_op_name(oldest->op),
				(unsigned long long)oldest->seq,
				(unsigned long long)oldest->bytes,
				(long long)oldest->step,
				(long long)(now - oldest->t_ms), in_flight);
	else if (rc == 0 && n > 0)
		rc = buf_printf(out,
				"; not inside a collective (the last, %s seq "
				"%llu, finished %lld ms ago)",
				dist_flight_op_name(e[n - 1].op),
				(unsigned long long)e[n - 1].seq,
				(long long)(now - e[n - 1].done_ms));
	else if (rc == 0 && f->cap == 0)
		rc = buf_append_str(out, "; collectives not recorded "
					 "(DLAUNCH_FLIGHT_ENTRIES=0)");
	else if (rc == 0)
		rc = buf_append_str(out, "; no collective yet in this group");
	free(e);
	return rc;
}

/* json_text: s as a JSON string; s is our own ASCII text (op names,
 * phases, numbers), so only quotes and backslashes need escaping */
static int json_text(struct buf *out, const char *s)
{
	int rc = buf_append_str(out, "\"");

	for (; rc == 0 && *s; s++)
		rc = (*s == '"' || *s == '\\')	? buf_printf(out, "\\%c", *s)
		     : (unsigned char)*s < 0x20 ? buf_append_str(out, " ")
						: buf_append(out, s, 1);
	if (rc == 0)
		rc = buf_append_str(out, "\"");
	return rc;
}

int dist_flight_format_dump(const struct dist_flight *f, struct buf *out)
{
	struct buf where;
	int rc = 0;

	if (dist_flight_rank(f) >= 0)
		rc = buf_printf(out, ",\"rank\":%d", dist_flight_rank(f));
	if (rc == 0 && dist_flight_entries(f) > 0) {
		rc = buf_append_str(out, ",\"flight\":");
		if (rc == 0)
			rc = dist_flight_format_json(f, out);
	}
	buf_init(&where, 4096);
	if (rc == 0)
		rc = dist_flight_format_where(f, &where);
	if (rc == 0)
		rc = buf_append_str(out, ",\"threads\":");
	if (rc == 0)
		rc = json_text(out, buf_cstr(&where));
	buf_release(&where);
	return rc;
}
