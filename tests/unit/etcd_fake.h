/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_fake.h - a recorded fake of the etcd client (agent/etcd/
 * etcd_client.h) for unit tests of what runs on it (the leader, the
 * campaign): it defines the client's calls and watches (etcd_call,
 * etcd_cancel, etcd_watch_new, etcd_watch_free),
 * keeps every call and watch made, writes each in fake_log, and answers
 * a call only when the test says so, with etcd's JSON as recorded in
 * tests/etcd/recorded. A test that links etcd_fake.o before libetcd.a
 * never links the library's etcd_client.o.
 */
#ifndef DLAUNCH_TESTS_ETCD_FAKE_H
#define DLAUNCH_TESTS_ETCD_FAKE_H
#include <stddef.h>

#include "../../agent/etcd/etcd_client.h"

#define FAKE_CALLS_MAX 128

struct etcd_call {
	char what[32];
	char path[64];
	etcd_cb cb;
	void *arg;
	int canceled, answered;
	/* a transaction's: its operations, the keys (base64) of its first
	 * and last put */
	size_t ops;
	char first_key[128], last_key[128];
	json_t *success; /* its operations, as sent (fake_reset frees) */
};

struct etcd_watch {
	char what[32];
	int64_t start_revision;
	etcd_watch_cb cb;
	void *arg;
	int freed;
};

extern struct etcd_call calls[FAKE_CALLS_MAX];
extern size_t ncalls;
extern struct etcd_watch watches[FAKE_CALLS_MAX];
extern size_t nwatches;
/* what the code under test did, in order: "call(WHAT);", "cancel(WHAT);",
 * "watch(WHAT@REVISION);", "unwatch(WHAT);" */
extern char fake_log[4096];

/* fake_reset forgets every call, watch and log line */
void fake_reset(void);
/* answer: call i gets body (etcd's JSON) */
void answer(size_t i, const char *body);
/* answer_error: call i ends without an answer of etcd's (rc, why) */
void answer_error(size_t i, int rc, const char *why);
/* pending: the calls neither answered nor canceled */
size_t pending(void);
/* answer_left: a real client answers every call not canceled, after its
 * owner is freed too; the number of them (0 when the owner canceled all
 * it had out) */
size_t answer_left(const char *body);
/* txns_pending: the transactions sent and not yet answered or canceled */
size_t txns_pending(void);
/* oldest_txn: the first transaction not yet answered, or ncalls */
size_t oldest_txn(void);
/* txn_put: the value (decoded, '\0' ended; free it) that transaction i
 * puts at key, or NULL when it puts nothing there */
char *txn_put(size_t i, const char *key);
/* b64: in, base64-encoded into out (room for 4/3 of it and 4 more) */
void b64(const char *in, char *out);
/* is_key: whether the base64 key k is key */
int is_key(const char *k, const char *key);

#endif
