/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_proto_fix.h - what the tests of the etcd gateway protocol's
 * parsers share (test_etcd_answer, test_etcd_stream): reading a recorded
 * answer and checking a key-value pair.
 *
 * The answers a real etcd 3.4 gave are in tests/etcd/recorded/ (made by
 * tests/etcd/record.sh), read at test time from the repository root,
 * where tests/run.sh runs unit tests.
 */
#ifndef DLAUNCH_TEST_ETCD_PROTO_FIX_H
#define DLAUNCH_TEST_ETCD_PROTO_FIX_H

#include <stddef.h>
#include <stdint.h>

#include "../../agent/etcd/etcd_proto.h"

#define REC "tests/etcd/recorded/"

/* slurp: the bytes of a recorded answer (the caller frees them); *len
 * their count. Fails the test when the file cannot be read. */
char *slurp(const char *path, size_t *len);
/* kv_is: asserts every field of a parsed key-value pair. */
void kv_is(const struct etcd_kv *kv, const char *key, const char *value,
	   int64_t create, int64_t mod, int64_t version);

#endif
