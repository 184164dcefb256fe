/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_leader.c - the leader of a job over etcd (agent/etcd/etcd_leader.c)
 * against the recorded fake etcd client (etcd_fake.h): it keeps every
 * call the leader makes, and the test answers them when it chooses, with
 * etcd's JSON as recorded in tests/etcd/recorded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <event2/event.h>
#include <jansson.h>

#include "../../agent/etcd/etcd_leader.h"
#include "../../agent/etcd/etcd_leader_int.h" /* WRITES_MAX */
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/rdzv_state.h"
#include "etcd_fake.h"

static int deposed_count;
static void on_deposed(void *arg)
{
	(void)arg;
	deposed_count++;
}

/* on_deposed_free: the worst owner, one that frees the leader inside
 * deposed() (the agent's frees it from the loop, a moment later) */
static struct etcd_leader *to_free;
static void on_deposed_free(void *arg)
{
	(void)arg;
	deposed_count++;
	etcd_leader_free(to_free);
	to_free = NULL;
}

#define HDR "{\"header\":{\"revision\":\"%d\"}"

/* node_range_n: the node keys of nodes N0..N(n-1) (n > 1) or of node A
 * alone (n == 1), each at its first join, in a job of exactly n nodes */
static char *node_range_n(int rev, int n);
/* range_of: a range answer at rev of the n keys and values */
static char *range_of(int rev, char *const *keys, char *const *values, int n);

/* the node write of node A: one node, a round of one closes at once */
static char *node_range(int rev)
{
	return node_range_n(rev, 1);
}

static char *node_range_n(int rev, int count)
{
	char **keys = calloc((size_t)count, sizeof(*keys));
	char **values = calloc((size_t)count, sizeof(*values));
	char *out;
	assert_non_null(keys);
	assert_non_null(values);
	for (int i = 0; i < count; i++) {
		struct rdzv_job_config cfg;
		json_t *v;
		rdzv_job_config_init(&cfg);
		cfg.min_nodes = (uint32_t)count;
		cfg.max_nodes = (uint32_t)count;
		v = json_pack("{s:s, s:s, s:i, s:i, s:i, s:o}", "incarnation",
			      "i1", "addr", "192.0.2.1", "nproc", 1,
			      "master_port", 0, "join", 1, "config",
			      rdzv_job_config_json(&cfg));
		values[i] = json_dumps(v, JSON_COMPACT);
		json_decref(v);
		assert_non_null(values[i]);
		keys[i] = malloc(64);
		assert_non_null(keys[i]);
		if (count == 1)
			snprintf(keys[i], 64, "/p/job/nodes/A");
		else
			snprintf(keys[i], 64, "/p/job/nodes/N%d", i);
	}
	out = range_of(rev, keys, values, count);
	for (int i = 0; i < count; i++) {
		free(keys[i]);
		free(values[i]);
	}
	free(keys);
	free(values);
	return out;
}

/* A node watch compacted while a write is in flight: the leader reads
 * the nodes again with the write still out; freed then, it must cancel
 * both, so that neither answer reaches freed memory (under ASan the
 * answers fired below are a use after free when one was lost). */
static void test_compacted_during_write(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char empty[256], *nodes;
	size_t write_at, read_at;
	(void)state;
	assert_non_null(base);
	fake_reset();
	deposed_count = 0;
	l = etcd_leader_new(base, (struct etcd_client *)base, "/p/job", "job",
			    "A", 5, 0, on_deposed, NULL);
	assert_non_null(l);
	/* the record: none yet */
	assert_int_equal(l->phase, LEADER_READING_RECORD);
	assert_int_equal(ncalls, 1);
	assert_string_equal(calls[0].path, "/v3/kv/range");
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	answer(0, empty);
	/* the node keys: A wants to join; the round of one closes and the
	 * record and A's inbox go out in a write */
	assert_int_equal(l->phase, LEADER_READING_NODES);
	assert_int_equal(ncalls, 2);
	nodes = node_range(11);
	answer(1, nodes);
	free(nodes);
	assert_int_equal(l->phase, LEADER_LIVE);
	assert_int_equal(nwatches, 1);
	assert_int_equal(ncalls, 3);
	assert_string_equal(calls[2].path, "/v3/kv/txn");
	write_at = 2;
	/* the watch is compacted with the write in flight: read again */
	watches[0].cb(watches[0].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(l->phase, LEADER_READING_NODES);
	assert_true(watches[0].freed);
	assert_int_equal(ncalls, 4);
	assert_string_equal(calls[3].path, "/v3/kv/range");
	read_at = 3;
	assert_int_equal(pending(), 2);
	assert_int_equal(deposed_count, 0);
	/* freed with both out: both are canceled; one that was not would
	 * be answered into freed memory */
	etcd_leader_free(l);
	assert_int_equal(answer_left(empty), 0);
	assert_true(calls[write_at].canceled);
	assert_true(calls[read_at].canceled);
	event_base_free(base);
}

/* The same, the write answered first: the read must still be the
 * leader's own, and freeing it must cancel it. */
static void test_write_answered_during_read(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char empty[256], ok[256], *nodes;
	(void)state;
	fake_reset();
	deposed_count = 0;
	l = etcd_leader_new(base, (struct etcd_client *)base, "/p/job", "job",
			    "A", 5, 0, on_deposed, NULL);
	assert_non_null(l);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	answer(0, empty);
	nodes = node_range(11);
	answer(1, nodes);
	assert_int_equal(ncalls, 3);
	watches[0].cb(watches[0].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(ncalls, 4);
	/* the write succeeds while the read is out: nothing new is sent
	 * until the read is answered */
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	answer(2, ok);
	assert_int_equal(l->phase, LEADER_READING_NODES);
	assert_int_equal(ncalls, 4);
	assert_int_equal(pending(), 1);
	/* the nodes read again: live, watched from there */
	free(nodes);
	nodes = node_range(13);
	answer(3, nodes);
	assert_int_equal(l->phase, LEADER_LIVE);
	assert_int_equal(nwatches, 2);
	assert_false(watches[1].freed);
	etcd_leader_free(l);
	assert_true(watches[1].freed);
	assert_int_equal(answer_left(empty), 0);
	assert_int_equal(deposed_count, 0);
	free(nodes);
	event_base_free(base);
}

/* A leader deposed with calls in flight: its write finds the leader key
 * changed while a read of the nodes (after a compaction) and, at 300
 * nodes, other writes are out. It says so once, writes nothing more, and
 * freed from inside deposed() it cancels every call it has out: none is
 * answered into freed memory (under ASan, a use after free otherwise). */
static void test_deposed_with_calls_in_flight(void **state)
{
	struct event_base *base = event_base_new();
	char empty[256], ok[256], lost[256], *nodes;
	size_t before;
	(void)state;
	assert_non_null(base);
	fake_reset();
	deposed_count = 0;
	to_free = etcd_leader_new(base, (struct etcd_client *)base, "/p/job",
				  "job", "N0", 5, 0, on_deposed_free, NULL);
	assert_non_null(to_free);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	snprintf(lost, sizeof(lost),
		 HDR ",\"succeeded\":false,\"responses\":[]}", 13);
	answer(0, empty);
	nodes = node_range_n(11, 300);
	answer(1, nodes);
	free(nodes);
	/* the record's write, then the other inboxes in two writes */
	assert_int_equal(ncalls, 3);
	answer(2, ok);
	assert_int_equal(ncalls, 5);
	/* the node watch compacted: a read of the nodes goes out too */
	watches[0].cb(watches[0].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(ncalls, 6);
	assert_string_equal(calls[5].path, "/v3/kv/range");
	assert_int_equal(pending(), 3);
	/* the first write finds another leader: deposed, freed at once */
	before = ncalls;
	answer(3, lost);
	assert_int_equal(deposed_count, 1);
	assert_null(to_free);
	assert_int_equal(ncalls, before); /* nothing more written */
	assert_true(calls[4].canceled);
	assert_true(calls[5].canceled);
	assert_int_equal(answer_left(empty), 0);
	event_base_free(base);
}

/* A change of round at 300 nodes: the record goes first, with the first
 * 120 inboxes, alone in flight; once it is written the other 180 inboxes
 * go out in two transactions at once (no inbox before the record it
 * reflects, and no longer one transaction at a time). */
static void test_inboxes_in_parallel_after_record(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char empty[256], ok[256], *nodes;
	(void)state;
	fake_reset();
	deposed_count = 0;
	l = etcd_leader_new(base, (struct etcd_client *)base, "/p/job", "job",
			    "N0", 5, 0, on_deposed, NULL);
	assert_non_null(l);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	answer(0, empty);
	nodes = node_range_n(11, 300);
	answer(1, nodes);
	free(nodes);
	/* the round of 300 closed: one write, the record's, in flight */
	assert_int_equal(ncalls, 3);
	assert_string_equal(calls[2].path, "/v3/kv/txn");
	assert_int_equal(pending(), 1);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	answer(2, ok);
	/* written: the rest of the inboxes, 180, in two writes at once */
	assert_int_equal(ncalls, 5);
	assert_int_equal(pending(), 2);
	answer(3, ok);
	answer(4, ok);
	assert_int_equal(ncalls, 5); /* nothing more to say */
	assert_int_equal(deposed_count, 0);
	etcd_leader_free(l);
	event_base_free(base);
}

/* start_round_of: a new leader (node N0) of a job of n nodes, the record
 * read (none) and the node keys read: the round of n closes at once */
static struct etcd_leader *start_round_of(struct event_base *base, int n,
					  void (*deposed)(void *))
{
	struct etcd_leader *l;
	char empty[256], *nodes;
	fake_reset();
	deposed_count = 0;
	l = etcd_leader_new(base, (struct etcd_client *)base, "/p/job", "job",
			    "N0", 5, 0, deposed, NULL);
	assert_non_null(l);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	answer(0, empty);
	nodes = node_range_n(11, n);
	answer(1, nodes);
	free(nodes);
	return l;
}

/* A change of round at 4096 nodes, as a takeover makes it: the record
 * goes first, alone in flight, with the first 120 inboxes (121 of etcd's
 * 128 operations); once it is written the other 3976 inboxes go out, at
 * most WRITES_MAX transactions at once and never more, each within
 * etcd's limit, this agent's own inbox (N0's) last; every inbox exactly
 * once, and the record once. */
static void test_window_bound_and_record_first(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char ok[256];
	size_t inboxes = 0, records = 0, most = 0, i, last = 0;
	(void)state;
	assert_non_null(base);
	l = start_round_of(base, 4096, on_deposed);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	/* the round closed: one write in flight, the record's */
	assert_int_equal(txns_pending(), 1);
	i = oldest_txn();
	assert_true(is_key(calls[i].first_key, "/p/job/state"));
	assert_int_equal(calls[i].ops, 121);
	records++;
	inboxes += calls[i].ops - 1;
	answer(i, ok);
	/* written: the window fills at once */
	assert_int_equal(txns_pending(), WRITES_MAX);
	while ((i = oldest_txn()) < ncalls) {
		size_t now = txns_pending();
		most = now > most ? now : most;
		assert_true(now <= WRITES_MAX);
		assert_false(is_key(calls[i].first_key, "/p/job/state"));
		assert_true(calls[i].ops >= 1 && calls[i].ops <= 120);
		inboxes += calls[i].ops;
		last = i;
		answer(i, ok);
	}
	assert_int_equal(most, WRITES_MAX);
	assert_int_equal(records, 1);
	assert_int_equal(inboxes, 4096);
	assert_true(is_key(calls[last].last_key, "/p/job/inbox/N0"));
	assert_int_equal(deposed_count, 0);
	etcd_leader_free(l);
	event_base_free(base);
}

/* An inbox write that etcd answers with an error: its inboxes go out
 * again, after a pause (nothing is sent meanwhile, even when another
 * write succeeds), in a write of their own; none is lost and the leader
 * is not deposed. */
static void test_failed_inbox_write_retried(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char ok[256];
	size_t first, second, before, again;
	uint64_t deadline;
	(void)state;
	assert_non_null(base);
	l = start_round_of(base, 300, on_deposed);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	answer(oldest_txn(), ok); /* the record and 120 inboxes */
	assert_int_equal(txns_pending(), 2);
	first = oldest_txn();
	assert_int_equal(calls[first].ops, 120);
	answer_error(first, DL_EPROTO, "etcd: too many requests (code 2)");
	second = oldest_txn();
	assert_int_equal(calls[second].ops, 60);
	before = ncalls;
	answer(second, ok);
	assert_int_equal(ncalls, before); /* held back: the pause */
	/* the pause ends (0.1 s at first): the 120 go out again */
	deadline = clock_now_ms() + 5000;
	while (ncalls == before && clock_now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(ncalls, before + 1);
	again = oldest_txn();
	assert_int_equal(again, before);
	assert_false(is_key(calls[again].first_key, "/p/job/state"));
	assert_int_equal(calls[again].ops, 120);
	answer(again, ok);
	assert_int_equal(txns_pending(), 0);
	assert_int_equal(deposed_count, 0);
	etcd_leader_free(l);
	event_base_free(base);
}

/* Freed with a full window of writes and a read of the nodes (the watch
 * compacted) in flight, and again from inside deposed() when one of them
 * finds another leader: every call is canceled, none is answered into
 * freed memory (under ASan a use after free otherwise). */
static void test_freed_with_window_in_flight(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char ok[256], lost[256], empty[256];
	size_t n;
	(void)state;
	assert_non_null(base);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	snprintf(lost, sizeof(lost),
		 HDR ",\"succeeded\":false,\"responses\":[]}", 13);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 14);
	/* freed by its owner */
	l = start_round_of(base, 2000, on_deposed);
	answer(oldest_txn(), ok);
	assert_int_equal(txns_pending(), WRITES_MAX);
	watches[0].cb(watches[0].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(pending(), WRITES_MAX + 1);
	n = ncalls;
	etcd_leader_free(l);
	assert_int_equal(answer_left(empty), 0);
	for (size_t i = 2; i < n; i++)
		assert_true(calls[i].answered || calls[i].canceled);
	/* freed inside deposed(), with seven other writes out */
	to_free = start_round_of(base, 2000, on_deposed_free);
	answer(oldest_txn(), ok);
	assert_int_equal(txns_pending(), WRITES_MAX);
	n = ncalls;
	answer(oldest_txn(), lost);
	assert_int_equal(deposed_count, 1);
	assert_null(to_free);
	assert_int_equal(ncalls, n); /* nothing more written */
	assert_int_equal(answer_left(ok), 0);
	event_base_free(base);
}

/* recovered: node id's key, now also saying its workers entered round
 * 1 restarted (as a node writes it after a restart), as an event of the
 * node watch at revision rev */
static void recovered(const char *id, int count, int rev)
{
	struct rdzv_job_config cfg;
	struct etcd_watch_response w;
	struct etcd_event e;
	char key[64], *value;
	json_t *v;
	rdzv_job_config_init(&cfg);
	cfg.min_nodes = (uint32_t)count;
	cfg.max_nodes = (uint32_t)count;
	v = json_pack("{s:s, s:s, s:i, s:i, s:i, s:o, s:{s:i, s:s, s:s}}",
		      "incarnation", "i1", "addr", "192.0.2.1", "nproc", 1,
		      "master_port", 0, "join", 1, "config",
		      rdzv_job_config_json(&cfg), "recovery", "round", 1, "how",
		      "restarted", "why", "test");
	value = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	assert_non_null(value);
	snprintf(key, sizeof(key), "/p/job/nodes/%s", id);
	memset(&w, 0, sizeof(w));
	memset(&e, 0, sizeof(e));
	e.type = ETCD_EVENT_PUT;
	e.kv.key = key;
	e.kv.key_len = strlen(key);
	e.kv.value = value;
	e.kv.value_len = strlen(value);
	e.kv.mod_revision = rev;
	w.header.revision = rev;
	w.events = &e;
	w.n_events = 1;
	watches[0].cb(watches[0].arg, ETCD_WATCH_EVENTS, &w, NULL);
	free(value);
}

/* While the inboxes of a new round go out, nodes of it say how they
 * entered it: a change of the record that no inbox reflects. The
 * inboxes go on, the window full, without waiting for a record write;
 * the record follows within its wait (1 s), once. */
static void test_record_no_inbox_reflects_waits(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char ok[256];
	size_t i, records = 0, before;
	uint64_t deadline;
	(void)state;
	assert_non_null(base);
	l = start_round_of(base, 2000, on_deposed);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	answer(oldest_txn(), ok); /* the record, 120 inboxes */
	assert_int_equal(txns_pending(), WRITES_MAX);
	recovered("N5", 2000, 20);
	recovered("N6", 2000, 21);
	/* the next inbox writes carry no record, and the window stays full */
	for (int k = 0; k < 4; k++) {
		answer(oldest_txn(), ok);
		assert_int_equal(txns_pending(), WRITES_MAX);
		i = ncalls - 1;
		assert_false(is_key(calls[i].first_key, "/p/job/state"));
	}
	/* the record's wait ends: it goes, once */
	before = ncalls;
	deadline = clock_now_ms() + 5000;
	while (clock_now_ms() < deadline) {
		for (i = before; i < ncalls; i++)
			records += is_key(calls[i].first_key, "/p/job/state");
		before = ncalls;
		if (records)
			break;
		if ((i = oldest_txn()) < ncalls)
			answer(i, ok);
		else
			event_base_loop(base, EVLOOP_ONCE);
	}
	assert_int_equal(records, 1);
	while ((i = oldest_txn()) < ncalls) {
		answer(i, ok);
		for (size_t k = before; k < ncalls; k++)
			records += is_key(calls[k].first_key, "/p/job/state");
		before = ncalls;
	}
	assert_int_equal(records, 1);
	assert_int_equal(deposed_count, 0);
	etcd_leader_free(l);
	event_base_free(base);
}

/* leader_of: a leader of job "job" (node self, its leader key created at
 * revision rev), nothing answered yet */
static struct etcd_leader *leader_of(struct event_base *base, const char *self,
				     int64_t rev)
{
	struct etcd_leader *l;
	fake_reset();
	deposed_count = 0;
	l = etcd_leader_new(base, (struct etcd_client *)base, "/p/job", "job",
			    self, rev, 0, on_deposed, NULL);
	assert_non_null(l);
	assert_int_equal(l->phase, LEADER_READING_RECORD);
	return l;
}

/* new_leader: a leader of job "job" (node A), nothing answered yet */
static struct etcd_leader *new_leader(struct event_base *base)
{
	return leader_of(base, "A", 5);
}

/* deposed_once: l is deposed and said so once */
static void deposed_once(const struct etcd_leader *l)
{
	assert_int_equal(l->phase, LEADER_DEPOSED);
	assert_int_equal(deposed_count, 1);
}

/* Each way into DEPOSED, with an owner that frees the leader later, as
 * the agent's campaign does: a failed read of the record, a failed read
 * of the nodes, a failed node watch, a write that finds another leader.
 * deposed() is said once; what answers after it (the other writes in
 * flight, a read) changes nothing and sends nothing. */
static void test_deposed_from_each_phase(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l;
	char empty[256], ok[256], lost[256], *nodes;
	size_t before;
	(void)state;
	assert_non_null(base);
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 12);
	snprintf(lost, sizeof(lost),
		 HDR ",\"succeeded\":false,\"responses\":[]}", 13);
	/* reading the record */
	l = new_leader(base);
	answer_error(0, DL_EIO, "etcd: no member answers");
	deposed_once(l);
	assert_int_equal(ncalls, 1);
	etcd_leader_free(l);
	/* reading the nodes */
	l = new_leader(base);
	answer(0, empty);
	assert_int_equal(l->phase, LEADER_READING_NODES);
	answer_error(1, DL_EIO, "etcd: no member answers");
	deposed_once(l);
	assert_int_equal(nwatches, 0);
	etcd_leader_free(l);
	/* live: the node watch fails */
	l = new_leader(base);
	answer(0, empty);
	nodes = node_range(11);
	answer(1, nodes);
	assert_int_equal(l->phase, LEADER_LIVE);
	watches[0].cb(watches[0].arg, ETCD_WATCH_FAILED, NULL, "gone");
	deposed_once(l);
	/* its write, answered after, sends nothing more */
	before = ncalls;
	answer(oldest_txn(), ok);
	assert_int_equal(ncalls, before);
	etcd_leader_free(l);
	assert_true(watches[0].freed);
	free(nodes);
	/* live, 300 nodes: a write finds another leader with others out
	 * and a read of the nodes (the watch compacted) in flight */
	fake_reset();
	l = start_round_of(base, 300, on_deposed);
	answer(oldest_txn(), ok);
	assert_int_equal(txns_pending(), 2);
	watches[0].cb(watches[0].arg, ETCD_WATCH_COMPACTED, NULL, NULL);
	assert_int_equal(l->phase, LEADER_READING_NODES);
	before = ncalls;
	answer(oldest_txn(), lost);
	deposed_once(l);
	/* the other write and the read come back before the owner frees
	 * it: nothing is sent, deposed() is not said again */
	nodes = node_range_n(14, 300);
	assert_int_equal(answer_left(nodes), 2);
	free(nodes);
	assert_int_equal(ncalls, before);
	assert_int_equal(deposed_count, 1);
	assert_int_equal(l->phase, LEADER_DEPOSED);
	etcd_leader_free(l);
	event_base_free(base);
}

/* ------------------------------------------------- rounds that end */

/* node_value: node key at join number join, incarnation i1, in a job of
 * 2 to 4 nodes and 3 restarts; with report (JSON) the report of a round */
static char *node_value(int join, const char *report)
{
	struct rdzv_job_config cfg;
	json_t *v;
	char *out;
	rdzv_job_config_init(&cfg);
	cfg.min_nodes = 2;
	cfg.max_nodes = 4;
	cfg.max_restarts = 3;
	v = json_pack("{s:s, s:s, s:i, s:i, s:i, s:o}", "incarnation", "i1",
		      "addr", "192.0.2.1", "nproc", 1, "master_port", 0, "join",
		      join, "config", rdzv_job_config_json(&cfg));
	if (report)
		json_object_set_new(v, "report", json_loads(report, 0, NULL));
	out = json_dumps(v, JSON_COMPACT);
	json_decref(v);
	assert_non_null(out);
	return out;
}

/* range_of: a range answer at rev of the n keys and values */
static char *range_of(int rev, char *const *keys, char *const *values, int n)
{
	size_t size = 4096, len;
	char *out;
	for (int i = 0; i < n; i++)
		size += 2 * strlen(values[i]) + 2 * strlen(keys[i]) + 256;
	out = malloc(size);
	assert_non_null(out);
	len = (size_t)snprintf(out, size, HDR ",\"kvs\":[", rev);
	for (int i = 0; i < n; i++) {
		char *k64 = malloc(strlen(keys[i]) * 2 + 8);
		char *v64 = malloc(strlen(values[i]) * 2 + 8);
		assert_non_null(k64);
		assert_non_null(v64);
		b64(keys[i], k64);
		b64(values[i], v64);
		len += (size_t)snprintf(
		    out + len, size - len,
		    "%s{\"key\":\"%s\",\"create_revision\":\"%d\","
		    "\"mod_revision\":\"%d\",\"version\":\"1\","
		    "\"value\":\"%s\",\"lease\":\"7\"}",
		    i ? "," : "", k64, rev, rev, v64);
		free(k64);
		free(v64);
	}
	snprintf(out + len, size - len, "],\"count\":\"%d\"}", n);
	return out;
}

/* node_event: the node watch says node id's key is now value (NULL: it
 * was deleted, its lease expired) */
static void node_event(const char *id, const char *value)
{
	struct etcd_event e;
	struct etcd_watch_response w;
	char key[64];
	memset(&e, 0, sizeof(e));
	memset(&w, 0, sizeof(w));
	snprintf(key, sizeof(key), "/p/job/nodes/%s", id);
	e.type = value ? ETCD_EVENT_PUT : ETCD_EVENT_DELETE;
	e.kv.key = key;
	e.kv.key_len = strlen(key);
	e.kv.value = (char *)value;
	e.kv.value_len = value ? strlen(value) : 0;
	w.events = &e;
	w.n_events = 1;
	watches[nwatches - 1].cb(watches[nwatches - 1].arg, ETCD_WATCH_EVENTS,
				 &w, NULL);
}

/* inbox_in: node id's inbox as transaction i writes it, or NULL */
static json_t *inbox_in(size_t i, const char *id)
{
	char key[64], *v;
	json_t *o;
	snprintf(key, sizeof(key), "/p/job/inbox/%s", id);
	v = txn_put(i, key);
	if (!v)
		return NULL;
	o = json_loads(v, 0, NULL);
	free(v);
	assert_non_null(o);
	return o;
}

static json_int_t int_at(json_t *o, const char *path1, const char *path2)
{
	json_t *v = json_object_get(o, path1);
	if (path2)
		v = json_object_get(v, path2);
	assert_true(json_is_integer(v));
	return json_integer_value(v);
}

/* answer_txns: every transaction out succeeds, and those it lets out */
static void answer_txns(void)
{
	char ok[256];
	snprintf(ok, sizeof(ok), HDR ",\"succeeded\":true,\"responses\":[]}",
		 20);
	while (txns_pending())
		answer(oldest_txn(), ok);
}

/* put_kv: keys[*n] and values[*n] become key (PREFIX, node N<i>) and
 * value */
static void put_kv(char **keys, char **values, int *n, const char *prefix,
		   int i, char *value)
{
	keys[*n] = malloc(64);
	assert_non_null(keys[*n]);
	snprintf(keys[*n], 64, "%sN%d", prefix, i);
	values[*n] = value;
	assert_non_null(value);
	(*n)++;
}

/* four_nodes: a leader (node N3) of nodes N0..N3, first joins, the round
 * of four formed and written */
static struct etcd_leader *four_nodes(struct event_base *base)
{
	struct etcd_leader *l = leader_of(base, "N3", 5);
	char empty[256], *keys[4], *values[4], *range;
	int n = 0;
	snprintf(empty, sizeof(empty), HDR ",\"count\":\"0\"}", 10);
	answer(0, empty);
	for (int i = 0; i < 4; i++)
		put_kv(keys, values, &n, "/p/job/nodes/", i,
		       node_value(1, NULL));
	range = range_of(11, keys, values, 4);
	answer(1, range);
	free(range);
	for (int i = 0; i < 4; i++) {
		free(keys[i]);
		free(values[i]);
	}
	assert_int_equal(l->phase, LEADER_LIVE);
	assert_int_equal(txns_pending(), 1);
	answer_txns();
	return l;
}

/* inbox_says: node id's inbox in transaction at answers join and says
 * round: running with the node at rank when rank >= 0, or restarting
 * without an assignment, the node joined to it (HELD) or told to rejoin
 * by itself (REJOIN) */
#define HELD   (-1)
#define REJOIN (-2)
static void inbox_says(size_t at, const char *id, int join, int round, int rank)
{
	json_t *in = inbox_in(at, id);
	assert_non_null(in);
	assert_int_equal(int_at(in, "join", NULL), join);
	assert_int_equal(int_at(in, "round", NULL), round);
	assert_string_equal(json_string_value(json_object_get(in, "state")),
			    rank >= 0 ? "RUNNING" : "RESTARTING");
	if (rank >= 0) {
		assert_int_equal(int_at(in, "assignment", "round"), round);
		assert_int_equal(int_at(in, "assignment", "node_rank"), rank);
	} else {
		assert_null(json_object_get(in, "assignment"));
	}
	assert_true(json_is_true(json_object_get(in, "rejoin")) ==
		    (rank == REJOIN));
	json_decref(in);
}

/* take_over: a new leader (node N3) reads record and the n keys and
 * values (node keys, inboxes), and is live */
static struct etcd_leader *take_over(struct event_base *base, char *record,
				     char *const *keys, char *const *values,
				     int n)
{
	char *skey = (char *)"/p/job/state", *range;
	struct etcd_leader *l = leader_of(base, "N3", 6);
	range = range_of(12, &skey, &record, 1);
	answer(0, range);
	free(range);
	range = range_of(13, keys, values, n);
	answer(1, range);
	free(range);
	assert_int_equal(l->phase, LEADER_LIVE);
	return l;
}

/* done: what is out is answered; the leader was never deposed */
static void done(struct etcd_leader *l, struct event_base *base, char **keys,
		 char **values, int n)
{
	answer_txns();
	assert_int_equal(deposed_count, 0);
	for (int i = 0; i < n; i++) {
		free(keys[i]);
		free(values[i]);
	}
	etcd_leader_free(l);
	event_base_free(base);
}

/* The master of a round dies (its key's lease expires): the other three
 * are joined to the next round from their keys, which closes at once,
 * every inbox its assignment in one write. No node writes its key: a
 * survivor's rejoin is a raft proposal, 4095 of them at 4096 nodes. */
static void test_prejoin_master_lost(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l = four_nodes(base);
	size_t at = ncalls;
	(void)state;
	node_event("N0", NULL);
	assert_int_equal(ncalls, at + 1);
	assert_string_equal(calls[at].path, "/v3/kv/txn");
	assert_null(inbox_in(at, "N0"));
	/* the next join, the next round, and each node's place in it */
	inbox_says(at, "N1", 2, 2, 0);
	inbox_says(at, "N2", 2, 2, 1);
	inbox_says(at, "N3", 2, 2, 2);
	done(l, base, NULL, NULL, 0);
}

/* Another node dies, the master lives: its workers hold the round's
 * store, so it alone rejoins by itself (after they are gone), and hears
 * it first; the other two hear that their round is over and that they are
 * joined to the next (the next join number, no assignment yet, no "rejoin").
 * The master's rejoin closes the round: every inbox its assignment. */
static void test_prejoin_master_rejoins(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l = four_nodes(base);
	size_t at = ncalls;
	char *v;
	(void)state;
	node_event("N2", NULL);
	assert_int_equal(ncalls, at + 1);
	/* the master's inbox first, right after the record */
	assert_true(
	    is_key(json_string_value(json_object_get(
		       json_object_get(json_array_get(calls[at].success, 1),
				       "request_put"),
		       "key")),
		   "/p/job/inbox/N0"));
	inbox_says(at, "N0", 1, 2, REJOIN);
	inbox_says(at, "N1", 2, 2, HELD);
	inbox_says(at, "N3", 2, 2, HELD);
	answer_txns();
	at = ncalls;
	/* the master, its workers stopped, rejoins */
	v = node_value(2, NULL);
	node_event("N0", v);
	free(v);
	assert_int_equal(ncalls, at + 1);
	inbox_says(at, "N0", 2, 2, 0);
	inbox_says(at, "N1", 2, 2, 1);
	assert_null(inbox_in(at, "N2"));
	inbox_says(at, "N3", 2, 2, 2);
	done(l, base, NULL, NULL, 0);
}

/* A new leader reads the inboxes with the node keys: one that says what
 * it would say is not written again, and the join an earlier leader made
 * for a node (its inbox's, ahead of its key) counts: the node's key
 * written later at that join (a report) is no new join, and the next
 * pre-join is the one after it. */
static void test_takeover_reads_inboxes(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l = four_nodes(base);
	char *record, *keys[8], *values[8], *v, key[64];
	size_t at;
	json_t *in;
	int n = 0;
	(void)state;
	/* what the first leader wrote: the record and the four inboxes */
	record = txn_put(2, "/p/job/state");
	assert_non_null(record);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "/p/job/inbox/N%d", i);
		put_kv(keys, values, &n, "/p/job/inbox/", i, txn_put(2, key));
	}
	etcd_leader_free(l);
	/* N1's inbox as a leader that joined it to a round 2 left it */
	in = json_loads(values[1], 0, NULL);
	json_object_set_new(in, "join", json_integer(2));
	free(values[1]);
	values[1] = json_dumps(in, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(in);
	for (int i = 0; i < 4; i++)
		put_kv(keys, values, &n, "/p/job/nodes/", i,
		       node_value(1, NULL));
	l = take_over(base, record, keys, values, n);
	free(record);
	/* every inbox says what this leader would say (N1's join 2 taken
	 * as N1's): none is written again */
	for (size_t i = 2; i < ncalls; i++)
		for (int k = 0; k < 4; k++) {
			snprintf(key, sizeof(key), "N%d", k);
			assert_null(inbox_in(i, key));
		}
	answer_txns();
	/* N1 reports its round failed, its key at join 2 (adopted): the
	 * round is over, N0 (the master) lives, N1 and N3 are joined to
	 * round 2 with join 3 and 2 */
	at = ncalls;
	v = node_value(2, "{\"round\":1,\"status\":\"failed\"}");
	node_event("N1", v);
	free(v);
	assert_true(ncalls > at);
	inbox_says(at, "N1", 3, 2, HELD);
	inbox_says(at, "N3", 2, 2, HELD);
	done(l, base, keys, values, n);
}

/* A leader lost while the next round forms, before the survivors' inboxes
 * went out: the record says which node was the master of the round that
 * ended, and the new leader joins the others as the first would have,
 * the master left to rejoin by itself. */
static void test_takeover_while_round_forms(void **state)
{
	struct event_base *base = event_base_new();
	struct etcd_leader *l = four_nodes(base);
	char *record, *keys[6], *values[6], key[64];
	size_t at = ncalls;
	int n = 0;
	(void)state;
	/* the inboxes of round 1, as they were written */
	for (int i = 0; i < 4; i += 1 + (i == 1)) {
		snprintf(key, sizeof(key), "/p/job/inbox/N%d", i);
		put_kv(keys, values, &n, "/p/job/inbox/", i, txn_put(2, key));
	}
	/* N2 dies: round 1 is over; the leader is lost with its write */
	node_event("N2", NULL);
	assert_int_equal(ncalls, at + 1);
	record = txn_put(at, "/p/job/state");
	assert_non_null(record);
	etcd_leader_free(l);
	for (int i = 0; i < 4; i += 1 + (i == 1))
		put_kv(keys, values, &n, "/p/job/nodes/", i,
		       node_value(1, NULL));
	l = take_over(base, record, keys, values, n);
	free(record);
	/* the survivors' keys, read again, are no rejoin: N1 and N3 are
	 * joined to round 2, N0 hears that round 1 is over */
	assert_int_equal(ncalls, 3);
	inbox_says(2, "N0", 1, 2, REJOIN);
	inbox_says(2, "N1", 2, 2, HELD);
	inbox_says(2, "N3", 2, 2, HELD);
	done(l, base, keys, values, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_compacted_during_write),
	    cmocka_unit_test(test_write_answered_during_read),
	    cmocka_unit_test(test_inboxes_in_parallel_after_record),
	    cmocka_unit_test(test_deposed_with_calls_in_flight),
	    cmocka_unit_test(test_window_bound_and_record_first),
	    cmocka_unit_test(test_failed_inbox_write_retried),
	    cmocka_unit_test(test_freed_with_window_in_flight),
	    cmocka_unit_test(test_record_no_inbox_reflects_waits),
	    cmocka_unit_test(test_deposed_from_each_phase),
	    cmocka_unit_test(test_prejoin_master_lost),
	    cmocka_unit_test(test_prejoin_master_rejoins),
	    cmocka_unit_test(test_takeover_reads_inboxes),
	    cmocka_unit_test(test_takeover_while_round_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
