/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_int.h - private to common/hang*.c: the node reports read into one
 * flat, rank-sorted table (hang_load.c), which the rules (hang.c) and the
 * text version (hang_text.c) work from. Strings are borrowed from the
 * reports, which must outlive the table.
 */
#ifndef DLAUNCH_HANG_INT_H
#define DLAUNCH_HANG_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define HANG_UNKNOWN INT64_MIN /* a number the report did not give */
/* Numbers read from reports (seqs, steps, times, ages) are kept within
 * [0, HANG_NUM_MAX] (else unknown), so sums and differences of two never
 * overflow. */
#define HANG_NUM_MAX (INT64_C(1) << 53)

/* Whether a rank is inside a collective, and what says so. */
enum hang_inside {
	HANG_INSIDE_UNKNOWN = -1,
	HANG_INSIDE_NO = 0,
	HANG_INSIDE_YES = 1,
};

struct hang_rank {
	int64_t rank;
	int64_t local_rank, pid, threads;	/* HANG_UNKNOWN if absent */
	const char *node, *host;		/* never NULL ("?" if absent) */
	const char *state, *proc_state, *wchan; /* never NULL ("" if absent) */
	int64_t cpu_ms, interval_ms;		/* HANG_UNKNOWN if absent */
	int64_t step, step_age_ms;   /* HANG_UNKNOWN if absent/null */
	const char *python, *native; /* NULL if absent or empty */
	json_t *notes;		     /* borrowed array or NULL */
	json_t *flight;		     /* borrowed array or NULL */
	int64_t ref_ms; /* the trigger's time (or the report's) for ages */
	size_t order;	/* position in the input, to keep the first twin */

	/* from the flight records (has_flight: the array was there) */
	int has_flight;
	int64_t min_seq, max_seq; /* 0 when no entry */
	int64_t first_open_seq;	  /* lowest entered-not-finished; 0: none */
	int64_t open_t_ms;	  /* when that one was entered; HANG_UNKNOWN */
	const char *open_op;	  /* its op ("" if absent) */
	int64_t oldest_open_age_ms; /* of any open entry; HANG_UNKNOWN */
	enum hang_inside inside;
};

struct hang_set {
	struct hang_rank *ranks; /* sorted by rank, one per rank */
	size_t n;
	json_t *nodes;		  /* new array of the node ids reported */
	json_t *trigger;	  /* borrowed: the trigger judged, or NULL */
	const char *trigger_id;	  /* "" if none */
	const char *trigger_kind; /* "" if none */
	int64_t trigger_ms;	  /* HANG_UNKNOWN if none */
};

/* hang_load reads reports (any JSON value) into s; 0 or DL_ENOMEM. */
int hang_load(struct hang_set *s, json_t *reports, int64_t now_ms);
void hang_set_release(struct hang_set *s);

/* hang_json_int: the integer at key (a JSON integer, or a real with an
 * integral value), else HANG_UNKNOWN. */
int64_t hang_json_int(json_t *obj, const char *key);
/* hang_json_num: hang_json_int within [0, HANG_NUM_MAX], else
 * HANG_UNKNOWN. */
int64_t hang_json_num(json_t *obj, const char *key);
/* hang_json_str: the string at key, else NULL. */
const char *hang_json_str(json_t *obj, const char *key);

/* hang_state_is_stopped: a state that rule 1 names (stopped, tracing-stop,
 * zombie, dead, gone). */
int hang_state_is_stopped(const char *state);

/* hang_ranks_text appends "1-3,5" for the ranks (sorted ascending) to a
 * NUL-terminated out of out_size bytes, ending with "..." when full. */
void hang_ranks_text(const int64_t *ranks, size_t n, char *out,
		     size_t out_size);

#endif
