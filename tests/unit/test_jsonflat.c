/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_jsonflat.c - the flat JSON reader (dlaunch/jsonflat.h): what it
 * reads and refuses, and that every document it reads means the same to
 * jansson (JSON_REJECT_DUPLICATES, as jsonh_parse reads requests), checked
 * on fixed cases and on every one-byte change of a few seeds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/jsonflat.h"

/* same_as_jansson: when jsonflat reads doc, jansson reads it to the same
 * members; returns whether jsonflat read it */
static int same_as_jansson(const char *doc, size_t len)
{
	struct jsonflat o;
	json_error_t jerr;
	json_t *v;
	if (jsonflat_read(doc, len, &o) != 0)
		return 0;
	v = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!v || !json_is_object(v) || json_object_size(v) != o.count) {
		fprintf(stderr, "jsonflat read what jansson does not: %.*s\n",
			(int)len, doc);
		fail();
	}
	for (size_t i = 0; i < o.count; i++) {
		const struct jsonflat_field *f = &o.fields[i];
		char key[256];
		json_t *m;
		assert_true(f->key_len < sizeof(key));
		memcpy(key, f->key, f->key_len);
		key[f->key_len] = '\0';
		m = json_object_get(v, key);
		assert_non_null(m);
		if (f->type == JSONFLAT_STRING) {
			assert_true(json_is_string(m));
			assert_int_equal(json_string_length(m), f->str_len);
			assert_memory_equal(json_string_value(m), f->str,
					    f->str_len);
		} else {
			assert_true(json_is_integer(m));
			assert_true(json_integer_value(m) >= 0);
			assert_int_equal((uint64_t)json_integer_value(m),
					 f->num);
		}
	}
	json_decref(v);
	return 1;
}

static int reads(const char *doc)
{
	return same_as_jansson(doc, strlen(doc));
}

static void test_reads(void **state)
{
	struct jsonflat o;
	const struct jsonflat_field *f;
	char s[16];
	(void)state;
	assert_true(reads("{}"));
	assert_true(reads(" \t\r\n{ \n}\n"));
	assert_true(reads("{\"a\":1}"));
	assert_true(reads("{\"a\":0,\"b\":\"x y/z:{}[],\"}"));
	assert_true(reads("{ \"node_id\" : \"n1\" , \"round\" : 12 }"));
	assert_true(reads("{\"\":\"\"}"));
	assert_true(reads("{\"n\":999999999999999999}")); /* 18 digits */

	const char *doc = "{\"node_id\":\"n-1\",\"round\":42,\"why\":\"\"}";
	assert_int_equal(jsonflat_read(doc, strlen(doc), &o), 0);
	assert_int_equal(o.count, 3);
	f = jsonflat_get(&o, "node_id");
	assert_non_null(f);
	assert_int_equal(f->type, JSONFLAT_STRING);
	assert_int_equal(jsonflat_copy_str(f, s, sizeof(s)), 0);
	assert_string_equal(s, "n-1");
	assert_int_equal(jsonflat_copy_str(f, s, 3), -1); /* no room */
	f = jsonflat_get(&o, "round");
	assert_non_null(f);
	assert_int_equal(f->type, JSONFLAT_INTEGER);
	assert_int_equal(f->num, 42);
	assert_int_equal(jsonflat_copy_str(f, s, sizeof(s)), -1);
	assert_null(jsonflat_get(&o, "roun"));
	assert_null(jsonflat_get(&o, "rounds"));
	assert_int_equal(jsonflat_copy_str(NULL, s, sizeof(s)), -1);
	/* the length given is the document: what follows is not read */
	assert_int_equal(jsonflat_read("{\"a\":1}xyz", 7, &o), 0);
}

/* refused: valid JSON beyond the flat subset, and anything invalid */
static void test_refuses(void **state)
{
	static const char *const docs[] = {
	    "",
	    "   ",
	    "[]",
	    "1",
	    "\"s\"",
	    "null",
	    "{",
	    "}",
	    "{\"a\"}",
	    "{\"a\":}",
	    "{\"a\" 1}",
	    "{\"a\":1,}",
	    "{,\"a\":1}",
	    "{\"a\":1 \"b\":2}",
	    "{\"a\":1}}",
	    "{\"a\":1} x",
	    "{\"a\":1}{}",
	    "{a:1}",
	    "{'a':1}",
	    "{\"a\":1,\"a\":2}",	     /* duplicate */
	    "{\"a\":\"x\",\"b\":1,\"a\":1}", /* duplicate */
	    "{\"a\":-1}",
	    "{\"a\":01}",
	    "{\"a\":1.5}",
	    "{\"a\":1e3}",
	    "{\"a\":1E3}",
	    "{\"a\":1x}",
	    "{\"a\":+1}",
	    "{\"a\":1000000000000000000}", /* 19 digits */
	    "{\"a\":true}",
	    "{\"a\":false}",
	    "{\"a\":null}",
	    "{\"a\":{}}",
	    "{\"a\":[]}",
	    "{\"a\":\"x\\\"y\"}",   /* an escape */
	    "{\"a\":\"\\u0041\"}",  /* an escape */
	    "{\"a\\n\":1}",	    /* an escape in a key */
	    "{\"a\":\"x\ty\"}",	    /* a control character */
	    "{\"a\":\"x\x7fy\"}",   /* DEL */
	    "{\"a\":\"\xc3\xa9\"}", /* UTF-8 */
	    "{\"a\":\"x}",
	    "\xef\xbb\xbf{}", /* a byte order mark */
	    "{\"a\":1}\f",    /* form feed is not JSON whitespace */
	    "\v{}",
	};
	struct jsonflat o;
	(void)state;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		if (jsonflat_read(docs[i], strlen(docs[i]), &o) == 0) {
			fprintf(stderr, "read: %s\n", docs[i]);
			fail();
		}
	}
	assert_int_equal(jsonflat_read(NULL, 0, &o), -1);
	/* a NUL byte inside the document */
	assert_int_equal(jsonflat_read("{\"a\":\"x\0y\"}", 11, &o), -1);
	assert_int_equal(jsonflat_read("{\"a\":1}\0", 8, &o), -1);
	/* more members than it holds */
	{
		char doc[512];
		size_t n = 0;
		n += (size_t)snprintf(doc + n, sizeof(doc) - n, "{");
		for (int k = 0; k <= JSONFLAT_MAX_FIELDS; k++)
			n += (size_t)snprintf(doc + n, sizeof(doc) - n,
					      "%s\"k%d\":%d", k ? "," : "", k,
					      k);
		snprintf(doc + n, sizeof(doc) - n, "}");
		assert_int_equal(jsonflat_read(doc, strlen(doc), &o), -1);
		/* one fewer fits */
		assert_true(reads("{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,"
				  "\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,"
				  "\"k8\":8,\"k9\":9,\"k10\":10,\"k11\":11,"
				  "\"k12\":12,\"k13\":13,\"k14\":14,"
				  "\"k15\":15}"));
	}
}

/* every one-byte change (replaced, dropped, cut after) of the seeds: what
 * jsonflat reads, jansson reads the same */
static void test_mutations_agree(void **state)
{
	static const char *const seeds[] = {
	    "{\"node_id\":\"node-00001\",\"incarnation\":\"inc0a1b\","
	    "\"round\":1,\"recovery\":\"started\",\"recovery_why\":\"the "
	    "first round of this node\"}",
	    "{ \"a\" : 10 , \"b\" : \"\" }",
	    "{\"n\":999999999999999999,\"m\":0}",
	};
	static const char alphabet[] = "{}[]\":,0123456789-+.eE \t\n\r\\"
				       "ax/\x01\x7f\x80\xff";
	size_t read = 0, tried = 0;
	(void)state;
	for (size_t s = 0; s < sizeof(seeds) / sizeof(seeds[0]); s++) {
		const char *seed = seeds[s];
		size_t len = strlen(seed);
		char *doc = malloc(len + 1);
		assert_non_null(doc);
		assert_true(same_as_jansson(seed, len));
		for (size_t i = 0; i < len; i++) {
			for (size_t k = 0; k < sizeof(alphabet) - 1; k++) {
				memcpy(doc, seed, len);
				doc[i] = alphabet[k];
				read += (size_t)same_as_jansson(doc, len);
				tried++;
			}
			/* byte i dropped */
			memcpy(doc, seed, i);
			memcpy(doc + i, seed + i + 1, len - i - 1);
			read += (size_t)same_as_jansson(doc, len - 1);
			/* cut after byte i */
			read += (size_t)same_as_jansson(seed, i);
			tried += 2;
		}
		free(doc);
	}
	/* both sides were exercised: some changes stay readable */
	assert_true(read > 0);
	assert_true(read < tried);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reads),
	    cmocka_unit_test(test_refuses),
	    cmocka_unit_test(test_mutations_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
