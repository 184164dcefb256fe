/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang.c - the hang analysis (include/dlaunch/hang.h): the rules that name
 * the stuck rank(s) from the node reports of one trigger, in order, and the
 * analysis object built from the first that answers. hang_load.c reads the
 * reports; hang_text.c writes the text version.
 */
#include "dlaunch/hang.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "hang_int.h"

#define REASON_MAX 1024

/* A set of ranks, as indices into the hang_set's sorted table. */
struct pick {
	size_t *idx;
	size_t n;
};

struct verdict {
	const char *verdict, *rule;
	char reason[REASON_MAX];
	struct pick stuck, stragglers;
	/* the lowest unfinished collective (rule 2), when there is one */
	int has_coll;
	int64_t coll_seq, coll_wait_ms;
	const char *coll_op;
	struct pick coll_entered;
	struct pick inside; /* rule 3: the ranks inside a collective */
};

void dl_hang_params_default(struct dl_hang_params *p)
{
	p->min_wait_ms = 3000;
	p->stall_ms = 10000;
	p->step_margin_ms = 1000;
	p->straggler_steps = 2;
}

static void set_reason(struct verdict *v, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct verdict *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
	va_end(ap);
}

/* describe_ranks writes "rank 3 (node b)" or "ranks 1-2 (node a), 7 (node
 * c)" for the picked ranks: grouped per node, nodes in order of their
 * lowest rank. */
static void describe_ranks(const struct hang_set *s, const struct pick *p,
			   char *out, size_t out_size)
{
	int64_t *ranks = calloc(p->n + 1, sizeof(*ranks));
	char *done = calloc(p->n + 1, 1);
	size_t len;

	snprintf(out, out_size, "%s", p->n == 1 ? "rank " : "ranks ");
	if (!ranks || !done)
		goto out;
	for (size_t i = 0; i < p->n; i++) {
		const char *node = s->ranks[p->idx[i]].node;
		size_t m = 0;
		if (done[i])
			continue;
		for (size_t j = i; j < p->n; j++) {
			if (!done[j] &&
			    !strcmp(s->ranks[p->idx[j]].node, node)) {
				ranks[m++] = s->ranks[p->idx[j]].rank;
				done[j] = 1;
			}
		}
		len = strlen(out);
		if (len + 8 >= out_size)
			break; /* full: the rest would not show anyway */
		{
			char list[256];
			hang_ranks_text(ranks, m, list, sizeof(list));
			snprintf(out + len, out_size - len, "%s%s (node %s)",
				 i ? ", " : "", list, node);
		}
	}
out:
	free(ranks);
	free(done);
}

/* rank_list writes just the numbers ("0,2-3") of the picked ranks. */
static void rank_list(const struct hang_set *s, const struct pick *p, char *out,
		      size_t out_size)
{
	int64_t *ranks = calloc(p->n + 1, sizeof(*ranks));
	if (!ranks) {
		snprintf(out, out_size, "?");
		return;
	}
	for (size_t i = 0; i < p->n; i++)
		ranks[i] = s->ranks[p->idx[i]].rank;
	hang_ranks_text(ranks, p->n, out, out_size);
	free(ranks);
}

/* stopped_phrase: what a stopped rank's state means; threads are its
 * /proc thread count (a zombie leader counts its live threads too) */
static const char *stopped_phrase(const char *state, int64_t threads)
{
	if (!strcmp(state, "stopped"))
		return "stopped (SIGSTOP or job control)";
	if (!strcmp(state, "tracing-stop"))
		return "stopped by a tracer";
	if (!strcmp(state, "zombie") && threads > 1)
		return "a zombie (its main thread exited while its other "
		       "threads run on)";
	if (!strcmp(state, "zombie"))
		return "a zombie (it exited and was not reaped)";
	if (!strcmp(state, "dead"))
		return "dead";
	return "gone (the process no longer exists)";
}

/* Rule 1: a worker that is stopped, a zombie, dead or gone. */
static int rule_stopped(const struct hang_set *s, struct verdict *v)
{
	char who[512];
	const char *state = NULL;
	int64_t threads = HANG_UNKNOWN;
	int same = 1;

	for (size_t i = 0; i < s->n; i++) {
		if (!hang_state_is_stopped(s->ranks[i].state))
			continue;
		if (state && strcmp(state, s->ranks[i].state))
			same = 0;
		state = s->ranks[i].state;
		threads = s->ranks[i].threads;
		v->stuck.idx[v->stuck.n++] = i;
	}
	if (!v->stuck.n)
		return 0;
	describe_ranks(s, &v->stuck, who, sizeof(who));
	set_reason(v, "%s %s %s, so the other ranks cannot go on", who,
		   v->stuck.n == 1 ? "is" : "are",
		   same ? stopped_phrase(state, threads)
			: "not running (stopped, zombie or gone)");
	v->rule = "stopped-process";
	return 1;
}

/* find_open_collective: the lowest seq some rank entered and not every
 * rank (with flight records) finished, into v->coll_*; 1 if there is one.
 * A rank's own lowest unfinished seq is its first open one, or the one
 * after the last it entered; seqs older than its window count as
 * finished. */
static int find_open_collective(const struct hang_set *s, struct verdict *v)
{
	int64_t lowest = 0, highest = 0;
	int any = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		int64_t unfinished;
		if (!r->has_flight)
			continue;
		unfinished =
		    r->first_open_seq ? r->first_open_seq : r->max_seq + 1;
		if (!any || unfinished < lowest)
			lowest = unfinished;
		if (!any || r->max_seq > highest)
			highest = r->max_seq;
		any = 1;
	}
	if (!any || lowest > highest)
		return 0;
	v->has_coll = 1;
	v->coll_seq = lowest;
	v->coll_op = "";
	v->coll_wait_ms = HANG_UNKNOWN;
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (!r->has_flight || r->max_seq < lowest)
			continue;
		v->coll_entered.idx[v->coll_entered.n++] = i;
		if (r->first_open_seq != lowest)
			continue;
		if (!*v->coll_op)
			v->coll_op = r->open_op;
		if (r->open_t_ms != HANG_UNKNOWN && r->ref_ms != HANG_UNKNOWN &&
		    (v->coll_wait_ms == HANG_UNKNOWN ||
		     r->ref_ms - r->open_t_ms > v->coll_wait_ms))
			v->coll_wait_ms = r->ref_ms - r->open_t_ms;
	}
	return 1;
}

#define MAX_OPS 8

/* rule_other_op: every rank entered the lowest open collective, but not
 * as the same operation: the ranks waiting in a minority op took another
 * branch of the program (part of rule 2). */
static int rule_other_op(const struct hang_set *s, struct verdict *v)
{
	const char *ops[MAX_OPS];
	size_t count[MAX_OPS] = {0}, nops = 0, best = 0;
	char who[512];

	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		size_t k = 0;
		if (r->first_open_seq != v->coll_seq || !*r->open_op)
			continue;
		while (k < nops && strcmp(ops[k], r->open_op))
			k++;
		if (k == nops) {
			if (nops == MAX_OPS)
				return 0; /* no pattern to judge by */
			ops[nops++] = r->open_op;
		}
		count[k]++;
	}
	if (nops < 2)
		return 0;
	for (size_t k = 1; k < nops; k++)
		if (count[k] > count[best])
			best = k;
	for (size_t k = 0; k < nops; k++)
		if (k != best && count[k] == count[best])
			return 0; /* no majority */
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (r->first_open_seq == v->coll_seq && *r->open_op &&
		    strcmp(r->open_op, ops[best]))
			v->stuck.idx[v->stuck.n++] = i;
	}
	describe_ranks(s, &v->stuck, who, sizeof(who));
	set_reason(v,
		   "%s entered collective #%lld as another operation than "
		   "the %zu ranks in %s: %s took another branch of the "
		   "program",
		   who, (long long)v->coll_seq, count[best], ops[best],
		   v->stuck.n == 1 ? "it" : "they");
	v->rule = "missing-from-collective";
	return 1;
}

/* Rule 2: the ranks that never entered the lowest open collective (or
 * entered it as another operation than the others). */
static int rule_missing(const struct hang_set *s, struct verdict *v)
{
	char who[512], entered[256], waited[64] = "";
	int64_t last = -1;

	if (!v->has_coll)
		return 0;
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (!r->has_flight || r->max_seq >= v->coll_seq)
			continue;
		v->stuck.idx[v->stuck.n++] = i;
		if (r->max_seq > last)
			last = r->max_seq;
	}
	if (!v->stuck.n)
		return rule_other_op(s, v);
	describe_ranks(s, &v->stuck, who, sizeof(who));
	rank_list(s, &v->coll_entered, entered, sizeof(entered));
	if (v->coll_wait_ms != HANG_UNKNOWN && v->coll_wait_ms >= 0)
		snprintf(waited, sizeof(waited), " %.1f s before the trigger",
			 (double)v->coll_wait_ms / 1000.0);
	if (last > 0)
		set_reason(
		    v,
		    "%s never entered collective #%lld (%s) that %s "
		    "%s entered%s; %s last entered #%lld",
		    who, (long long)v->coll_seq, *v->coll_op ? v->coll_op : "?",
		    v->coll_entered.n == 1 ? "rank" : "ranks", entered, waited,
		    v->stuck.n == 1 ? "it" : "they", (long long)last);
	else
		set_reason(v,
			   "%s never entered collective #%lld (%s) that %s "
			   "%s entered%s; %s entered no collective yet",
			   who, (long long)v->coll_seq,
			   *v->coll_op ? v->coll_op : "?",
			   v->coll_entered.n == 1 ? "rank" : "ranks", entered,
			   waited, v->stuck.n == 1 ? "it" : "they");
	v->rule = "missing-from-collective";
	return 1;
}

/* what_it_does: a few words on a rank's process state, for reasons. */
static void what_it_does(const struct hang_rank *r, char *out, size_t size)
{
	if (!strcmp(r->state, "running") && r->cpu_ms != HANG_UNKNOWN &&
	    r->interval_ms != HANG_UNKNOWN)
		snprintf(out, size, "running, %lld ms CPU in %lld ms",
			 (long long)r->cpu_ms, (long long)r->interval_ms);
	else if (*r->state && *r->wchan)
		snprintf(out, size, "%s in %s", r->state, r->wchan);
	else if (*r->state)
		snprintf(out, size, "%s", r->state);
	else
		snprintf(out, size, "state unknown");
}

/* Rule 3: the rank(s) outside every collective while the others are in
 * one. Several outside are named only while fewer than those inside. */
static int rule_outside(const struct hang_set *s, struct verdict *v)
{
	char who[512], in[256], doing[128] = "";
	size_t nin = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->ranks[i].inside == HANG_INSIDE_YES)
			nin++;
		else if (s->ranks[i].inside == HANG_INSIDE_NO)
			v->stuck.idx[v->stuck.n++] = i;
	}
	if (!nin || !v->stuck.n || (v->stuck.n > 1 && v->stuck.n >= nin)) {
		v->stuck.n = 0;
		return 0;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->ranks[i].inside == HANG_INSIDE_YES)
			v->inside.idx[v->inside.n++] = i;
	describe_ranks(s, &v->stuck, who, sizeof(who));
	rank_list(s, &v->inside, in, sizeof(in));
	if (v->stuck.n == 1) {
		what_it_does(&s->ranks[v->stuck.idx[0]], doing + 2,
			     sizeof(doing) - 3);
		doing[0] = ' ';
		doing[1] = '(';
		strcat(doing, ")");
	}
	set_reason(
	    v, "%s %s outside any collective%s while %s %s %s inside one", who,
	    v->stuck.n == 1 ? "is" : "are", doing, nin == 1 ? "rank" : "ranks",
	    in, nin == 1 ? "waits" : "wait");
	v->rule = "outside-collective";
	return 1;
}

/* Rule 4: the ranks at the lowest step, or, all at one step, the ranks
 * whose step has stood still longer than every other's by the margin. */
static int rule_first_stopped(const struct hang_set *s, struct verdict *v,
			      const struct dl_hang_params *p)
{
	int64_t low = 0, high = 0, cut = 0, other_max = -1;
	size_t with_step = 0;
	char who[512];

	for (size_t i = 0; i < s->n; i++) {
		int64_t st = s->ranks[i].step;
		if (st == HANG_UNKNOWN)
			continue;
		if (!with_step || st < low)
			low = st;
		if (!with_step || st > high)
			high = st;
		with_step++;
	}
	if (with_step < 2)
		return 0;
	if (low < high) {
		for (size_t i = 0; i < s->n; i++)
			if (s->ranks[i].step == low)
				v->stuck.idx[v->stuck.n++] = i;
		describe_ranks(s, &v->stuck, who, sizeof(who));
		set_reason(v,
			   "%s stopped first: %s at step %lld while the others "
			   "reached step %lld or later",
			   who, v->stuck.n == 1 ? "it is" : "they are",
			   (long long)low, (long long)(low + 1));
		v->rule = "first-stopped";
		return 1;
	}
	/* one step everywhere: look for a clear gap in the step ages, from
	 * the oldest down */
	{
		int64_t *ages = calloc(with_step, sizeof(*ages));
		size_t m = 0;
		if (!ages)
			return 0;
		for (size_t i = 0; i < s->n; i++)
			if (s->ranks[i].step != HANG_UNKNOWN &&
			    s->ranks[i].step_age_ms != HANG_UNKNOWN)
				ages[m++] = s->ranks[i].step_age_ms;
		/* sort descending (small m: insertion sort) */
		for (size_t i = 1; i < m; i++)
			for (size_t j = i; j > 0 && ages[j] > ages[j - 1];
			     j--) {
				int64_t t = ages[j];
				ages[j] = ages[j - 1];
				ages[j - 1] = t;
			}
		for (size_t i = 0; i + 1 < m; i++) {
			if (ages[i] - ages[i + 1] >= p->step_margin_ms) {
				cut = ages[i];
				other_max = ages[i + 1];
				break;
			}
		}
		free(ages);
		if (other_max < 0)
			return 0;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->ranks[i].step != HANG_UNKNOWN &&
		    s->ranks[i].step_age_ms != HANG_UNKNOWN &&
		    s->ranks[i].step_age_ms >= cut)
			v->stuck.idx[v->stuck.n++] = i;
	describe_ranks(s, &v->stuck, who, sizeof(who));
	set_reason(v,
		   "%s stopped first: %s step (%lld) has not moved for %.1f "
		   "s, the other ranks' for %.1f s at most",
		   who, v->stuck.n == 1 ? "its" : "their", (long long)low,
		   (double)cut / 1000.0, (double)other_max / 1000.0);
	v->rule = "first-stopped";
	return 1;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* find_stragglers: ranks more than straggler_steps behind the median step
 * while some rank at or past the median moves (its step changed within
 * stall_ms). Stuck ranks are not stragglers. */
static void find_stragglers(const struct hang_set *s, struct verdict *v,
			    const struct dl_hang_params *p)
{
	int64_t *steps = calloc(s->n + 1, sizeof(*steps)), median;
	size_t m = 0;
	int moving = 0;

	if (!steps)
		return;
	for (size_t i = 0; i < s->n; i++)
		if (s->ranks[i].step != HANG_UNKNOWN)
			steps[m++] = s->ranks[i].step;
	if (m < 2)
		goto out;
	qsort(steps, m, sizeof(*steps), cmp_i64);
	median = steps[(m - 1) / 2];
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (r->step != HANG_UNKNOWN && r->step >= median &&
		    r->step_age_ms != HANG_UNKNOWN &&
		    r->step_age_ms < p->stall_ms)
			moving = 1;
	}
	if (!moving)
		goto out;
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		int stuck = 0;
		if (r->step == HANG_UNKNOWN ||
		    median - r->step <= p->straggler_steps)
			continue;
		for (size_t j = 0; j < v->stuck.n; j++)
			stuck |= v->stuck.idx[j] == i;
		if (!stuck)
			v->stragglers.idx[v->stragglers.n++] = i;
	}
out:
	free(steps);
}

/* stopped_moving: the evidence rules 2-4 need (see hang.h). */
static int stopped_moving(const struct hang_set *s, const struct verdict *v,
			  const struct dl_hang_params *p)
{
	size_t aged = 0, stale = 0;

	if (!strcmp(s->trigger_kind, "progress-timeout") ||
	    !strcmp(s->trigger_kind, "stall"))
		return 1;
	if (v->has_coll && v->coll_wait_ms != HANG_UNKNOWN &&
	    v->coll_wait_ms >= p->min_wait_ms)
		return 1;
	for (size_t i = 0; i < s->n; i++) {
		const struct hang_rank *r = &s->ranks[i];
		if (r->oldest_open_age_ms != HANG_UNKNOWN &&
		    r->oldest_open_age_ms >= p->min_wait_ms)
			return 1;
		if (r->step_age_ms != HANG_UNKNOWN) {
			aged++;
			stale += r->step_age_ms >= p->stall_ms;
		}
	}
	return aged > 0 && stale == aged;
}

/* missing_ranks: ranks below the highest seen that no report gave. */
static int64_t missing_ranks(const struct hang_set *s)
{
	if (!s->n)
		return 0;
	return s->ranks[s->n - 1].rank + 1 - (int64_t)s->n;
}

static json_t *ranks_json(const struct hang_set *s, const struct pick *p)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < p->n; i++)
		if (json_array_append_new(
			a, json_integer(s->ranks[p->idx[i]].rank))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *missing_nodes_json(const struct hang_set *s, json_t *members)
{
	json_t *out = json_array(), *m, *n;
	size_t i, j;

	if (!out || !json_is_array(members))
		return out;
	json_array_foreach(members, i, m)
	{
		int found = 0;
		if (!json_is_string(m))
			continue;
		json_array_foreach(s->nodes, j, n)
		{
			found |= json_equal(m, n);
		}
		if (!found && json_array_append(out, m)) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

/* judge runs the rules in order and fills v. */
static void judge(const struct hang_set *s, struct verdict *v,
		  size_t nmissing_nodes, const struct dl_hang_params *p)
{
	char list[256];
	int64_t gaps = missing_ranks(s);
	int incomplete = nmissing_nodes > 0 || gaps > 0;

	v->verdict = "hang";
	v->rule = "none";
	if (!s->n) {
		v->verdict = "incomplete";
		set_reason(v, "no worker in the reports: nothing to judge");
		return;
	}
	if (rule_stopped(s, v))
		return;
	find_open_collective(s, v);
	if (stopped_moving(s, v, p)) {
		if (rule_missing(s, v) || rule_outside(s, v) ||
		    rule_first_stopped(s, v, p))
			return;
		if (incomplete) {
			v->verdict = "incomplete";
			set_reason(
			    v,
			    "the job stopped, and the ranks that reported "
			    "do not show which is stuck; %lld node(s) "
			    "and %lld rank(s) below the highest did not "
			    "report",
			    (long long)nmissing_nodes, (long long)gaps);
		} else if (v->has_coll) {
			rank_list(s, &v->coll_entered, list, sizeof(list));
			set_reason(
			    v,
			    "the job stopped with every rank inside "
			    "collective #%lld (%s): no rank is missing "
			    "from it, so the collective itself does not "
			    "finish (network, or a peer outside the job)",
			    (long long)v->coll_seq,
			    *v->coll_op ? v->coll_op : "?");
		} else {
			set_reason(v,
				   "the job stopped but no rule names a "
				   "rank: every rank looks the same (see the "
				   "stacks)");
		}
		return;
	}
	find_stragglers(s, v, p);
	if (v->stragglers.n) {
		char who[512];
		describe_ranks(s, &v->stragglers, who, sizeof(who));
		v->verdict = "straggler";
		set_reason(v,
			   "%s %s more than %lld steps behind the others, "
			   "which still move",
			   who, v->stragglers.n == 1 ? "is" : "are",
			   (long long)p->straggler_steps);
		return;
	}
	if (incomplete) {
		v->verdict = "incomplete";
		set_reason(v,
			   "no sign of a hang in the reports received, but "
			   "%lld node(s) and %lld rank(s) below the highest "
			   "did not report",
			   (long long)nmissing_nodes, (long long)gaps);
		return;
	}
	v->verdict = "none";
	set_reason(v, "no sign of a hang: no rank is stopped, no collective "
		      "was waited in for long and the steps move or are not "
		      "reported");
}

static json_t *build(const struct hang_set *s, const struct verdict *v,
		     json_t *missing)
{
	json_t *o = json_object(), *coll = NULL;
	int bad = !o;

	if (v->has_coll && !strcmp(v->rule, "missing-from-collective")) {
		coll = json_object();
		bad |= !coll;
		bad |=
		    json_object_set_new(coll, "seq", json_integer(v->coll_seq));
		bad |= json_object_set_new(coll, "op", json_string(v->coll_op));
		bad |= json_object_set_new(coll, "entered",
					   ranks_json(s, &v->coll_entered));
		bad |= json_object_set_new(coll, "wait_ms",
					   v->coll_wait_ms == HANG_UNKNOWN
					       ? json_null()
					       : json_integer(v->coll_wait_ms));
	}
	bad |= json_object_set_new(o, "verdict", json_string(v->verdict));
	bad |= json_object_set_new(o, "stuck", ranks_json(s, &v->stuck));
	bad |=
	    json_object_set_new(o, "stragglers", ranks_json(s, &v->stragglers));
	bad |= json_object_set_new(o, "rule", json_string(v->rule));
	bad |= json_object_set_new(o, "reason", json_string(v->reason));
	bad |= json_object_set_new(o, "ranks_seen",
				   json_integer((json_int_t)s->n));
	bad |= json_object_set(o, "nodes", s->nodes);
	bad |= json_object_set(o, "missing_nodes", missing);
	if (coll)
		bad |= json_object_set_new(o, "collective", coll);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *dl_hang_analyse_members(json_t *reports, json_t *members,
				const struct dl_hang_params *params,
				int64_t now_ms)
{
	struct dl_hang_params defaults;
	struct hang_set s;
	struct verdict v;
	json_t *missing = NULL, *out = NULL;

	if (!params) {
		dl_hang_params_default(&defaults);
		params = &defaults;
	}
	memset(&v, 0, sizeof(v));
	if (hang_load(&s, reports, now_ms))
		goto out;
	v.stuck.idx = calloc(s.n + 1, sizeof(size_t));
	v.stragglers.idx = calloc(s.n + 1, sizeof(size_t));
	v.coll_entered.idx = calloc(s.n + 1, sizeof(size_t));
	v.inside.idx = calloc(s.n + 1, sizeof(size_t));
	missing = missing_nodes_json(&s, members);
	if (!v.stuck.idx || !v.stragglers.idx || !v.coll_entered.idx ||
	    !v.inside.idx || !missing)
		goto out;
	judge(&s, &v, json_array_size(missing), params);
	out = build(&s, &v, missing);
out:
	free(v.stuck.idx);
	free(v.stragglers.idx);
	free(v.coll_entered.idx);
	free(v.inside.idx);
	json_decref(missing);
	hang_set_release(&s);
	return out;
}

json_t *dl_hang_analyse(json_t *reports, int64_t now_ms)
{
	return dl_hang_analyse_members(reports, NULL, NULL, now_ms);
}
