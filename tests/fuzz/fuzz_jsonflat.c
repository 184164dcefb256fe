/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_jsonflat.c - libFuzzer harness for the flat JSON reader
 * (common/jsonflat.c): whatever it reads, jansson (with
 * JSON_REJECT_DUPLICATES, as requests are parsed) reads to the same
 * members and values; a difference, a crash or a sanitizer report is a
 * bug. What it refuses is jansson's alone.
 *
 * Corpus: tests/fuzz/corpus/jsonflat (heartbeats, documents just outside
 * the flat subset).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/jsonflat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jsonflat o;
	json_t *v;

	if (jsonflat_read((const char *)data, size, &o) != 0)
		return 0;
	v = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	if (!v || !json_is_object(v) || json_object_size(v) != o.count)
		abort();
	for (size_t i = 0; i < o.count; i++) {
		const struct jsonflat_field *f = &o.fields[i];
		char *key = malloc(f->key_len + 1);
		json_t *m;
		if (!key)
			abort();
		memcpy(key, f->key, f->key_len);
		key[f->key_len] = '\0';
		m = json_object_get(v, key);
		/* keys are distinct: the lookup finds this member */
		if (!m || jsonflat_get(&o, key) != f)
			abort();
		free(key);
		if (f->type == JSONFLAT_STRING &&
		    (!json_is_string(m) ||
		     json_string_length(m) != f->str_len ||
		     memcmp(json_string_value(m), f->str, f->str_len) != 0))
			abort();
		if (f->type == JSONFLAT_INTEGER &&
		    (!json_is_integer(m) || json_integer_value(m) < 0 ||
		     (uint64_t)json_integer_value(m) != f->num))
			abort();
	}
	json_decref(v);
	return 0;
}
