/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_proto_fix.c - the helpers of etcd_proto_fix.h: a recorded answer
 * read whole, a parsed key-value pair checked field by field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlaunch/fsutil.h"
#include "etcd_proto_fix.h"

/* slurp reads a recorded answer; *len its size */
char *slurp(const char *path, size_t *len)
{
	char *data = NULL;
	if (fs_read_file(path, 1 << 24, &data, len) != 0)
		fail_msg("cannot read %s (run from the repository root)", path);
	return data;
}

void kv_is(const struct etcd_kv *kv, const char *key, const char *value,
	   int64_t create, int64_t mod, int64_t version)
{
	assert_int_equal(kv->key_len, strlen(key));
	assert_memory_equal(kv->key, key, kv->key_len);
	assert_int_equal(kv->value_len, strlen(value));
	assert_string_equal(kv->value, value);
	assert_int_equal(kv->create_revision, create);
	assert_int_equal(kv->mod_revision, mod);
	assert_int_equal(kv->version, version);
}
