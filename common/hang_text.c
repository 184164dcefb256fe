/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_text.c - the hang report for people (dl_hang_format_text): the
 * trigger and verdict, one paragraph per rank (state, step, CPU, notes,
 * the tail of its flight records), then the stacks with identical ones
 * folded. Stacks compare equal when they differ only in addresses and
 * process or thread ids, so a thousand ranks blocked in the same
 * all-reduce print one stack.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/hang.h"
#include "hang_int.h"

#define CUT_MARK     "\n...[cut]\n"
#define FLIGHT_TAIL  4 /* flight entries shown per rank */
#define STACK_INDENT "      "

/* A writer that stops at out's maximum with a "...[cut]" line. */
struct tw {
	struct buf *b;
	int full, nomem;
};

static void tw_append(struct tw *w, const char *data, size_t n)
{
	size_t reserve = sizeof(CUT_MARK) - 1, room;
	int rc;

	if (w->full || w->nomem)
		return;
	room = w->b->max_bytes > w->b->len + reserve
		   ? w->b->max_bytes - w->b->len - reserve
		   : 0;
	if (n > room) {
		/* cut on a UTF-8 character boundary */
		while (room > 0 && ((unsigned char)data[room] & 0xC0) == 0x80)
			room--;
		n = room;
		w->full = 1;
	}
	rc = buf_append(w->b, data, n);
	if (rc == 0 && w->full)
		rc = buf_append(w->b, CUT_MARK, reserve);
	if (rc == DL_ENOMEM)
		w->nomem = 1;
	else if (rc)
		w->full = 1;
}

static void tw_str(struct tw *w, const char *s)
{
	tw_append(w, s, strlen(s));
}

static void tw_printf(struct tw *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tw_printf(struct tw *w, const char *fmt, ...)
{
	char small[512], *p = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(small)) {
		p = malloc((size_t)n + 1);
		if (!p) {
			w->nomem = 1;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(p, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	tw_append(w, p, (size_t)n);
	if (p != small)
		free(p);
}

/* tw_indented writes text line by line, each line after indent. */
static void tw_indented(struct tw *w, const char *text, const char *indent)
{
	while (*text && !w->full) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);
		tw_str(w, indent);
		tw_append(w, text, n);
		tw_str(w, "\n");
		text += n + (nl ? 1 : 0);
	}
}

/* ---- stacks compared without addresses and ids ---- */

struct norm_it {
	const char *base, *p;
};

static int after_id_word(const char *base, const char *p)
{
	static const char *const words[] = {"PID ", "TID ", "LWP ", "pid "};
	if (p - base < 4 || isdigit((unsigned char)p[-1]))
		return 0;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!memcmp(p - 4, words[i], 4))
			return 1;
	return 0;
}

/* norm_next: the next character of the text with every 0x-hex number
 * read as one '\2' and every number after PID/TID/LWP as one '\3'; 0 at
 * the end. */
static int norm_next(struct norm_it *it)
{
	const char *p = it->p;

	if (!p || !*p)
		return 0;
	if (p[0] == '0' && p[1] == 'x' && isxdigit((unsigned char)p[2])) {
		p += 2;
		while (isxdigit((unsigned char)*p))
			p++;
		it->p = p;
		return 2;
	}
	if (isdigit((unsigned char)*p) && after_id_word(it->base, p)) {
		while (isdigit((unsigned char)*p))
			p++;
		it->p = p;
		return 3;
	}
	it->p = p + 1;
	return (unsigned char)*p;
}

/* stacks_hash: FNV-1a over the normalised python and native texts. */
static uint64_t stacks_hash(const struct hang_rank *r)
{
	const char *texts[2] = {r->python, r->native};
	uint64_t h = 1469598103934665603ULL;

	for (int t = 0; t < 2; t++) {
		struct norm_it it = {texts[t], texts[t]};
		int c;
		while ((c = norm_next(&it)) != 0) {
			h ^= (uint64_t)c;
			h *= 1099511628211ULL;
		}
		h ^= 0xff; /* separates python from native */
		h *= 1099511628211ULL;
	}
	return h;
}

static int norm_equal(const char *a, const char *b)
{
	struct norm_it x = {a, a}, y = {b, b};
	int c, d;

	if (!a || !b)
		return a == b;
	do {
		c = norm_next(&x);
		d = norm_next(&y);
	} while (c == d && c);
	return c == d;
}

static int stacks_equal(const struct hang_rank *a, const struct hang_rank *b)
{
	return norm_equal(a->python, b->python) &&
	       norm_equal(a->native, b->native);
}

struct keyed {
	uint64_t hash;
	size_t idx; /* into the set's sorted table, so also rank order */
};

static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* fold_stacks sets leader[i] to the lowest-ranked rank with the same
 * stacks as rank i (i itself when it is the first). */
static int fold_stacks(const struct hang_set *s, size_t *leader)
{
	struct keyed *k = calloc(s->n + 1, sizeof(*k));

	if (!k)
		return DL_ENOMEM;
	for (size_t i = 0; i < s->n; i++) {
		k[i].hash = stacks_hash(&s->ranks[i]);
		k[i].idx = i;
		leader[i] = i;
	}
	qsort(k, s->n, sizeof(*k), cmp_keyed);
	for (size_t i = 0; i < s->n;) {
		size_t j = i;
		while (j < s->n && k[j].hash == k[i].hash)
			j++;
		/* within one hash, match each against the earlier leaders */
		for (size_t a = i; a < j; a++) {
			for (size_t b = i; b < a; b++) {
				size_t lb = k[b].idx;
				if (leader[lb] == lb &&
				    stacks_equal(&s->ranks[lb],
						 &s->ranks[k[a].idx])) {
					leader[k[a].idx] = lb;
					break;
				}
			}
		}
		i = j;
	}
	free(k);
	return 0;
}

/* ---- the parts of the text ---- */

static void write_list(struct tw *w, const char *label, json_t *arr)
{
	size_t i, n = json_array_size(arr);
	json_t *v;

	tw_printf(w, "%s: ", label);
	if (!n)
		tw_str(w, "none");
	json_array_foreach(arr, i, v)
	{
		if (i)
			tw_str(w, ", ");
		if (json_is_integer(v))
			tw_printf(w, "%lld", (long long)json_integer_value(v));
		else if (json_is_string(v))
			tw_str(w, json_string_value(v));
	}
	tw_str(w, "\n");
}

static void write_head(struct tw *w, const struct hang_set *s, json_t *analysis)
{
	char when[32];
	const char *by = hang_json_str(s->trigger, "by");

	tw_str(w, "hang report");
	if (s->trigger) {
		tw_printf(w, ": trigger %s (%s", s->trigger_id,
			  *s->trigger_kind ? s->trigger_kind : "?");
		if (by)
			tw_printf(w, " by %s", by);
		tw_str(w, ")");
		if (s->trigger_ms != HANG_UNKNOWN)
			tw_printf(w, " at %s",
				  clock_format_wall((uint64_t)s->trigger_ms,
						    when, sizeof(when)));
	}
	tw_printf(w, "\n%zu rank(s) from %zu node(s)\n", s->n,
		  json_array_size(s->nodes));
	if (!json_is_object(analysis))
		return;
	tw_printf(w, "verdict: %s (rule %s)\n",
		  hang_json_str(analysis, "verdict")
		      ? hang_json_str(analysis, "verdict")
		      : "?",
		  hang_json_str(analysis, "rule")
		      ? hang_json_str(analysis, "rule")
		      : "?");
	if (hang_json_str(analysis, "reason"))
		tw_printf(w, "reason: %s\n", hang_json_str(analysis, "reason"));
	write_list(w, "stuck ranks", json_object_get(analysis, "stuck"));
	write_list(w, "stragglers", json_object_get(analysis, "stragglers"));
	write_list(w, "nodes", json_object_get(analysis, "nodes"));
	write_list(w, "missing nodes",
		   json_object_get(analysis, "missing_nodes"));
}

static void write_flight_tail(struct tw *w, const struct hang_rank *r)
{
	size_t n = json_array_size(r->flight), shown = 0, first = n;

	/* the last FLIGHT_TAIL entries with a seq, oldest first */
	while (first > 0 && shown < FLIGHT_TAIL) {
		if (hang_json_num(json_array_get(r->flight, first - 1),
				  "seq") != HANG_UNKNOWN)
			shown++;
		first--;
	}
	tw_str(w, "    flight:");
	if (!shown)
		tw_str(w, " no collective yet");
	for (size_t i = first; i < n; i++) {
		json_t *e = json_array_get(r->flight, i);
		const char *op = hang_json_str(e, "op"), *st;
		int64_t seq = hang_json_num(e, "seq"),
			t = hang_json_num(e, "t_ms");
		int64_t done = hang_json_num(e, "done_ms");
		int64_t bytes = hang_json_num(e, "bytes");
		if (seq == HANG_UNKNOWN)
			continue;
		st = hang_json_str(e, "state");
		tw_printf(w, "%s #%lld %s", i > first ? ";" : "",
			  (long long)seq, op ? op : "?");
		if (bytes != HANG_UNKNOWN)
			tw_printf(w, " %lld B", (long long)bytes);
		if (st && !strcmp(st, "finished") && t != HANG_UNKNOWN &&
		    done != HANG_UNKNOWN && done >= t)
			tw_printf(w, " finished in %lld ms",
				  (long long)(done - t));
		else if (st && !strcmp(st, "entered") && t != HANG_UNKNOWN &&
			 r->ref_ms != HANG_UNKNOWN)
			tw_printf(w, " entered, open for %.1f s",
				  (double)(r->ref_ms - t) / 1000.0);
		else
			tw_printf(w, " %s", st ? st : "?");
	}
	tw_str(w, "\n");
}

static void write_rank(struct tw *w, const struct hang_rank *r)
{
	size_t i;
	json_t *note;

	tw_printf(w, "  rank %lld: node %s, host %s", (long long)r->rank,
		  r->node, r->host);
	if (r->local_rank != HANG_UNKNOWN)
		tw_printf(w, ", local rank %lld", (long long)r->local_rank);
	if (r->pid != HANG_UNKNOWN)
		tw_printf(w, ", pid %lld", (long long)r->pid);
	tw_str(w, "\n    ");
	tw_str(w, *r->state ? r->state : "state unknown");
	if (*r->proc_state)
		tw_printf(w, " (%s)", r->proc_state);
	if (*r->wchan)
		tw_printf(w, ", wchan %s", r->wchan);
	if (r->cpu_ms != HANG_UNKNOWN && r->interval_ms != HANG_UNKNOWN)
		tw_printf(w, ", cpu %lld ms in %lld ms", (long long)r->cpu_ms,
			  (long long)r->interval_ms);
	if (r->threads != HANG_UNKNOWN)
		tw_printf(w, ", %lld thread(s)", (long long)r->threads);
	if (r->step != HANG_UNKNOWN) {
		tw_printf(w, ", step %lld", (long long)r->step);
		if (r->step_age_ms != HANG_UNKNOWN)
			tw_printf(w, " (unchanged for %.1f s)",
				  (double)r->step_age_ms / 1000.0);
	} else {
		tw_str(w, ", no step reported");
	}
	tw_str(w, "\n");
	if (r->has_flight)
		write_flight_tail(w, r);
	json_array_foreach(r->notes, i, note)
	{
		if (json_is_string(note))
			tw_printf(w, "    note: %s\n", json_string_value(note));
	}
}

/* write_followers lists "ranks 2-3,5: same as rank 0" for a leader;
 * followers holds the ranks of each leader's group in a row. */
static void write_followers(struct tw *w, const struct hang_set *s,
			    const int64_t *followers, size_t m, size_t lead,
			    const char *what)
{
	char list[256];

	if (!m)
		return;
	hang_ranks_text(followers, m, list, sizeof(list));
	tw_printf(w, "  %s %s: %s rank %lld\n", m == 1 ? "rank" : "ranks", list,
		  what, (long long)s->ranks[lead].rank);
}

static int write_stacks(struct tw *w, const struct hang_set *s)
{
	size_t *leader = calloc(s->n + 1, sizeof(*leader));
	size_t *start = calloc(s->n + 2, sizeof(*start));
	int64_t *grouped = calloc(s->n + 1, sizeof(*grouped));
	int rc = DL_ENOMEM;

	if (!leader || !start || !grouped)
		goto out;
	rc = fold_stacks(s, leader);
	if (rc)
		goto out;
	/* counting sort of the followers by leader, in rank order */
	for (size_t i = 0; i < s->n; i++)
		if (leader[i] != i)
			start[leader[i] + 1]++;
	for (size_t i = 0; i < s->n; i++)
		start[i + 1] += start[i];
	/* start[l] is where leader l's group begins; fill them in rank
	 * order, moving start[l] along, then shift back */
	for (size_t i = 0; i < s->n; i++)
		if (leader[i] != i)
			grouped[start[leader[i]]++] = s->ranks[i].rank;
	for (size_t i = s->n; i > 0; i--)
		start[i] = start[i - 1];
	start[0] = 0;
	tw_str(w, "\nstacks:\n");
	for (size_t i = 0; i < s->n && !w->full; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (leader[i] != i)
			continue;
		tw_printf(w, "  rank %lld:", (long long)r->rank);
		if (!r->python && !r->native)
			tw_str(w, " no stacks (see the notes)\n");
		else
			tw_str(w, "\n");
		if (r->python) {
			tw_str(w, "    python:\n");
			tw_indented(w, r->python, STACK_INDENT);
		}
		if (r->native) {
			tw_str(w, "    native:\n");
			tw_indented(w, r->native, STACK_INDENT);
		}
		write_followers(
		    w, s, grouped + start[i], start[i + 1] - start[i], i,
		    r->python || r->native ? "same as" : "no stacks, as");
	}
out:
	free(leader);
	free(start);
	free(grouped);
	return rc;
}

int dl_hang_format_text(json_t *reports, json_t *analysis, struct buf *out)
{
	struct tw w = {out, 0, 0};
	struct hang_set s;
	int rc;

	rc = hang_load(&s, reports, HANG_UNKNOWN);
	if (rc)
		goto out;
	write_head(&w, &s, analysis);
	tw_str(&w, "\nranks:\n");
	for (size_t i = 0; i < s.n && !w.full; i++)
		write_rank(&w, &s.ranks[i]);
	rc = write_stacks(&w, &s);
out:
	hang_set_release(&s);
	if (rc == 0 && w.nomem)
		rc = DL_ENOMEM;
	return rc;
}
