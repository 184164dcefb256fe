/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_hang.c - hang diagnosis through etcd (docs/hangs.md, docs/etcd.md):
 * the etcd backend's hang_open, hang_post, hang_fetch and the watch of the
 * trigger key, under the job's prefix:
 *
 *   PREFIX/JOB/hang/trigger      {id, kind, by, time_ms}: the open
 *                                trigger, bound to its opener's lease
 *   PREFIX/JOB/hang/report/NODE  NODE's report for it, bound to NODE's
 *   PREFIX/JOB/hang/last         the summary of the last diagnosis
 *                                (trigger, analysis), no lease: what
 *                                `dlaunch status` shows after the job
 *
 * Opening reads the key first: a trigger opened less than
 * ETCD_HANG_OPEN_MS ago is the one this node joins (two nodes that find
 * the same hang make one diagnosis); else a transaction puts a new one
 * only if the key has not changed since that read, and a node that loses
 * that race takes the winner's. Every agent watches the key from its
 * first round on and collects for each trigger put there. Reports are
 * read back by prefix until every node of the round has one for the
 * trigger (complete) or hang.c's deadline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "etcd_client.h"
#include "etcd_hang.h"
#include "etcd_proto.h"
#include "dlaunch/hang.h"
#include "rdzv_etcd_node.h"

#define ETCD_KEY_HANG_TRIGGER "/hang/trigger"
#define ETCD_KEY_HANG_REPORT  "/hang/report/"
#define ETCD_HANG_OPEN_MS     30000 /* a trigger this recent is joined */

struct etcd_hang {
	struct rdzv_etcd *h;
	struct etcd_watch *watch;
	struct etcd_call *open, *post, *fetch, *keep;
	char kind[32];
	int open_lost; /* the put's compare failed: take what is there */
	char fetch_id[DL_HANG_ID_MAX + 1];
	json_t *value; /* the trigger being put */
};

static struct etcd_hang *EH(struct rdzv_etcd *h)
{
	return h->hang;
}

static json_t *parse_trigger(const char *value, size_t len)
{
	json_t *t = NULL;
	if (jsonh_parse(value, len, 4, &t, NULL, 0) != 0)
		return NULL;
	if (!dl_hang_id_valid(json_string_value(json_object_get(t, "id")))) {
		json_decref(t);
		return NULL;
	}
	return t;
}

/* ------------------------------------------------------------- watch */

static void watch_trigger(struct rdzv_etcd *h, int64_t from);

static void on_trigger(void *arg, enum etcd_watch_what what,
		       const struct etcd_watch_response *w, const char *error)
{
	struct rdzv_etcd *h = arg;
	if (what == ETCD_WATCH_EVENTS) {
		for (size_t i = 0; i < w->n_events; i++) {
			json_t *t;
			if (w->events[i].type != ETCD_EVENT_PUT)
				continue;
			t = parse_trigger(w->events[i].kv.value,
					  w->events[i].kv.value_len);
			if (t && h->base.hang.heard)
				h->base.hang.heard(h->base.hang.ctx, t);
			json_decref(t);
		}
		return;
	}
	if (what == ETCD_WATCH_FAILED)
		log_warn("etcd: watching the hang trigger failed: %s; watching "
			 "again",
			 error);
	/* compacted or failed: from now on (a trigger lives for seconds) */
	watch_trigger(h, 0);
}

static void watch_trigger(struct rdzv_etcd *h, int64_t from)
{
	char k[PREFIX_MAX + 64];
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_TRIGGER, NULL);
	etcd_watch_free(EH(h)->watch);
	EH(h)->watch = etcd_watch_new(h->c, "hang trigger watch", k, strlen(k),
				      NULL, 0, from, 0, on_trigger, h);
}

void etcd_hang_round(struct rdzv_etcd *h)
{
	if (EH(h) && !EH(h)->watch)
		watch_trigger(h, 0);
}

/* -------------------------------------------------------------- open */

static void opened(struct rdzv_etcd *h, json_t *t)
{
	if (h->base.hang.opened)
		h->base.hang.opened(h->base.hang.ctx, t);
}

static void read_trigger(struct rdzv_etcd *h);

static void on_put_trigger(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_txn_response t;
	char err[512];
	EH(h)->open = NULL;
	if (etcd_answer_txn(a, &t, err, sizeof(err)) != 0) {
		log_warn("etcd: cannot open a hang trigger: %s", err);
		opened(h, NULL);
		return;
	}
	if (!t.succeeded) {
		/* another node opened one since our read: that one */
		etcd_txn_response_release(&t);
		EH(h)->open_lost = 1;
		read_trigger(h);
		return;
	}
	etcd_txn_response_release(&t);
	opened(h, EH(h)->value);
	json_decref(EH(h)->value);
	EH(h)->value = NULL;
}

/* put_trigger: a new trigger, if the key is as read (mod 0: absent) */
static void put_trigger(struct rdzv_etcd *h, int64_t mod)
{
	char k[PREFIX_MAX + 64], id[DL_HANG_ID_MAX + 1], err[256];
	struct etcd_compare cmp;
	struct etcd_op put;
	json_t *body = NULL;
	char *value;
	snprintf(id, sizeof(id), "%.40s-%llu", h->node_id,
		 (unsigned long long)clock_wall_ms());
	parse_name_sanitize(id);
	json_decref(EH(h)->value);
	EH(h)->value =
	    json_pack("{s:s,s:s,s:s,s:I}", "id", id, "kind", EH(h)->kind, "by",
		      h->node_id, "time_ms", (json_int_t)clock_wall_ms());
	value = EH(h)->value ? json_dumps(EH(h)->value, JSON_COMPACT) : NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_TRIGGER, NULL);
	memset(&cmp, 0, sizeof(cmp));
	cmp.key.data = k;
	cmp.key.len = strlen(k);
	cmp.target = mod ? ETCD_CMP_MOD : ETCD_CMP_CREATE;
	cmp.result = ETCD_CMP_EQUAL;
	cmp.number = mod;
	memset(&put, 0, sizeof(put));
	put.kind = ETCD_OP_PUT;
	put.key = cmp.key;
	put.value.data = value;
	put.value.len = value ? strlen(value) : 0;
	put.lease = h->lease_id;
	if (value && etcd_build_txn(&cmp, 1, &put, 1, NULL, 0, &body, err,
				    sizeof(err)) == 0)
		EH(h)->open = etcd_call(h->c, "hang trigger", "/v3/kv/txn",
					body, 0, on_put_trigger, h);
	json_decref(body);
	free(value);
	if (!EH(h)->open)
		opened(h, NULL);
}

static void on_read_trigger(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	char err[512];
	json_t *t = NULL;
	int64_t mod = 0;
	EH(h)->open = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_warn("etcd: cannot read the hang trigger: %s", err);
		opened(h, NULL);
		return;
	}
	if (r.n_kvs == 1) {
		mod = r.kvs[0].mod_revision;
		t = parse_trigger(r.kvs[0].value, r.kvs[0].value_len);
	}
	etcd_range_response_release(&r);
	if (t) {
		json_t *tm = json_object_get(t, "time_ms");
		uint64_t now = clock_wall_ms();
		int recent = json_is_integer(tm) &&
			     json_integer_value(tm) + ETCD_HANG_OPEN_MS >
				 (json_int_t)now;
		if (recent || EH(h)->open_lost) {
			opened(h, t);
			json_decref(t);
			return;
		}
		json_decref(t);
	} else if (EH(h)->open_lost) {
		opened(h, NULL);
		return;
	}
	put_trigger(h, mod);
}

static void read_trigger(struct rdzv_etcd *h)
{
	char k[PREFIX_MAX + 64], err[256];
	json_t *body = NULL;
	struct etcd_op op;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_TRIGGER, NULL);
	memset(&op, 0, sizeof(op));
	op.kind = ETCD_OP_RANGE;
	op.key.data = k;
	op.key.len = strlen(k);
	if (etcd_build_op(&op, &body, err, sizeof(err)) == 0)
		EH(h)->open =
		    etcd_call(h->c, "hang trigger read", "/v3/kv/range", body,
			      0, on_read_trigger, h);
	json_decref(body);
	if (!EH(h)->open)
		opened(h, NULL);
}

void etcd_hang_open(struct agent_rdzv *r, const char *kind)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	etcd_cancel(EH(h)->open);
	EH(h)->open = NULL;
	EH(h)->open_lost = 0;
	snprintf(EH(h)->kind, sizeof(EH(h)->kind), "%s", kind);
	read_trigger(h);
}

/* -------------------------------------------------------------- post */

static void on_post(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_txn_response t;
	char err[512];
	int ok;
	EH(h)->post = NULL;
	ok = etcd_answer_txn(a, &t, err, sizeof(err)) == 0;
	if (ok)
		etcd_txn_response_release(&t);
	else
		log_warn("etcd: cannot store this node's hang report: %s", err);
	if (h->base.hang.posted)
		h->base.hang.posted(h->base.hang.ctx, ok);
}

void etcd_hang_post(struct agent_rdzv *r, json_t *report)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	char k[PREFIX_MAX + 300], err[256];
	json_t *body = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_REPORT, h->node_id);
	etcd_cancel(EH(h)->post);
	EH(h)->post = NULL;
	if (etcd_build_put_json(k, report, h->lease_id, &body, err,
				sizeof(err)) == 0)
		EH(h)->post = etcd_call(h->c, "hang report", "/v3/kv/txn", body,
					0, on_post, h);
	json_decref(body);
	if (!EH(h)->post && h->base.hang.posted)
		h->base.hang.posted(h->base.hang.ctx, 0);
}

/* ------------------------------------------------------------- fetch */

void etcd_hang_reports_of(const struct etcd_range_response *r, const char *id,
			  json_t *out)
{
	for (size_t i = 0; i < r->n_kvs; i++) {
		json_t *rep = NULL;
		const char *rid;
		if (jsonh_parse(r->kvs[i].value, r->kvs[i].value_len, 32, &rep,
				NULL, 0) != 0)
			continue;
		rid = json_string_value(
		    json_object_get(json_object_get(rep, "trigger"), "id"));
		if (rid && strcmp(rid, id) == 0)
			json_array_append(out, rep);
		json_decref(rep);
	}
}

static void on_fetch(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_range_response r;
	char err[512];
	json_t *answer = NULL, *reports;
	int nnodes = h->base.loop.current->nnodes;
	EH(h)->fetch = NULL;
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_warn("etcd: cannot read the hang reports: %s", err);
		if (h->base.hang.fetched)
			h->base.hang.fetched(h->base.hang.ctx, NULL);
		return;
	}
	reports = json_array();
	etcd_hang_reports_of(&r, EH(h)->fetch_id, reports);
	etcd_range_response_release(&r);
	answer =
	    json_pack("{s:o,s:b}", "reports", reports, "complete",
		      nnodes > 0 && json_array_size(reports) >= (size_t)nnodes);
	if (h->base.hang.fetched)
		h->base.hang.fetched(h->base.hang.ctx, answer);
	json_decref(answer);
}

void etcd_hang_fetch(struct agent_rdzv *r, const char *id)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	char k[PREFIX_MAX + 64], err[256];
	unsigned char end[PREFIX_MAX + 64];
	size_t end_len;
	json_t *body = NULL;
	snprintf(EH(h)->fetch_id, sizeof(EH(h)->fetch_id), "%s", id);
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_REPORT, NULL);
	end_len = etcd_prefix_end(k, strlen(k), end);
	etcd_cancel(EH(h)->fetch);
	EH(h)->fetch = NULL;
	if (etcd_build_range(k, strlen(k), end, end_len, 0, 0, &body, err,
			     sizeof(err)) == 0)
		EH(h)->fetch = etcd_call(h->c, "hang reports", "/v3/kv/range",
					 body, 0, on_fetch, h);
	json_decref(body);
	if (!EH(h)->fetch && h->base.hang.fetched)
		h->base.hang.fetched(h->base.hang.ctx, NULL);
}

void etcd_hang_cancel(struct agent_rdzv *r)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	etcd_cancel(EH(h)->open);
	etcd_cancel(EH(h)->post);
	etcd_cancel(EH(h)->fetch);
	EH(h)->open = EH(h)->post = EH(h)->fetch = NULL;
}

/* -------------------------------------------------------------- keep */

static void on_keep(void *arg, const struct etcd_answer *a)
{
	struct rdzv_etcd *h = arg;
	struct etcd_txn_response t;
	char err[512];
	EH(h)->keep = NULL;
	if (etcd_answer_txn(a, &t, err, sizeof(err)) == 0)
		etcd_txn_response_release(&t);
	else
		log_warn("etcd: cannot keep the hang verdict for dlaunch "
			 "status: %s",
			 err);
}

/* etcd_hang_keep puts the summary at PREFIX/JOB/hang/last with no lease,
 * so it outlives the nodes; every node puts the same analysis, the last
 * one stays */
void etcd_hang_keep(struct agent_rdzv *r, json_t *summary)
{
	struct rdzv_etcd *h = (struct rdzv_etcd *)r;
	char k[PREFIX_MAX + 64], err[256];
	json_t *body = NULL;
	rdzv_etcd_key(h, k, sizeof(k), ETCD_KEY_HANG_LAST, NULL);
	etcd_cancel(EH(h)->keep);
	EH(h)->keep = NULL;
	if (etcd_build_put_json(k, summary, 0, &body, err, sizeof(err)) == 0)
		EH(h)->keep = etcd_call(h->c, "hang verdict", "/v3/kv/txn",
					body, ETCD_CALL_ONCE, on_keep, h);
	json_decref(body);
}

/* ------------------------------------------------------------ set-up */

int etcd_hang_new(struct rdzv_etcd *h)
{
	h->hang = calloc(1, sizeof(*h->hang));
	if (!h->hang)
		return -1;
	h->hang->h = h;
	return 0;
}

/* etcd_hang_free: after the client's (which ended every call and watch) */
void etcd_hang_free(struct rdzv_etcd *h)
{
	if (!h->hang)
		return;
	json_decref(h->hang->value);
	free(h->hang);
	h->hang = NULL;
}
