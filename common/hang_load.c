/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_load.c - reads the node reports of a hang trigger into the flat,
 * rank-sorted table the analysis works from (hang_int.h). Every field is
 * optional and type-checked: what is missing or of the wrong type is
 * treated as unknown, a worker without a valid rank is left out, and the
 * amounts read are bounded (DL_HANG_MAX_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/hang.h"
#include "hang_int.h"

/* Frames that mean "inside a collective" in a Python stack (torch's
 * process-group calls) and in a native one (NCCL's entry points, gloo,
 * dlaunch-train's collective library). NCCL's own proxy threads, present
 * on every rank, match none of these. */
static const char *const python_markers[] = {"torch/distributed/"};
static const char *const native_markers[] = {
    "ncclAllReduce",   "ncclBroadcast",	   "ncclAllGather",  "ncclReduce",
    "ncclSend",	       "ncclRecv",	   "ncclGroupEnd",   "gloo::",
    "dist_all_reduce", "dist_iall_reduce", "dist_broadcast", "dist_barrier",
    "dist_all_gather", "dist_reduce",	   "dist_wait",	     "dist_recv",
};

int dl_hang_id_valid(const char *id)
{
	size_t n = 0;
	if (!id)
		return 0;
	for (; id[n]; n++) {
		char c = id[n];
		if (n >= DL_HANG_ID_MAX ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == ':' || c == '-'))
			return 0;
	}
	return n > 0;
}

int64_t hang_json_int(json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	double d;

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_real(v)) {
		d = json_real_value(v);
		if (d >= -9.0e15 && d <= 9.0e15 && d == (double)(int64_t)d)
			return (int64_t)d;
	}
	return HANG_UNKNOWN;
}

int64_t hang_json_num(json_t *obj, const char *key)
{
	int64_t v = hang_json_int(obj, key);
	return v >= 0 && v <= HANG_NUM_MAX ? v : HANG_UNKNOWN;
}

const char *hang_json_str(json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *str_or(json_t *obj, const char *key, const char *dflt)
{
	const char *s = hang_json_str(obj, key);
	return s ? s : dflt;
}

static const char *nonempty_str(json_t *obj, const char *key)
{
	const char *s = hang_json_str(obj, key);
	return s && *s ? s : NULL;
}

int hang_state_is_stopped(const char *state)
{
	static const char *const stopped[] = {"stopped", "tracing-stop",
					      "zombie", "dead", "gone"};
	for (size_t i = 0; i < sizeof(stopped) / sizeof(stopped[0]); i++)
		if (state && strcmp(state, stopped[i]) == 0)
			return 1;
	return 0;
}

static int has_marker(const char *text, const char *const *markers, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strstr(text, markers[i]))
			return 1;
	return 0;
}

struct flight_item {
	int64_t seq, t_ms;
	int finished;
	const char *op;
};

static int cmp_item(const void *a, const void *b)
{
	const struct flight_item *x = a, *y = b;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->finished - y->finished; /* entered before finished */
}

/* read_flight fills the flight fields of r from its "flight" array. A seq
 * is open when it was entered and no entry says it finished. */
static int read_flight(struct hang_rank *r)
{
	size_t n = json_array_size(r->flight), start, k = 0;
	struct flight_item *items;

	r->has_flight = 1;
	start = n > DL_HANG_MAX_FLIGHT ? n - DL_HANG_MAX_FLIGHT : 0;
	items = calloc(n - start + 1, sizeof(*items));
	if (!items)
		return DL_ENOMEM;
	for (size_t i = start; i < n; i++) {
		json_t *e = json_array_get(r->flight, i);
		const char *state = hang_json_str(e, "state");
		int64_t seq = hang_json_num(e, "seq");
		if (seq == HANG_UNKNOWN || seq < 1 || !state)
			continue;
		if (strcmp(state, "finished") && strcmp(state, "entered"))
			continue;
		items[k].seq = seq;
		items[k].t_ms = hang_json_num(e, "t_ms");
		items[k].finished = strcmp(state, "finished") == 0;
		items[k].op = str_or(e, "op", "");
		k++;
	}
	qsort(items, k, sizeof(*items), cmp_item);
	for (size_t i = 0; i < k; i++) {
		size_t j = i;
		int finished = 0;
		while (j < k && items[j].seq == items[i].seq)
			finished |= items[j++].finished;
		if (!r->min_seq)
			r->min_seq = items[i].seq;
		r->max_seq = items[i].seq;
		if (!finished) {
			int64_t age = HANG_UNKNOWN;
			if (items[i].t_ms != HANG_UNKNOWN &&
			    r->ref_ms != HANG_UNKNOWN)
				age = r->ref_ms - items[i].t_ms;
			if (!r->first_open_seq) {
				r->first_open_seq = items[i].seq;
				r->open_t_ms = items[i].t_ms;
				r->open_op = items[i].op;
			}
			if (age != HANG_UNKNOWN &&
			    (r->oldest_open_age_ms == HANG_UNKNOWN ||
			     age > r->oldest_open_age_ms))
				r->oldest_open_age_ms = age;
		}
		i = j - 1;
	}
	free(items);
	r->inside = r->first_open_seq ? HANG_INSIDE_YES : HANG_INSIDE_NO;
	return 0;
}

/* read_worker fills r from one worker object; 1 if it is usable (has a
 * rank), 0 if it is left out, or DL_ENOMEM. */
static int read_worker(struct hang_rank *r, json_t *w, json_t *report,
		       int64_t ref_ms)
{
	json_t *v;

	memset(r, 0, sizeof(*r));
	r->rank = hang_json_int(w, "rank");
	if (r->rank == HANG_UNKNOWN || r->rank < 0 || r->rank > INT32_MAX)
		return 0;
	r->local_rank = hang_json_int(w, "local_rank");
	r->pid = hang_json_int(w, "pid");
	r->threads = hang_json_int(w, "threads");
	r->node = str_or(report, "node", "?");
	r->host = str_or(report, "host", "?");
	r->state = str_or(w, "state", "");
	r->proc_state = str_or(w, "proc_state", "");
	r->wchan = str_or(w, "wchan", "");
	r->cpu_ms = hang_json_num(w, "cpu_ms");
	r->interval_ms = hang_json_num(w, "interval_ms");
	r->step = hang_json_num(w, "step");
	r->step_age_ms = hang_json_num(w, "step_age_ms");
	r->python = nonempty_str(w, "python");
	r->native = nonempty_str(w, "native");
	v = json_object_get(w, "notes");
	r->notes = json_is_array(v) ? v : NULL;
	r->ref_ms = ref_ms;
	r->open_t_ms = HANG_UNKNOWN;
	r->open_op = "";
	r->oldest_open_age_ms = HANG_UNKNOWN;
	r->inside = HANG_INSIDE_UNKNOWN;
	v = json_object_get(w, "flight");
	if (json_is_array(v)) {
		r->flight = v;
		if (read_flight(r))
			return DL_ENOMEM;
	} else if (r->python) {
		r->inside = has_marker(r->python, python_markers,
				       sizeof(python_markers) /
					   sizeof(python_markers[0]))
				? HANG_INSIDE_YES
				: HANG_INSIDE_NO;
	} else if (r->native) {
		r->inside = has_marker(r->native, native_markers,
				       sizeof(native_markers) /
					   sizeof(native_markers[0]))
				? HANG_INSIDE_YES
				: HANG_INSIDE_NO;
	}
	return 1;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct hang_rank *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* pick_trigger: the trigger of the newest report that names one. */
static void pick_trigger(struct hang_set *s, json_t *reports, size_t n)
{
	int64_t best = HANG_UNKNOWN;

	for (size_t i = 0; i < n; i++) {
		json_t *t =
		    json_object_get(json_array_get(reports, i), "trigger");
		int64_t at = hang_json_num(t, "time_ms");
		if (!hang_json_str(t, "id"))
			continue;
		if (!s->trigger || (at != HANG_UNKNOWN && at > best)) {
			s->trigger = t;
			best = at;
		}
	}
	if (!s->trigger)
		return;
	s->trigger_id = hang_json_str(s->trigger, "id");
	s->trigger_kind = str_or(s->trigger, "kind", "");
	s->trigger_ms = best;
}

/* add_node appends id to s->nodes unless it is there already. */
static int add_node(struct hang_set *s, const char *id)
{
	size_t i;
	json_t *v;

	json_array_foreach(s->nodes, i, v)
	{
		if (strcmp(json_string_value(v), id) == 0)
			return 0;
	}
	return json_array_append_new(s->nodes, json_string(id)) ? DL_ENOMEM : 0;
}

int hang_load(struct hang_set *s, json_t *reports, int64_t now_ms)
{
	size_t nrep = json_array_size(reports), total = 0, k = 0;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	s->trigger_id = "";
	s->trigger_kind = "";
	s->trigger_ms = HANG_UNKNOWN;
	s->nodes = json_array();
	if (!s->nodes)
		return DL_ENOMEM;
	if (nrep > DL_HANG_MAX_REPORTS)
		nrep = DL_HANG_MAX_REPORTS;
	pick_trigger(s, reports, nrep);
	for (size_t i = 0; i < nrep; i++)
		total += json_array_size(
		    json_object_get(json_array_get(reports, i), "workers"));
	if (total > DL_HANG_MAX_RANKS)
		total = DL_HANG_MAX_RANKS;
	s->ranks = calloc(total + 1, sizeof(*s->ranks));
	if (!s->ranks)
		return DL_ENOMEM;
	for (size_t i = 0; i < nrep && rc == 0; i++) {
		json_t *rep = json_array_get(reports, i);
		json_t *workers = json_object_get(rep, "workers");
		const char *tid =
		    hang_json_str(json_object_get(rep, "trigger"), "id");
		const char *node = hang_json_str(rep, "node");
		int64_t ref = s->trigger_ms;

		if (!json_is_object(rep) ||
		    (tid && s->trigger_id && strcmp(tid, s->trigger_id)))
			continue; /* not a report, or of an older trigger */
		if (node && (rc = add_node(s, node)))
			break;
		if (ref == HANG_UNKNOWN)
			ref = hang_json_num(rep, "time_ms");
		if (ref == HANG_UNKNOWN && now_ms >= 0 &&
		    now_ms <= HANG_NUM_MAX)
			ref = now_ms;
		for (size_t j = 0; j < json_array_size(workers) && k < total;
		     j++) {
			struct hang_rank *r = &s->ranks[k];
			rc = read_worker(r, json_array_get(workers, j), rep,
					 ref);
			if (rc < 0)
				break;
			r->order = k;
			k += (size_t)rc;
			rc = 0;
		}
	}
	qsort(s->ranks, k, sizeof(*s->ranks), cmp_rank);
	/* one entry per rank: the first report that gave it */
	s->n = 0;
	for (size_t i = 0; i < k; i++)
		if (s->n == 0 || s->ranks[s->n - 1].rank != s->ranks[i].rank)
			s->ranks[s->n++] = s->ranks[i];
	return rc;
}

void hang_set_release(struct hang_set *s)
{
	free(s->ranks);
	json_decref(s->nodes);
	memset(s, 0, sizeof(*s));
}

void hang_ranks_text(const int64_t *ranks, size_t n, char *out, size_t out_size)
{
	size_t len = 0;

	if (!out_size)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t j = i;
		int w;
		while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
			j++;
		if (j == i)
			w = snprintf(out + len, out_size - len, "%s%lld",
				     i ? "," : "", (long long)ranks[i]);
		else
			w = snprintf(out + len, out_size - len, "%s%lld-%lld",
				     i ? "," : "", (long long)ranks[i],
				     (long long)ranks[j]);
		if (w < 0 || (size_t)w >= out_size - len) {
			/* full: end with "..." where it fits */
			if (out_size >= 4)
				memcpy(out + out_size - 4, "...", 4);
			return;
		}
		len += (size_t)w;
		i = j;
	}
}
