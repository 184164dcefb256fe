/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_leader_nodes.c - the nodes an etcd leader knows (a hash table by
 * node id) and what a node key says applied to the rendezvous rules: a
 * join, the report of a round, a recovery, a preemption, a leave; a key
 * that disappears is an eviction. See etcd_leader.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_leader.h"
#include "etcd_leader_int.h"
#include "etcd_preempt.h"
#include "etcd_recovery.h"

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

struct lnode *etcd_leader_find(struct etcd_leader *l, const char *id)
{
	struct lnode *n;
	if (!l->tab_size)
		return NULL;
	for (n = l->tab[hash(id) & (l->tab_size - 1)]; n; n = n->next)
		if (strcmp(n->id, id) == 0)
			return n;
	return NULL;
}

static struct lnode *get(struct etcd_leader *l, const char *id)
{
	struct lnode *n = etcd_leader_find(l, id);
	size_t b;
	if (n)
		return n;
	if (l->n + 1 > l->tab_size / 2) {
		size_t size = l->tab_size ? l->tab_size * 2 : 64;
		struct lnode **tab = calloc(size, sizeof(*tab));
		if (!tab)
			return NULL;
		for (size_t i = 0; i < l->tab_size; i++)
			while (l->tab[i]) {
				struct lnode *m = l->tab[i];
				l->tab[i] = m->next;
				m->next = tab[hash(m->id) & (size - 1)];
				tab[hash(m->id) & (size - 1)] = m;
			}
		free(l->tab);
		l->tab = tab;
		l->tab_size = size;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	snprintf(n->id, sizeof(n->id), "%s", id);
	b = hash(id) & (l->tab_size - 1);
	n->next = l->tab[b];
	l->tab[b] = n;
	l->n++;
	return n;
}

void etcd_leader_enqueue(struct etcd_leader *l, struct lnode *n)
{
	if (n->queued)
		return;
	if (l->nqueue == l->queue_cap) {
		size_t cap = l->queue_cap ? l->queue_cap * 2 : 64;
		struct lnode **q = realloc(l->queue, cap * sizeof(*q));
		if (!q)
			return; /* written with the next change of round */
		l->queue = q;
		l->queue_cap = cap;
	}
	l->queue[l->nqueue++] = n;
	n->queued = 1;
}

static void set_text(char **at, const char *msg)
{
	free(*at);
	*at = msg ? strdup(msg) : NULL;
}

static void set_error(struct lnode *n, const char *msg)
{
	set_text(&n->error, msg);
}

/* the state machine forgets the node's held join (it was answered) */
void etcd_leader_unhold(struct etcd_leader *l, struct lnode *n)
{
	if (!n->held)
		return;
	rdzv_join_poll_end(l->st, l->job, n->id, n->inc, clock_now_ms());
	n->held = 0;
}

/* ---------------------------------------------------- applying a node */

/* join: node n joins the next round (join number join_no) as n->info
 * and n->cfg say */
static void join(struct etcd_leader *l, struct lnode *n, uint64_t join_no,
		 uint64_t now)
{
	struct rdzv_reply reply;
	char err[512];
	int rc;

	n->join = join_no;
	rc = rdzv_join(l->st, l->job, &n->info, &n->cfg, !n->held, now, &reply,
		       err, sizeof(err));
	set_error(n, NULL);
	/* the job ended: late for its run, or a node of that run; the
	 * node hears why, as dlaunch-rdzv's 410 says it */
	set_text(&n->gone, rc == DL_EGONE ? err : NULL);
	if (rc == RDZV_WAIT) {
		n->held = 1;
	} else if (rc < 0 && rc != DL_EGONE) {
		log_warn("etcd leader: join of node %s refused: %s", n->id,
			 err);
		set_error(n, err);
	}
}

/* take_info: what a join of node n says (v, its key): 0, or -1 when it is
 * malformed (err says why) */
static int take_info(struct lnode *n, json_t *v, char *err, size_t size)
{
	const char *addr = "";
	uint64_t nproc = 0, port = 0, run = 0;

	n->have_info = 0;
	rdzv_job_config_init(&n->cfg);
	if (jsonh_get_str(v, "addr", 0, RDZV_ADDR_MAX, &addr, err, size) ||
	    jsonh_get_u64(v, "nproc", 1, 1, RDZV_MAX_NPROC, &nproc, err,
			  size) ||
	    jsonh_get_u64(v, "master_port", 0, 0, 65535, &port, err, size) ||
	    jsonh_get_u64(v, "run", 0, 0, UINT32_MAX, &run, err, size) ||
	    rdzv_job_config_from_json(json_object_get(v, "config"), &n->cfg,
				      err, size))
		return -1;
	memset(&n->info, 0, sizeof(n->info));
	snprintf(n->info.node_id, sizeof(n->info.node_id), "%s", n->id);
	snprintf(n->info.incarnation, sizeof(n->info.incarnation), "%s",
		 n->inc);
	snprintf(n->info.addr, sizeof(n->info.addr), "%s", addr ? addr : "");
	n->info.nproc = (uint32_t)nproc;
	n->info.master_port = (uint16_t)port;
	n->info.run = (uint32_t)run;
	n->have_info = 1;
	return 0;
}

static void apply_join(struct etcd_leader *l, struct lnode *n, json_t *v,
		       uint64_t join_no, uint64_t now)
{
	char err[512];

	n->prejoined = 0;
	if (take_info(n, v, err, sizeof(err))) {
		log_warn("etcd leader: bad join of node %s: %s", n->id, err);
		n->join = join_no;
		set_error(n, err);
		return;
	}
	join(l, n, join_no, now);
}

/* etcd_leader_prejoin: a round ends as one of its nodes fails, leaves or
 * dies, and every other node must come back for the next one. Each
 * coming back is a write of its key, one raft proposal: 4095 of them at
 * 4096 nodes took etcd seconds before the next round could form
 * (docs/benchmarks.md). The leader joins them itself instead, as their
 * keys say (the same address, workers and port as their last join), with
 * the next join number; the node adopts it from its inbox and writes
 * nothing (rdzv_etcd.c).
 *
 * What the write of a rejoin also said is that the node's workers of the
 * round that ended are gone. One node's old workers matter to the next
 * round: those of the master of the round that ended, whose rank 0 holds
 * that round's store at the master port the next round's master (the
 * same node, ranks being stable) gives again; a worker of the next
 * round that reached it would join the old round's store. So that node,
 * while it lives, rejoins by itself, after stopping its workers (a real
 * agent, not a simulated one, takes seconds to), and the next round
 * closes only then. Any other node's workers stop before its own new ones
 * start, and hold no store: a master of a later round rejoined by
 * itself, by induction, before the round after it formed. */
void etcd_leader_prejoin(struct etcd_leader *l, uint64_t now)
{
	json_t *saved = rdzv_job_save(l->st, l->job), *arr, *o;
	int master_alive = 0;
	size_t i, joined = 0;
	if (!saved)
		return;
	arr = json_object_get(saved, "survivors");
	json_array_foreach(arr, i, o)
	{
		const char *id = json_string_value(o);
		if (id && strcmp(id, l->master) == 0)
			master_alive = 1;
	}
	json_array_foreach(arr, i, o)
	{
		const char *id = json_string_value(o);
		struct lnode *n = id ? etcd_leader_find(l, id) : NULL;
		if (!n || !n->live || n->left || n->held || !n->have_info ||
		    n->error || (master_alive && strcmp(id, l->master) == 0))
			continue;
		join(l, n, n->join + 1, now);
		if (n->held)
			n->prejoined = 1;
		etcd_leader_enqueue(l, n);
		joined++;
	}
	/* the master hears first: the next round waits for it alone, and
	 * closes while the others hear that their round is over, whose
	 * inboxes not written by then say the assignment at once */
	if (master_alive)
		l->first = etcd_leader_find(l, l->master);
	log_info("etcd leader: round %" PRIu64 " over: %zu of its %zu "
		 "survivors joined to the next one from their keys%s%s%s",
		 l->master_round, joined, json_array_size(arr),
		 master_alive ? "; its master " : "",
		 master_alive ? l->master : "",
		 master_alive ? " rejoins by itself" : "");
	json_decref(saved);
}

static void apply_report(struct etcd_leader *l, struct lnode *n, json_t *r,
			 uint64_t now)
{
	uint64_t round;
	const char *status = NULL;
	struct rdzv_reply reply;
	char err[512];
	json_t *failures;
	if (jsonh_get_u64(r, "round", 1, 1, UINT64_MAX / 2, &round, err,
			  sizeof(err)) ||
	    jsonh_get_str(r, "status", 1, 16, &status, err, sizeof(err)))
		return;
	if (n->report == round + 1)
		return;
	n->report = round + 1;
	failures = json_object_get(r, "failures");
	if (rdzv_report(l->st, l->job, n->id, n->inc, round,
			strcmp(status, "succeeded") == 0,
			json_is_array(failures) ? failures : NULL, now, &reply,
			err, sizeof(err)) < 0)
		log_info("etcd leader: report of node %s not applied: %s",
			 n->id, err);
}

/* apply_recovery: the node says how its workers entered a round
 * (etcd_recovery.h); the state machine keeps it on the member, fenced as
 * a heartbeat is, and the record goes out with it. Once per round and
 * how: the node key is written again for other reasons. */
static void apply_recovery(struct etcd_leader *l, struct lnode *n, json_t *v)
{
	uint64_t round;
	enum rdzv_recovery how;
	const char *why;
	char err[512];
	if (etcd_recovery_parse(v, &round, &how, &why, err, sizeof(err))) {
		log_warn("etcd leader: ignoring the recovery of node %s: %s",
			 n->id, err);
		return;
	}
	if (how == RDZV_RECOVERY_NONE ||
	    (round == n->rec_round && how == n->rec_how))
		return;
	n->rec_round = round;
	n->rec_how = how;
	if (rdzv_member_recovery(l->st, l->job, n->id, n->inc, round, how, why,
				 err, sizeof(err)) == 0)
		l->need_record = 1;
	else
		log_info("etcd leader: recovery of node %s not applied: %s",
			 n->id, err);
}

/* apply_put: node id's key now holds value (a JSON object). */
void etcd_leader_apply_put(struct etcd_leader *l, const char *id,
			   const char *value, size_t len, uint64_t now)
{
	json_t *v = NULL, *r;
	const char *inc = NULL;
	uint64_t join = 0;
	int leaving = 0;
	char err[1024];
	struct lnode *n;

	if (!parse_name_valid(id, RDZV_NAME_MAX) ||
	    jsonh_parse(value, len, 8, &v, err, sizeof(err)) != 0 ||
	    jsonh_get_str(v, "incarnation", 1, RDZV_INCARNATION_MAX, &inc, err,
			  sizeof(err)) ||
	    !parse_name_valid(inc, RDZV_INCARNATION_MAX) ||
	    jsonh_get_u64(v, "join", 0, 0, UINT64_MAX / 2, &join, err,
			  sizeof(err))) {
		log_warn(
		    "etcd leader: ignoring the malformed key of node %.64s",
		    id);
		json_decref(v);
		return;
	}
	n = get(l, id);
	if (!n) {
		json_decref(v);
		return;
	}
	if (strcmp(n->inc, inc) != 0) {
		/* another agent process on that node: start afresh */
		etcd_leader_unhold(l, n);
		snprintf(n->inc, sizeof(n->inc), "%s", inc);
		n->join = 0;
		n->report = 0;
		n->rec_round = 0;
		n->rec_how = RDZV_RECOVERY_NONE;
		n->left = 0;
		n->have_info = 0;
		n->prejoined = 0;
		set_error(n, NULL);
	}
	n->live = 1;
	r = json_object_get(v, "report");
	if (json_is_object(r))
		apply_report(l, n, r, now);
	apply_recovery(l, n, v);
	etcd_preempt_apply(l->st, l->job, n->id, n->inc,
			   json_object_get(v, "preempt"), now);
	if (join > n->join)
		apply_join(l, n, v, join, now);
	else if (!n->have_info && join)
		/* a join its inbox answered already (read at the start):
		 * what it said, for a pre-join */
		take_info(n, v, err, sizeof(err));
	leaving = json_is_true(json_object_get(v, "leaving"));
	if (leaving && !n->left) {
		struct rdzv_reply reply;
		n->left = 1;
		etcd_leader_unhold(l, n);
		rdzv_leave(l->st, l->job, n->id, n->inc, now, &reply, err,
			   sizeof(err));
	}
	etcd_leader_enqueue(l, n);
	json_decref(v);
}

void etcd_leader_take_inbox(struct etcd_leader *l, const char *id,
			    const char *value, size_t len)
{
	json_t *v = NULL;
	const char *inc = NULL;
	uint64_t join = 0;
	struct lnode *n;
	if (!parse_name_valid(id, RDZV_NAME_MAX) ||
	    jsonh_parse(value, len, 16, &v, NULL, 0) != 0 ||
	    jsonh_get_str(v, "incarnation", 1, RDZV_INCARNATION_MAX, &inc, NULL,
			  0) ||
	    jsonh_get_u64(v, "join", 1, 0, UINT64_MAX / 2, &join, NULL, 0) ||
	    !(n = get(l, id)) || n->writing) {
		json_decref(v);
		return;
	}
	/* what it says now: an inbox written already is not written again */
	free(n->inbox);
	n->inbox = strndup(value, len);
	/* the last join a leader answered: the node key's join, read again,
	 * is not a new one (a survivor of a round that ended would count as
	 * back), and one an earlier leader made for it (a pre-join, ahead
	 * of its key) counts */
	if (json_object_get(v, "error") || json_object_get(v, "ended_why")) {
		/* a refused join, or one too late for the run, is applied
		 * again: refused again, it says why again */
		json_decref(v);
		return;
	}
	if (!n->inc[0])
		snprintf(n->inc, sizeof(n->inc), "%s", inc);
	if (strcmp(n->inc, inc) == 0 && join > n->join)
		n->join = join;
	json_decref(v);
}

void etcd_leader_apply_delete(struct etcd_leader *l, const char *id,
			      uint64_t now)
{
	struct lnode *n = etcd_leader_find(l, id);
	char err[1024];
	if (!n || !n->live)
		return;
	n->live = 0;
	etcd_leader_unhold(l, n);
	if (!n->left)
		rdzv_evict(l->st, l->job, n->id, n->inc, "lease_expired", now,
			   err, sizeof(err));
}

/* node_of: the node id of a key under prefix/nodes/, or NULL */
const char *etcd_leader_node_of(struct etcd_leader *l, const struct etcd_kv *kv,
				char *out, size_t size)
{
	return etcd_key_id(kv->key, kv->key_len, l->prefix, ETCD_KEY_NODES, out,
			   size);
}
