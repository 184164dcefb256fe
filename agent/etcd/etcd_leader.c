/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_leader.c - the agent that leads a job over etcd: the rendezvous
 * rules applied to what the nodes write, the outcome written back.
 *
 * The leader reads the job record (a previous leader's, if any) and every
 * node key, then watches the node keys from the revision it read. Each
 * node's key says what the node wants now: which join it is at, the
 * report of the round it ended, that it is leaving; the leader feeds what
 * is new to the state machine (join, report, leave), and a node key that
 * disappears (its lease expired) as an eviction. Everything it applies is
 * idempotent or fenced by round and incarnation, so a new leader may
 * apply every key again.
 *
 * After each batch of events it writes, in transactions that compare its
 * leader key's create revision: the job record when the state machine
 * marked it changed, and the inbox of each node whose answer changed (its
 * assignment when it is a member of a closed round, the end of the job,
 * a refusal, or the news that the round it ran is over). Liveness is
 * etcd's: a node with a key is alive, so the leader refreshes every live
 * node in the state machine before each of its timer ticks.
 *
 * Its phases (etcd_leader_int.h): reading the record, reading the nodes,
 * live, and deposed; the phase decides what an answer, a watch event, a
 * tick or a flush does, never whether a handle happens to be set.
 */
#include "etcd_leader.h"
#include "etcd_leader_int.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_client.h"
#include "etcd_record.h"

/* etcd's default limit of operations in a transaction is 128 */
#define TXN_OPS 120
/* A change of the record that no inbox carries waits this long for
 * others to go with it (see flush) */
#define RECORD_WAIT_MS 1000
/* the record's {round, node}: the master of the last round that ran */
#define MASTER_KEY "master_of_round"

static void after_batch(struct etcd_leader *l);
static void flush(struct etcd_leader *l);
static int read_nodes(struct etcd_leader *l);

static const char *const phase_names[] = {
    [LEADER_READING_RECORD] = "reading the record",
    [LEADER_READING_NODES] = "reading the nodes",
    [LEADER_LIVE] = "live",
    [LEADER_DEPOSED] = "deposed",
};

static void enter(struct etcd_leader *l, enum etcd_leader_phase p)
{
	log_debug("etcd leader: job %s: %s -> %s", l->job,
		  phase_names[l->phase], phase_names[p]);
	l->phase = p;
}

/* depose: this agent leads no more; its owner hears it once (and may
 * free l inside deposed(): nothing touches l after this) */
static void depose(struct etcd_leader *l)
{
	if (l->phase == LEADER_DEPOSED)
		return;
	enter(l, LEADER_DEPOSED);
	l->deposed(l->arg);
}

/* ------------------------------------------------------------- writing */

/* content: what node n's inbox should say now, or NULL when nothing
 * need be said (a node waiting for the open round) */
static char *content(struct etcd_leader *l, struct lnode *n)
{
	json_t *o, *a = NULL;
	char *s;
	int ended = l->last.state == RDZV_JOB_SUCCEEDED ||
		    l->last.state == RDZV_JOB_FAILED ||
		    l->last.state == RDZV_JOB_PREEMPTED;
	if (l->have_last && (l->last.state == RDZV_JOB_RUNNING || ended))
		a = rdzv_assignment_json(l->st, l->job, n->id);
	/* a node waiting for the open round has nothing to hear until it
	 * closes; any other (a member of a round now over, a survivor
	 * expected back, one the leader joined to the open round) must hear
	 * that its round is over */
	if (!a && !ended && !n->error && n->held && !n->prejoined)
		return NULL;
	o = json_pack("{s:s, s:I, s:I, s:s, s:I}", "incarnation", n->inc,
		      "join", (json_int_t)n->join, "round",
		      (json_int_t)l->last.round, "state",
		      rdzv_job_state_name(l->last.state), "restart_count",
		      (json_int_t)l->last.restart_count);
	if (!o) {
		json_decref(a);
		return NULL;
	}
	if (a)
		json_object_set_new(o, "assignment", a);
	if (l->last.preempt_step)
		json_object_set_new(
		    o, "preempt_step",
		    json_integer((json_int_t)l->last.preempt_step));
	if (n->error)
		json_object_set_new(o, "error", json_string(n->error));
	else if (ended && n->gone)
		json_object_set_new(o, "ended_why", json_string(n->gone));
	else if (!a && !ended && n->join && !n->held)
		/* its join was taken, but it is neither a member nor
		 * waiting any more (the round it was placed in is over): a
		 * node still waiting for that join must join again */
		json_object_set_new(o, "rejoin", json_true());
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static void key_of(struct etcd_leader *l, const char *what, const char *id,
		   char *out, size_t size)
{
	etcd_key(out, size, l->prefix, what, id);
}

static void written(void *arg, const struct etcd_answer *a);

static void drop_write(struct lwrite *w)
{
	for (size_t i = 0; i < w->n; i++) {
		w->nodes[i]->writing = 0;
		free(w->contents[i]);
	}
	free(w->nodes);
	free(w->contents);
	w->nodes = NULL;
	w->contents = NULL;
	w->n = 0;
	w->call = NULL;
	w->record = 0;
}

/* take_next: the next queued node whose inbox changes (l->first before
 * any, this agent's own node only when no other is left), with its new
 * content */
static struct lnode *take_next(struct etcd_leader *l, char **text)
{
	struct lnode *first = l->first;
	l->first = NULL;
	if (first && first->queued && !first->writing && first->live)
		for (size_t i = 0; i < l->nqueue; i++)
			if (l->queue[i] == first) {
				char *s = content(l, first);
				l->queue[i] = l->queue[--l->nqueue];
				first->queued = 0;
				if (s && !(first->inbox &&
					   strcmp(first->inbox, s) == 0)) {
					*text = s;
					return first;
				}
				free(s);
				break;
			}
	for (int own = 0; own < 2; own++)
		for (size_t i = 0; i < l->nqueue; i++) {
			struct lnode *n = l->queue[i];
			char *s;
			if ((!own && strcmp(n->id, l->self) == 0) || n->writing)
				continue; /* a node being written waits for it
					   */
			l->queue[i] = l->queue[--l->nqueue];
			n->queued = 0;
			i--;
			if (!n->live)
				continue;
			s = content(l, n);
			if (!s || (n->inbox && strcmp(n->inbox, s) == 0)) {
				free(s);
				continue;
			}
			*text = s;
			return n;
		}
	return NULL;
}

/* send_one sends one transaction in slot w: the record when it changed
 * (and is due, see flush), then up to TXN_OPS inboxes. 1 when it sent
 * one, 0 when there was nothing to send or it could not. */
static int send_one(struct etcd_leader *l, struct lwrite *w)
{
	/* ops[0] is the record's place; the inboxes follow it */
	struct etcd_op ops[TXN_OPS + 1], *first;
	char keys[TXN_OPS + 1][ETCD_JOB_KEY_MAX];
	struct etcd_compare cmp;
	char lkey[ETCD_JOB_KEY_MAX], *record = NULL, err[256];
	size_t nops = 0;
	json_t *body = NULL;

	w->nodes = calloc(TXN_OPS, sizeof(*w->nodes));
	w->contents = calloc(TXN_OPS, sizeof(*w->contents));
	if (!w->nodes || !w->contents) {
		drop_write(w);
		return 0;
	}
	memset(ops, 0, sizeof(ops));
	while (w->n < TXN_OPS) {
		char *text;
		struct lnode *n = take_next(l, &text);
		struct etcd_op *op = &ops[1 + w->n];
		if (!n)
			break;
		key_of(l, ETCD_KEY_INBOX, n->id, keys[1 + w->n],
		       sizeof(keys[0]));
		op->kind = ETCD_OP_PUT;
		op->key.data = keys[1 + w->n];
		op->key.len = strlen(op->key.data);
		op->value.data = text;
		op->value.len = strlen(text);
		n->writing = 1;
		w->nodes[w->n] = n;
		w->contents[w->n++] = text;
	}
	if (l->need_record && !l->record_urgent && !l->record_due) {
		struct timeval tv = {RECORD_WAIT_MS / 1000,
				     (RECORD_WAIT_MS % 1000) * 1000};
		if (!evtimer_pending(l->record_wait, NULL))
			evtimer_add(l->record_wait, &tv);
	} else if (l->need_record) {
		json_t *saved = rdzv_job_save(l->st, l->job);
		if (saved)
			etcd_record_stamp(saved, &l->ended_wall_ms);
		if (saved && l->master_round)
			/* for a leader that takes over while the next round
			 * forms: which node must rejoin by itself */
			json_object_set_new(
			    saved, MASTER_KEY,
			    json_pack("{s:I, s:s}", "round",
				      (json_int_t)l->master_round, "node",
				      l->master));
		record = saved ? json_dumps(saved, JSON_COMPACT) : NULL;
		json_decref(saved);
		if (record) {
			key_of(l, ETCD_KEY_STATE, NULL, keys[0],
			       sizeof(keys[0]));
			ops[0].kind = ETCD_OP_PUT;
			ops[0].key.data = keys[0];
			ops[0].key.len = strlen(keys[0]);
			ops[0].value.data = record;
			ops[0].value.len = strlen(record);
		}
	}
	w->record = record != NULL;
	first = record ? &ops[0] : &ops[1];
	nops = w->n + (record != NULL);
	if (nops == 0) {
		drop_write(w);
		return 0;
	}
	if (record) {
		l->record_due = 0;
		l->record_urgent = 0;
		evtimer_del(l->record_wait);
	}
	key_of(l, ETCD_KEY_LEADER, NULL, lkey, sizeof(lkey));
	memset(&cmp, 0, sizeof(cmp));
	cmp.key.data = lkey;
	cmp.key.len = strlen(lkey);
	cmp.target = ETCD_CMP_CREATE;
	cmp.result = ETCD_CMP_EQUAL;
	cmp.number = l->leader_rev;
	if (etcd_build_txn(&cmp, 1, first, nops, NULL, 0, &body, err,
			   sizeof(err)) != 0) {
		log_error("etcd leader: cannot build a write: %s", err);
		free(record);
		drop_write(w);
		return 0;
	}
	free(record);
	w->l = l;
	w->call =
	    etcd_call(l->c, "leader write", "/v3/kv/txn", body, 0, written, w);
	json_decref(body);
	if (!w->call) {
		for (size_t i = 0; i < w->n; i++)
			etcd_leader_enqueue(l, w->nodes[i]);
		drop_write(w);
		return 0;
	}
	if (w->record) {
		l->need_record = 0;
		l->record_flight = 1;
	}
	l->nflight++;
	return 1;
}

/* flush sends what is to be written, in up to WRITES_MAX transactions at
 * once, each of the record when it changed and up to TXN_OPS inboxes;
 * written() sends more as they are answered.
 *
 * No inbox is written before the record it reflects: an inbox computed
 * while the record has changed goes in the record's transaction, and no
 * other transaction is sent while a record is in flight (nor a second
 * record: records commit in order). Inboxes computed from a record that
 * is written already go out in parallel, a node in one write at a time
 * (the next waits for it, so its inbox changes in order).
 *
 * A change of the record that no inbox reflects (nodes joining a round
 * that is still open, a success report while others run, how a node's
 * workers entered their round) waits up to RECORD_WAIT_MS for more
 * changes, and inboxes go out meanwhile without it: a round of N nodes
 * forming is then a few writes of the record instead of one per batch
 * of joins, each of them the whole membership (O(N^2) bytes through
 * raft), and the N nodes of a new round saying how they entered it do
 * not hold the other inboxes of that round behind a record write per
 * batch of them. A change that inboxes reflect (record_urgent: a round,
 * the job's state, its restart count or stop step) goes at once, before
 * them. A leader that dies meanwhile leaves the record a little older,
 * which a new leader mends as it mends any record: by applying every
 * node key again.
 *
 * A write that etcd answered with an error puts its record and inboxes
 * back (computed afresh when they go) and holds every write back for a
 * pause (retry_backoff): 0.1 s at first, doubling to 2 s while they keep
 * failing. */
static void flush(struct etcd_leader *l)
{
	/* nothing goes out before the node keys are read and watched, nor
	 * after a failed write before its pause is over */
	if (l->phase != LEADER_LIVE || evtimer_pending(l->retry, NULL))
		return;
	while (l->nflight < WRITES_MAX && !l->record_flight) {
		struct lwrite *w = NULL;
		for (size_t i = 0; i < WRITES_MAX && !w; i++)
			if (!l->writes[i].call)
				w = &l->writes[i];
		if (!w || !send_one(l, w))
			return;
	}
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_leader *l = arg;
	(void)fd;
	(void)what;
	flush(l);
}

static void on_record_wait(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_leader *l = arg;
	(void)fd;
	(void)what;
	l->record_due = 1;
	flush(l); /* or, with a write in flight, written() flushes */
}

static void written(void *arg, const struct etcd_answer *a)
{
	struct lwrite *w = arg;
	struct etcd_leader *l = w->l;
	struct etcd_txn_response t;
	char err[1024];
	uint64_t pause_ms;
	w->call = NULL;
	l->nflight--;
	if (w->record)
		l->record_flight = 0;
	if (l->phase == LEADER_DEPOSED) {
		drop_write(w); /* an answer that no longer matters */
		return;
	}
	if (etcd_answer_txn(a, &t, err, sizeof(err)) == 0) {
		int ok = t.succeeded;
		etcd_txn_response_release(&t);
		if (!ok) {
			log_warn("etcd leader: job %s has another leader now; "
				 "this agent stops leading",
				 l->job);
			drop_write(w);
			depose(l); /* may free l */
			return;
		}
		for (size_t i = 0; i < w->n; i++) {
			free(w->nodes[i]->inbox);
			w->nodes[i]->inbox = w->contents[i];
			w->contents[i] = NULL;
		}
		drop_write(w);
		backoff_reset(&l->retry_backoff);
		flush(l);
		return;
	}
	/* the client retries what got no answer itself; this is an answer
	 * that was an error. Its record and inboxes go out again, computed
	 * afresh, after a pause that grows while writes keep failing: the
	 * leader never gives up while it holds the key */
	pause_ms = backoff_next(&l->retry_backoff);
	log_error("etcd leader: write for job %s failed: %s; trying again "
		  "in %llu ms",
		  l->job, err, (unsigned long long)pause_ms);
	l->need_record |= w->record;
	l->record_urgent |= w->record;
	for (size_t i = 0; i < w->n; i++)
		etcd_leader_enqueue(l, w->nodes[i]);
	drop_write(w);
	if (!evtimer_pending(l->retry, NULL)) {
		struct timeval tv = {(time_t)(pause_ms / 1000),
				     (suseconds_t)(pause_ms % 1000) * 1000};
		evtimer_add(l->retry, &tv);
	}
}

/* ---------------------------------------------------------- the loop */

static void arm_timer(struct etcd_leader *l)
{
	uint64_t next = rdzv_state_next_deadline(l->st), now = clock_now_ms();
	uint64_t ms = next <= now ? 0 : next - now;
	struct timeval tv;
	if (next == UINT64_MAX) {
		evtimer_del(l->timer);
		return;
	}
	if (ms > 3600000)
		ms = 3600000;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(l->timer, &tv);
}

/* note_master: the master (node rank 0) of the running round, from saved
 * (a record just restored; NULL: the state machine's). A record restored
 * while the round after it forms says which node it was (MASTER_KEY). */
static void note_master(struct etcd_leader *l, json_t *saved)
{
	json_t *own = saved ? NULL : rdzv_job_save(l->st, l->job);
	json_t *s = saved ? saved : own, *m;
	const char *id = NULL;
	uint64_t round = 0, state = 0, ran = 0;
	l->master_round = 0;
	if (jsonh_get_u64(s, "round", 1, 1, UINT64_MAX / 2, &round, NULL, 0) ||
	    jsonh_get_u64(s, "state", 1, 0, UINT64_MAX, &state, NULL, 0)) {
		json_decref(own);
		return;
	}
	if (state == RDZV_JOB_RUNNING) {
		m = json_array_get(json_object_get(s, "members"), 0);
		id = json_string_value(json_object_get(m, "node_id"));
		ran = round;
	} else if (state == RDZV_JOB_RESTARTING) {
		m = json_object_get(s, MASTER_KEY);
		id = json_string_value(json_object_get(m, "node"));
		if (jsonh_get_u64(m, "round", 1, 1, UINT64_MAX / 2, &ran, NULL,
				  0) ||
		    ran + 1 != round)
			id = NULL;
	}
	if (id && parse_name_valid(id, RDZV_NAME_MAX)) {
		snprintf(l->master, sizeof(l->master), "%s", id);
		l->master_round = ran;
	}
	json_decref(own);
}

/* after_batch: what the events just applied changed goes out */
static void after_batch(struct etcd_leader *l)
{
	char name[RDZV_NAME_MAX + 1], err[128];
	struct rdzv_reply r;
	unsigned flags;
	uint64_t now = clock_now_ms();
	while ((flags = rdzv_state_pop_changed(l->st, name)))
		if (flags & RDZV_CHANGED_JOB)
			l->need_record = 1;
	if (rdzv_watch(l->st, l->job, NULL, NULL, 0, now, &r, err,
		       sizeof(err)) >= 0 &&
	    r.state == RDZV_JOB_RESTARTING && l->master_round &&
	    r.round == l->master_round + 1 && r.round != l->prejoin_round) {
		/* the round seen running just ended */
		l->prejoin_round = r.round;
		etcd_leader_prejoin(l, now);
		while ((flags = rdzv_state_pop_changed(l->st, name)))
			if (flags & RDZV_CHANGED_JOB)
				l->need_record = 1;
	}
	if (rdzv_watch(l->st, l->job, NULL, NULL, 0, now, &r, err,
		       sizeof(err)) >= 0 &&
	    r.state == RDZV_JOB_RUNNING && r.round != l->master_round)
		note_master(l, NULL);
	if (rdzv_watch(l->st, l->job, NULL, NULL, 0, now, &r, err,
		       sizeof(err)) >= 0 &&
	    (!l->have_last || r.round != l->last.round ||
	     r.state != l->last.state ||
	     r.restart_count != l->last.restart_count ||
	     r.preempt_step != l->last.preempt_step)) {
		l->last = r;
		l->have_last = 1;
		l->record_urgent = 1; /* what every inbox says changed */
		for (size_t i = 0; i < l->tab_size; i++)
			for (struct lnode *n = l->tab[i]; n; n = n->next) {
				if (n->held &&
				    rdzv_join_check(l->st, l->job, n->id,
						    n->inc, &r, err,
						    sizeof(err)) != RDZV_WAIT)
					etcd_leader_unhold(l, n);
				etcd_leader_enqueue(l, n);
			}
	}
	arm_timer(l);
	flush(l);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct etcd_leader *l = arg;
	uint64_t now = clock_now_ms();
	struct rdzv_reply r;
	char err[128];
	(void)fd;
	(void)what;
	if (l->phase == LEADER_DEPOSED)
		return;
	/* a node with a key is alive: that is what its lease says */
	for (size_t i = 0; i < l->tab_size; i++)
		for (struct lnode *n = l->tab[i]; n; n = n->next)
			if (n->live)
				rdzv_watch(l->st, l->job, n->id, n->inc, 0, now,
					   &r, err, sizeof(err));
	rdzv_state_tick(l->st, now);
	after_batch(l);
}

static void on_nodes(void *arg, enum etcd_watch_what what,
		     const struct etcd_watch_response *w, const char *error)
{
	struct etcd_leader *l = arg;
	uint64_t now = clock_now_ms();
	char id[RDZV_NAME_MAX + 2];
	if (l->phase != LEADER_LIVE)
		return; /* deposed: the owner frees it soon */
	if (what == ETCD_WATCH_COMPACTED) {
		/* the events since the last revision seen are gone: read
		 * every node key again (applying is idempotent) */
		log_info("etcd leader: node watch compacted; reading again");
		etcd_watch_free(l->watch);
		l->watch = NULL;
		if (read_nodes(l) != 0)
			depose(l);
		return;
	}
	if (what == ETCD_WATCH_FAILED) {
		log_error("etcd leader: node watch failed: %s; this agent "
			  "stops leading",
			  error);
		depose(l);
		return;
	}
	for (size_t i = 0; i < w->n_events; i++) {
		const struct etcd_event *e = &w->events[i];
		if (!etcd_leader_node_of(l, &e->kv, id, sizeof(id)))
			continue;
		if (e->type == ETCD_EVENT_DELETE)
			etcd_leader_apply_delete(l, id, now);
		else
			etcd_leader_apply_put(l, id, e->kv.value,
					      e->kv.value_len, now);
	}
	after_batch(l);
}

/* evict_absent: the members, waiters and survivors (expected back) of
 * the record read at the start whose keys are gone died while nobody led:
 * a survivor left in the record would hold the next round open until the
 * heartbeat timeout or the last call, though it cannot come back */
static void evict_absent(struct etcd_leader *l, json_t *saved, uint64_t now)
{
	static const char *const lists[] = {"members", "waiters"};
	char err[1024];
	json_t *arr, *o;
	size_t i;
	for (size_t k = 0; k < 2; k++) {
		arr = json_object_get(saved, lists[k]);
		json_array_foreach(arr, i, o)
		{
			const char *id =
			    json_string_value(json_object_get(o, "node_id"));
			const char *inc = json_string_value(
			    json_object_get(o, "incarnation"));
			struct lnode *n = id ? etcd_leader_find(l, id) : NULL;
			if (id && inc && (!n || !n->live))
				rdzv_evict(l->st, l->job, id, inc,
					   "lease_expired", now, err,
					   sizeof(err));
		}
	}
	/* a survivor is only a node id; one that is neither a member nor a
	 * waiter (evicted above if it was) has no incarnation to fence */
	arr = json_object_get(saved, "survivors");
	json_array_foreach(arr, i, o)
	{
		const char *id = json_string_value(o);
		struct lnode *n = id ? etcd_leader_find(l, id) : NULL;
		if (!id || (n && n->live))
			continue;
		log_info("etcd leader: node %s, expected back, has no key: "
			 "the next round does not wait for it",
			 id);
		rdzv_evict(l->st, l->job, id, "", "lease_expired", now, err,
			   sizeof(err));
	}
}

static void on_read_nodes(void *arg, const struct etcd_answer *a);

static void on_read_state(void *arg, const struct etcd_answer *a)
{
	struct etcd_leader *l = arg;
	struct etcd_range_response r;
	char err[1024];
	l->read = NULL;
	if (l->phase != LEADER_READING_RECORD)
		return; /* deposed meanwhile */
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_error("etcd leader: cannot read job %s: %s", l->job, err);
		depose(l);
		return;
	}
	if (r.n_kvs == 1) {
		json_t *saved = NULL;
		uint64_t now = clock_now_ms();
		if (jsonh_parse(r.kvs[0].value, r.kvs[0].value_len, 64, &saved,
				err, sizeof(err)) != 0 ||
		    rdzv_job_restore(l->st, saved, now, err, sizeof(err)) !=
			0) {
			log_error("etcd leader: the record of job %s is "
				  "unusable (%s); starting it afresh",
				  l->job, err);
		} else {
			etcd_record_restored(l->st, l->job, saved, now,
					     &l->ended_wall_ms);
			note_master(l, saved);
			log_info("etcd leader: took over job %s", l->job);
		}
		json_decref(saved);
	}
	etcd_range_response_release(&r);
	if (read_nodes(l) != 0)
		depose(l);
}

/* read_nodes reads every node key (READING_NODES), and every inbox with
 * them (what they say now is not written again, and the join an earlier
 * leader made for a node counts: etcd_leader_prejoin), then watches the
 * node keys from there; DL_ENOMEM when the read cannot be sent (the caller
 * deposes: a leader that cannot read cannot lead) */
static int read_nodes(struct etcd_leader *l)
{
	char err[1024], key[ETCD_JOB_KEY_MAX], end[ETCD_JOB_KEY_MAX];
	json_t *body = NULL;
	size_t end_len;
	enter(l, LEADER_READING_NODES);
	/* the inboxes too, in the same read: "inbox/" < "leader" < "nodes/" */
	key_of(l, ETCD_KEY_NODES, NULL, key, sizeof(key));
	end_len = etcd_prefix_end(key, strlen(key), (unsigned char *)end);
	key_of(l, ETCD_KEY_INBOX, NULL, key, sizeof(key));
	if (etcd_build_range(key, strlen(key), end, end_len, 0, 0, &body, err,
			     sizeof(err)) == 0)
		l->read = etcd_call(l->c, "leader read", "/v3/kv/range", body,
				    0, on_read_nodes, l);
	json_decref(body);
	return l->read ? 0 : DL_ENOMEM;
}

static void on_read_nodes(void *arg, const struct etcd_answer *a)
{
	int64_t rev;
	struct etcd_leader *l = arg;
	struct etcd_range_response r;
	char err[1024], id[RDZV_NAME_MAX + 2], key[ETCD_JOB_KEY_MAX],
	    end[ETCD_JOB_KEY_MAX];
	uint64_t now = clock_now_ms();
	size_t end_len;
	json_t *saved;
	l->read = NULL;
	if (l->phase != LEADER_READING_NODES)
		return; /* deposed meanwhile */
	if (etcd_answer_range(a, &r, err, sizeof(err)) != 0) {
		log_error("etcd leader: cannot read the nodes of job %s: %s",
			  l->job, err);
		depose(l);
		return;
	}

	for (size_t i = 0; i < l->tab_size; i++)
		for (struct lnode *n = l->tab[i]; n; n = n->next)
			n->live = 0;
	for (size_t i = 0; i < r.n_kvs; i++)
		if (etcd_key_id(r.kvs[i].key, r.kvs[i].key_len, l->prefix,
				ETCD_KEY_INBOX, id, sizeof(id)))
			etcd_leader_take_inbox(l, id, r.kvs[i].value,
					       r.kvs[i].value_len);
	for (size_t i = 0; i < r.n_kvs; i++)
		if (etcd_leader_node_of(l, &r.kvs[i], id, sizeof(id)))
			etcd_leader_apply_put(l, id, r.kvs[i].value,
					      r.kvs[i].value_len, now);
	rev = r.header.revision;
	etcd_range_response_release(&r);
	saved = rdzv_job_save(l->st, l->job);
	if (saved)
		evict_absent(l, saved, now);
	json_decref(saved);
	key_of(l, ETCD_KEY_NODES, NULL, key, sizeof(key));
	end_len = etcd_prefix_end(key, strlen(key), (unsigned char *)end);
	l->watch = etcd_watch_new(l->c, "node watch", key, strlen(key), end,
				  end_len, rev + 1, 0, on_nodes, l);
	if (!l->watch) {
		depose(l);
		return;
	}
	enter(l, LEADER_LIVE);
	l->have_last = 0; /* every inbox is looked at once */
	after_batch(l);
}

/* start reads the record (READING_RECORD), then the node keys, then
 * watches them */
static void start(struct etcd_leader *l)
{
	char key[ETCD_JOB_KEY_MAX], err[256];
	json_t *body = NULL;
	l->phase = LEADER_READING_RECORD;
	key_of(l, ETCD_KEY_STATE, NULL, key, sizeof(key));
	if (etcd_build_range(key, strlen(key), NULL, 0, 0, 0, &body, err,
			     sizeof(err)) == 0)
		l->read = etcd_call(l->c, "leader read", "/v3/kv/range", body,
				    0, on_read_state, l);
	json_decref(body);
}

struct etcd_leader *etcd_leader_new(struct event_base *base,
				    struct etcd_client *c, const char *prefix,
				    const char *job, const char *self,
				    int64_t leader_rev, uint64_t rerun_after_ms,
				    void (*deposed)(void *arg), void *arg)
{
	struct etcd_leader *l = calloc(1, sizeof(*l));
	struct rdzv_limits limits;
	if (!l)
		return NULL;
	l->base = base;
	l->c = c;
	snprintf(l->prefix, sizeof(l->prefix), "%s", prefix);
	snprintf(l->job, sizeof(l->job), "%s", job);
	snprintf(l->self, sizeof(l->self), "%s", self);
	l->leader_rev = leader_rev;
	l->deposed = deposed;
	l->arg = arg;
	backoff_init(&l->retry_backoff, 100, 2000, backoff_seed());
	rdzv_limits_init(&limits);
	limits.rerun_after_ms = rerun_after_ms;
	l->st = rdzv_state_new(&limits);
	l->timer = evtimer_new(base, on_tick, l);
	l->retry = evtimer_new(base, on_retry, l);
	l->record_wait = evtimer_new(base, on_record_wait, l);
	if (!l->st || !l->timer || !l->retry || !l->record_wait) {
		etcd_leader_free(l);
		return NULL;
	}
	log_info("leading job %s through etcd", job);
	start(l);
	if (!l->read) {
		etcd_leader_free(l);
		return NULL;
	}
	return l;
}

void etcd_leader_free(struct etcd_leader *l)
{
	if (!l)
		return;
	etcd_cancel(l->read);
	etcd_watch_free(l->watch);
	for (size_t i = 0; i < WRITES_MAX; i++) {
		etcd_cancel(l->writes[i].call);
		drop_write(&l->writes[i]);
	}
	if (l->timer)
		event_free(l->timer);
	if (l->retry)
		event_free(l->retry);
	if (l->record_wait)
		event_free(l->record_wait);
	for (size_t i = 0; i < l->tab_size; i++)
		while (l->tab[i]) {
			struct lnode *n = l->tab[i];
			l->tab[i] = n->next;
			free(n->error);
			free(n->gone);
			free(n->inbox);
			free(n);
		}
	free(l->tab);
	free(l->queue);
	rdzv_state_free(l->st);
	free(l);
}
