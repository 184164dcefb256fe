/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_recovery.c - the node key's "recovery" over etcd
 * (agent/etcd/etcd_recovery.c): what a node writes after an in-place re-form
 * or a restart, and what the leader accepts of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "../../agent/etcd/etcd_recovery.h"
#include "dlaunch/error.h"

static char err[512];

/* parse_text: etcd_recovery_parse of the node value text */
static int parse_text(const char *text, uint64_t *round,
		      enum rdzv_recovery *how, char *why, size_t why_size)
{
	json_t *v = json_loads(text, 0, NULL);
	const char *w = NULL;
	int rc;
	assert_non_null(v);
	rc = etcd_recovery_parse(v, round, how, &w, err, sizeof(err));
	snprintf(why, why_size, "%s", w ? w : "");
	json_decref(v);
	return rc;
}

/* Only an in-place re-form or a restart is worth the write; what is
 * written reads back the same. */
static void test_written_and_read(void **state)
{
	json_t *rec, *v;
	uint64_t round;
	enum rdzv_recovery how;
	const char *why;
	(void)state;
	assert_null(etcd_recovery_json(3, "started", "the first round"));
	assert_null(etcd_recovery_json(3, "", ""));
	assert_null(etcd_recovery_json(3, NULL, NULL));
	assert_null(etcd_recovery_json(0, "in_place", "x"));
	rec = etcd_recovery_json(3, "in_place", "every worker re-formed");
	assert_non_null(rec);
	v = json_pack("{s:s, s:o}", "incarnation", "i1", "recovery", rec);
	assert_int_equal(
	    etcd_recovery_parse(v, &round, &how, &why, err, sizeof(err)), 0);
	assert_int_equal(round, 3);
	assert_int_equal(how, RDZV_RECOVERY_IN_PLACE);
	assert_string_equal(why, "every worker re-formed");
	json_decref(v);
	/* no recovery (a join, a report): nothing, and no error */
	v = json_pack("{s:s}", "incarnation", "i1");
	assert_int_equal(
	    etcd_recovery_parse(v, &round, &how, &why, err, sizeof(err)), 0);
	assert_int_equal(how, RDZV_RECOVERY_NONE);
	json_decref(v);
}

/* A long reason is cut at RDZV_RECOVERY_WHY_MAX bytes on a character
 * boundary, so that the leader takes it. */
static void test_long_why_cut(void **state)
{
	char why[RDZV_RECOVERY_WHY_MAX + 40];
	const char *s;
	json_t *rec;
	size_t i;
	(void)state;
	for (i = 0; i + 2 < sizeof(why); i += 2)
		memcpy(why + i, "\xc3\xa9", 2); /* e acute */
	why[i] = '\0';
	rec = etcd_recovery_json(2, "restarted", why);
	assert_non_null(rec);
	s = json_string_value(json_object_get(rec, "why"));
	assert_non_null(s);
	assert_true(strlen(s) <= RDZV_RECOVERY_WHY_MAX);
	assert_true(strlen(s) >= RDZV_RECOVERY_WHY_MAX - 1);
	assert_int_equal(strlen(s) % 2, 0);
	json_decref(rec);
}

/* What a leader refuses: every malformed recovery, with a message. */
static void test_refused(void **state)
{
	uint64_t round;
	enum rdzv_recovery how;
	char why[256];
	(void)state;
	assert_int_equal(
	    parse_text("{\"recovery\": 3}", &round, &how, why, sizeof(why)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "recovery"));
	assert_int_equal(parse_text("{\"recovery\": {\"how\": \"in_place\"}}",
				    &round, &how, why, sizeof(why)),
			 DL_EINVAL);
	assert_int_equal(
	    parse_text("{\"recovery\": {\"round\": 0, \"how\": \"in_place\"}}",
		       &round, &how, why, sizeof(why)),
	    DL_EINVAL);
	assert_int_equal(
	    parse_text("{\"recovery\": {\"round\": 2, \"how\": \"kept\"}}",
		       &round, &how, why, sizeof(why)),
	    DL_EINVAL);
	assert_non_null(strstr(err, "'kept'"));
	assert_int_equal(how, RDZV_RECOVERY_NONE);
	assert_int_equal(parse_text("{\"recovery\": {\"round\": 2, \"how\": "
				    "\"restarted\", \"why\": \"a\\u0007b\"}}",
				    &round, &how, why, sizeof(why)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "control character"));
	assert_int_equal(how, RDZV_RECOVERY_NONE);
	assert_int_equal(parse_text("{\"recovery\": {\"round\": 2, \"how\": "
				    "\"restarted\", \"why\": 5}}",
				    &round, &how, why, sizeof(why)),
			 DL_EINVAL);
	/* started is a way too (an older or other writer may say it) */
	assert_int_equal(
	    parse_text("{\"recovery\": {\"round\": 1, \"how\": \"started\"}}",
		       &round, &how, why, sizeof(why)),
	    0);
	assert_int_equal(how, RDZV_RECOVERY_STARTED);
	assert_string_equal(why, "");
}

/* The pause before the write: one to two milliseconds per node of the
 * round, spread by the draw over the whole window, never below one. */
static void test_delay(void **state)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	(void)state;
	for (uint64_t draw = 0; draw < 20000; draw += 7) {
		uint64_t ms = etcd_recovery_delay_ms(4096, draw * 2654435761u);
		assert_true(ms >= 4096 && ms < 8192);
		lo = ms < lo ? ms : lo;
		hi = ms > hi ? ms : hi;
	}
	/* the draws cover the window, not one corner of it */
	assert_true(lo < 4096 + 100);
	assert_true(hi > 8192 - 100);
	assert_int_equal(etcd_recovery_delay_ms(8, 0), 8);
	assert_int_equal(etcd_recovery_delay_ms(8, 7), 15);
	assert_int_equal(etcd_recovery_delay_ms(8, 8), 8);
	assert_int_equal(etcd_recovery_delay_ms(8, UINT64_MAX), 8 + 7);
	/* a round of one node, or none known: a millisecond */
	assert_int_equal(etcd_recovery_delay_ms(1, 12345), 1);
	assert_int_equal(etcd_recovery_delay_ms(0, 12345), 1);
	assert_int_equal(etcd_recovery_delay_ms(-3, 12345), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_written_and_read),
	    cmocka_unit_test(test_long_why_cut),
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_delay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
