/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_keys.c - the key layout of an etcd job (agent/etcd/etcd_keys.c):
 * the job prefix, each key built from it, and a node id read back out of
 * a key, with the keys that are not of the asked form refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../agent/etcd/etcd_keys.h"

static void test_keys_of_a_job(void **state)
{
	char prefix[ETCD_PREFIX_MAX], k[ETCD_JOB_KEY_MAX];
	(void)state;
	assert_int_equal(
	    etcd_job_prefix(prefix, sizeof(prefix), "/dlaunch", "job1"),
	    strlen("/dlaunch/job1"));
	assert_string_equal(prefix, "/dlaunch/job1");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_LEADER, NULL);
	assert_string_equal(k, "/dlaunch/job1/leader");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_STATE, NULL);
	assert_string_equal(k, "/dlaunch/job1/state");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_NODES, "n0");
	assert_string_equal(k, "/dlaunch/job1/nodes/n0");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_INBOX, "n0");
	assert_string_equal(k, "/dlaunch/job1/inbox/n0");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_HANG_TRIGGER, NULL);
	assert_string_equal(k, "/dlaunch/job1/hang/trigger");
	etcd_key(k, sizeof(k), prefix, ETCD_KEY_HANG_REPORT, "n0");
	assert_string_equal(k, "/dlaunch/job1/hang/report/n0");
	/* the range of every job: KEY_PREFIX/ */
	etcd_job_prefix(prefix, sizeof(prefix), "/dlaunch", "");
	assert_string_equal(prefix, "/dlaunch/");
}

/* a key too long for out is cut, and the length it needed said */
static void test_key_too_long(void **state)
{
	char k[16];
	(void)state;
	assert_int_equal(
	    etcd_key(k, sizeof(k), "/dlaunch/job1", ETCD_KEY_NODES, "node-0"),
	    strlen("/dlaunch/job1/nodes/node-0"));
	assert_int_equal(strlen(k), sizeof(k) - 1);
}

static void test_node_id_of_a_key(void **state)
{
	const char *p = "/dlaunch/j";
	char id[8];
	const char *key = "/dlaunch/j/nodes/n12";
	(void)state;
	assert_string_equal(
	    etcd_key_id(key, strlen(key), p, ETCD_KEY_NODES, id, sizeof(id)),
	    "n12");
	/* the length given counts, not a '\0' */
	assert_string_equal(etcd_key_id(key, strlen(key) - 1, p, ETCD_KEY_NODES,
					id, sizeof(id)),
			    "n1");
	/* another part, another job, no id, an id too long for out */
	assert_null(
	    etcd_key_id(key, strlen(key), p, ETCD_KEY_INBOX, id, sizeof(id)));
	assert_null(etcd_key_id(key, strlen(key), "/dlaunch/k", ETCD_KEY_NODES,
				id, sizeof(id)));
	key = "/dlaunch/j/nodes/";
	assert_null(
	    etcd_key_id(key, strlen(key), p, ETCD_KEY_NODES, id, sizeof(id)));
	key = "/dlaunch/j/nodes/a-very-long-id";
	assert_null(
	    etcd_key_id(key, strlen(key), p, ETCD_KEY_NODES, id, sizeof(id)));
	key = "/dl";
	assert_null(
	    etcd_key_id(key, strlen(key), p, ETCD_KEY_NODES, id, sizeof(id)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_of_a_job),
	    cmocka_unit_test(test_key_too_long),
	    cmocka_unit_test(test_node_id_of_a_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
