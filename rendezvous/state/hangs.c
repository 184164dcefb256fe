/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hangs.c - the state machine's side of hang diagnosis (rdzv_state.h,
 * "Hang diagnosis"): triggers, the member nodes each one asks, the node
 * reports that answer it, and the analysis of them (common/hang.c),
 * brought up to date when the last report arrives or someone reads it.
 * Bounded per report, per job and over all jobs; in memory only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/buf.h"
#include "dlaunch/error.h"
#include "dlaunch/hang.h"
#include "dlaunch/log.h"
#include "state_int.h"

/* A member node of the round a trigger asked, and its answer. */
struct hang_node {
	char *node_id, *incarnation;
	json_t *report; /* NULL until it reported */
	size_t bytes;
};

struct hang_trigger {
	char id[RDZV_HANG_ID_MAX + 1];
	enum rdzv_hang_kind kind;
	char by[RDZV_NAME_MAX + 1];
	uint64_t opened_ms; /* monotonic */
	uint64_t time_ms;   /* unix */
	uint64_t round;
	struct hang_node *nodes;
	size_t nnodes, nreported, bytes;
	/* the analysis of the reports so far; stale when dirty */
	int dirty;
	json_t *analysis; /* NULL before the first report */
	char *text;
};

struct job_hangs {
	struct hang_trigger *trig[RDZV_HANG_KEPT]; /* oldest first */
	size_t n;
	uint64_t seq;	   /* triggers opened so far */
	size_t bytes;	   /* of the reports held, all triggers */
	size_t *all_bytes; /* the state's total over every job */
};

static const char *const kind_names[RDZV_HANG_NKINDS] = {
    [RDZV_HANG_DUMP] = "dump",
    [RDZV_HANG_PROGRESS_TIMEOUT] = "progress-timeout",
    [RDZV_HANG_STALL] = "stall",
    [RDZV_HANG_EXIT] = "exit",
};

int rdzv_hang_kind_parse(const char *s, enum rdzv_hang_kind *out)
{
	for (int i = 0; i < RDZV_HANG_NKINDS; i++)
		if (s && strcmp(s, kind_names[i]) == 0) {
			*out = (enum rdzv_hang_kind)i;
			return 0;
		}
	return DL_EINVAL;
}

const char *rdzv_hang_kind_name(enum rdzv_hang_kind k)
{
	return (unsigned)k < RDZV_HANG_NKINDS ? kind_names[k] : "dump";
}

/* trigger_free frees t; h (NULL: t was never added) gives its bytes back */
static void trigger_free(struct job_hangs *h, struct hang_trigger *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nnodes; i++) {
		free(t->nodes[i].node_id);
		free(t->nodes[i].incarnation);
		json_decref(t->nodes[i].report);
	}
	if (h) {
		h->bytes -= t->bytes;
		*h->all_bytes -= t->bytes;
	}
	free(t->nodes);
	json_decref(t->analysis);
	free(t->text);
	free(t);
}

void job_hangs_free(struct job *j)
{
	struct job_hangs *h = j->hangs;
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		trigger_free(h, h->trig[i]);
	free(h);
	j->hangs = NULL;
}

/* drop_oldest forgets h's oldest trigger. */
static void drop_oldest(struct job_hangs *h)
{
	trigger_free(h, h->trig[0]);
	memmove(&h->trig[0], &h->trig[1], (h->n - 1) * sizeof(h->trig[0]));
	h->n--;
}

static struct hang_trigger *latest(const struct job *j)
{
	return j->hangs && j->hangs->n ? j->hangs->trig[j->hangs->n - 1] : NULL;
}

/* is_open: t still asks for reports: not every node answered, for at most
 * RDZV_HANG_OPEN_MS, and only while j runs the round t asked (a new round
 * has new workers: a dump of them would answer nothing) */
static int is_open(const struct job *j, const struct hang_trigger *t,
		   uint64_t now_ms)
{
	return t && t->nreported < t->nnodes &&
	       now_ms < t->opened_ms + RDZV_HANG_OPEN_MS &&
	       j->round == t->round && j->state == RDZV_JOB_RUNNING;
}

static json_t *trigger_json(const struct hang_trigger *t)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", t->id, "kind",
			 rdzv_hang_kind_name(t->kind), "by", t->by, "time_ms",
			 (json_int_t)t->time_ms, "round", (json_int_t)t->round);
}

/* new_trigger makes a trigger asking j's current members. */
static struct hang_trigger *new_trigger(const struct job *j, uint64_t seq,
					enum rdzv_hang_kind kind,
					const char *by, uint64_t now_ms,
					uint64_t wall_ms)
{
	struct hang_trigger *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->nodes = calloc(j->nmembers + 1, sizeof(*t->nodes));
	if (!t->nodes) {
		free(t);
		return NULL;
	}
	/* unix ms in hex and the job's count: unique across restarts of
	 * the server too, so an agent never takes a new trigger for one it
	 * already answered */
	snprintf(t->id, sizeof(t->id), "%" PRIx64 "-%" PRIu64, wall_ms, seq);
	t->kind = kind;
	snprintf(t->by, sizeof(t->by), "%s", by);
	t->opened_ms = now_ms;
	t->time_ms = wall_ms;
	t->round = j->round;
	for (size_t i = 0; i < j->nmembers; i++) {
		struct hang_node *n = &t->nodes[t->nnodes++];
		n->node_id = strdup(j->members[i].info.node_id);
		n->incarnation = strdup(j->members[i].info.incarnation);
		if (!n->node_id || !n->incarnation) {
			trigger_free(NULL, t);
			return NULL;
		}
	}
	return t;
}

int rdzv_hang_trigger(struct rdzv_state *st, const char *job,
		      const char *node_id, const char *incarnation,
		      enum rdzv_hang_kind kind, const char *by, uint64_t now_ms,
		      uint64_t wall_ms, json_t **out, char *err,
		      size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct hang_trigger *t;
	int opened = 0;

	*out = NULL;
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if (job_is_ended(j))
		return ERR(DL_EGONE,
			   "job %s has ended (%s): no workers to dump", job,
			   rdzv_job_state_name(j->state));
	if (node_id && *node_id) {
		const struct member *m = job_find_member(j, node_id);
		if (!m || j->state != RDZV_JOB_RUNNING)
			return ERR(DL_ESTALE,
				   "node %s is not a member of round %" PRIu64
				   " of job %s",
				   node_id, j->round, job);
		if (incarnation && *incarnation &&
		    strcmp(m->info.incarnation, incarnation) != 0)
			return ERR(DL_ESTALE,
				   "stale incarnation %s of node %s (job %s)",
				   incarnation, node_id, job);
	}
	if (j->state != RDZV_JOB_RUNNING)
		return ERR(DL_ECONFLICT,
			   "job %s has no running round (it is %s): no workers "
			   "to dump",
			   job, rdzv_job_state_name(j->state));
	if (!j->hangs) {
		j->hangs = calloc(1, sizeof(*j->hangs));
		if (!j->hangs)
			return ERR(DL_ENOMEM, "out of memory");
		j->hangs->all_bytes = &st->hang_bytes;
	}
	t = latest(j);
	if (!is_open(j, t, now_ms)) {
		t = new_trigger(j, j->hangs->seq + 1, kind, by, now_ms,
				wall_ms);
		if (!t)
			return ERR(DL_ENOMEM, "out of memory");
		if (j->hangs->n == RDZV_HANG_KEPT)
			drop_oldest(j->hangs);
		j->hangs->trig[j->hangs->n++] = t;
		j->hangs->seq++;
		st->counters.hang_triggers_total[kind]++;
		opened = 1;
		/* parked watches answer with it at once */
		job_mark(j, RDZV_CHANGED_WAKE);
		log_info("job=%s round=%" PRIu64 " event=hang_trigger id=%s "
			 "kind=%s by=%s nodes=%zu",
			 job, j->round, t->id, rdzv_hang_kind_name(kind), by,
			 t->nnodes);
	}
	*out = trigger_json(t);
	if (!*out || json_object_set_new(*out, "opened", json_boolean(opened)))
		return ERR(DL_ENOMEM, "out of memory");
	return 0;
}

/* check_report: the shape the server relies on; the analysis reads the
 * rest leniently. */
static int check_report(json_t *report, const char **node, const char **id,
			char *err, size_t err_size)
{
	json_t *v = json_object_get(report, "version");
	json_t *trig = json_object_get(report, "trigger");
	json_t *workers = json_object_get(report, "workers");

	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return ERR(DL_EINVAL, "field 'version' must be 1");
	*node = json_string_value(json_object_get(report, "node"));
	if (!*node || !parse_name_valid(*node, RDZV_NAME_MAX))
		return ERR(DL_EINVAL,
			   "field 'node' must be 1 to %d characters of "
			   "" PARSE_NAME_RULE,
			   RDZV_NAME_MAX);
	*id = json_string_value(json_object_get(trig, "id"));
	if (!json_is_object(trig) || !*id ||
	    !parse_name_valid(*id, RDZV_HANG_ID_MAX))
		return ERR(DL_EINVAL,
			   "field 'trigger' must be an object whose 'id' is 1 "
			   "to %d characters of " PARSE_NAME_RULE,
			   RDZV_HANG_ID_MAX);
	if (!json_is_array(workers) ||
	    json_array_size(workers) > RDZV_MAX_NPROC)
		return ERR(DL_EINVAL,
			   "field 'workers' must be an array of at most %d "
			   "workers",
			   RDZV_MAX_NPROC);
	return 0;
}

static struct hang_trigger *find_trigger(const struct job *j, const char *id)
{
	for (size_t i = 0; j->hangs && i < j->hangs->n; i++)
		if (strcmp(j->hangs->trig[i]->id, id) == 0)
			return j->hangs->trig[i];
	return NULL;
}

/* make_room drops j's older triggers (never keep) until delta more bytes
 * fit the job's bound; DL_ELIMIT when they cannot. */
static int make_room(struct rdzv_state *st, struct job *j,
		     const struct hang_trigger *keep, size_t delta, char *err,
		     size_t err_size)
{
	struct job_hangs *h = j->hangs;
	while (h->bytes + delta > RDZV_HANG_JOB_MAX_BYTES && h->n > 1 &&
	       h->trig[0] != keep)
		drop_oldest(h);
	if (h->bytes + delta > RDZV_HANG_JOB_MAX_BYTES)
		return ERR(DL_ELIMIT,
			   "job %s already holds %zu bytes of hang reports "
			   "for this trigger (at most %u)",
			   j->name, h->bytes, RDZV_HANG_JOB_MAX_BYTES);
	if (st->hang_bytes + delta > RDZV_HANG_ALL_MAX_BYTES)
		return ERR(DL_ELIMIT,
			   "the server holds %zu bytes of hang reports (at "
			   "most %u over all jobs)",
			   st->hang_bytes, RDZV_HANG_ALL_MAX_BYTES);
	return 0;
}

/* refresh brings t's analysis and text up to date with its reports. */
static void refresh(struct rdzv_state *st, struct hang_trigger *t,
		    uint64_t wall_ms)
{
	json_t *reports, *members, *a = NULL;
	struct buf text;

	if (!t->dirty)
		return;
	reports = json_array();
	members = json_array();
	buf_init(&text, RDZV_HANG_TEXT_MAX_BYTES);
	for (size_t i = 0; reports && members && i < t->nnodes; i++) {
		if (t->nodes[i].report)
			json_array_append(reports, t->nodes[i].report);
		json_array_append_new(members,
				      json_string(t->nodes[i].node_id));
	}
	if (reports && members)
		a = dl_hang_analyse_members(reports, members, NULL,
					    (int64_t)wall_ms);
	if (a && dl_hang_format_text(reports, a, &text) == 0) {
		json_decref(t->analysis);
		free(t->text);
		t->analysis = a;
		t->text = buf_steal(&text, NULL);
		t->dirty = 0;
		st->counters.hang_stuck_ranks =
		    json_array_size(json_object_get(a, "stuck"));
	} else {
		json_decref(a); /* out of memory: try again next time */
	}
	buf_release(&text);
	json_decref(reports);
	json_decref(members);
}

int rdzv_hang_report(struct rdzv_state *st, const char *job,
		     const char *incarnation, json_t *report, size_t bytes,
		     uint64_t now_ms, uint64_t wall_ms, int *complete,
		     char *err, size_t err_size)
{
	struct job *j = state_find_job(st, job);
	struct hang_trigger *t;
	struct hang_node *n = NULL;
	const char *node, *id;
	size_t delta;
	int rc;

	(void)now_ms;
	*complete = 0;
	if (!j)
		return ERR(DL_ENOTFOUND, "no job %s", job);
	if ((rc = check_report(report, &node, &id, err, err_size)))
		return rc;
	if (bytes > RDZV_HANG_REPORT_MAX_BYTES)
		return ERR(DL_ELIMIT, "a node report is at most %u bytes",
			   RDZV_HANG_REPORT_MAX_BYTES);
	t = find_trigger(j, id);
	if (!t)
		return ERR(DL_ENOTFOUND,
			   "no trigger %s in job %s (only the last %d are "
			   "kept)",
			   id, job, RDZV_HANG_KEPT);
	for (size_t i = 0; i < t->nnodes && !n; i++)
		if (strcmp(t->nodes[i].node_id, node) == 0)
			n = &t->nodes[i];
	if (!n)
		return ERR(DL_ESTALE,
			   "node %s was not a member of round %" PRIu64
			   " of job %s when trigger %s opened",
			   node, t->round, job, id);
	if (!incarnation || strcmp(n->incarnation, incarnation) != 0)
		return ERR(DL_ESTALE,
			   "stale incarnation %s of node %s (job %s)",
			   incarnation ? incarnation : "(none)", node, job);
	/* the node's earlier report gives its bytes back */
	delta = bytes > n->bytes ? bytes - n->bytes : 0;
	if ((rc = make_room(st, j, t, delta, err, err_size)))
		return rc;
	if (n->report) {
		j->hangs->bytes -= n->bytes;
		st->hang_bytes -= n->bytes;
		t->bytes -= n->bytes;
		json_decref(n->report);
	} else {
		t->nreported++;
	}
	n->report = json_incref(report);
	n->bytes = bytes;
	t->bytes += bytes;
	j->hangs->bytes += bytes;
	st->hang_bytes += bytes;
	t->dirty = 1;
	st->counters.hang_reports_total++;
	log_info("job=%s event=hang_report id=%s node=%s bytes=%zu "
		 "reported=%zu/%zu",
		 job, id, node, bytes, t->nreported, t->nnodes);
	*complete = t->nreported == t->nnodes;
	if (*complete) {
		refresh(st, t, wall_ms);
		if (t->analysis)
			log_info("job=%s event=hang_analysis id=%s verdict=%s "
				 "reason=\"%s\"",
				 job, id,
				 json_string_value(
				     json_object_get(t->analysis, "verdict")),
				 json_string_value(
				     json_object_get(t->analysis, "reason")));
	}
	return 0;
}

/* open_trigger_json: t with "open", as GET answers it. */
static json_t *open_trigger_json(const struct job *j,
				 const struct hang_trigger *t, uint64_t now_ms)
{
	json_t *o = trigger_json(t);
	if (o && json_object_set_new(o, "open",
				     json_boolean(is_open(j, t, now_ms)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *rdzv_hang_json(struct rdzv_state *st, const char *job, const char *id,
		       uint64_t now_ms, uint64_t wall_ms)
{
	struct job *j = state_find_job(st, job);
	struct hang_trigger *t;
	json_t *out, *reports;

	if (!j)
		return NULL;
	t = id ? find_trigger(j, id) : latest(j);
	if (id && !t)
		return NULL;
	if (!t)
		return json_pack("{s:n, s:b, s:i, s:i, s:[], s:n, s:s}",
				 "trigger", "complete", 0, "reported", 0,
				 "asked", 0, "reports", "analysis", "text", "");
	refresh(st, t, wall_ms);
	reports = json_array();
	for (size_t i = 0; reports && i < t->nnodes; i++)
		if (t->nodes[i].report &&
		    json_array_append(reports, t->nodes[i].report)) {
			json_decref(reports);
			return NULL;
		}
	out = json_pack("{s:o, s:b, s:I, s:I, s:o, s:O?, s:s}", "trigger",
			open_trigger_json(j, t, now_ms), "complete",
			t->nreported == t->nnodes, "reported",
			(json_int_t)t->nreported, "asked",
			(json_int_t)t->nnodes, "reports", reports, "analysis",
			t->nreported ? t->analysis : NULL, "text",
			t->nreported && t->text ? t->text : "");
	return out;
}

json_t *rdzv_hang_summary_json(struct rdzv_state *st, const char *job,
			       uint64_t now_ms, uint64_t wall_ms)
{
	struct job *j = state_find_job(st, job);
	struct hang_trigger *t = j ? latest(j) : NULL;

	if (!t)
		return NULL;
	refresh(st, t, wall_ms);
	return json_pack("{s:o, s:b, s:I, s:I, s:O?}", "trigger",
			 open_trigger_json(j, t, now_ms), "complete",
			 t->nreported == t->nnodes, "reported",
			 (json_int_t)t->nreported, "asked",
			 (json_int_t)t->nnodes, "analysis",
			 t->nreported ? t->analysis : NULL);
}

json_t *rdzv_hang_open_json(const struct rdzv_state *st, const char *job,
			    uint64_t now_ms)
{
	const struct job *j = state_find_job(st, job);
	const struct hang_trigger *t = j ? latest(j) : NULL;

	if (!t || !is_open(j, t, now_ms))
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:I}", "id", t->id, "kind",
			 rdzv_hang_kind_name(t->kind), "by", t->by, "time_ms",
			 (json_int_t)t->time_ms);
}

uint64_t rdzv_hang_seq(const struct rdzv_state *st, const char *job)
{
	const struct job *j = state_find_job(st, job);
	return j && j->hangs ? j->hangs->seq : 0;
}
