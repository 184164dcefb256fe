/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_control_proto.c - the worker control channel's lines
 * (agent/control_proto.c): the worker's messages parsed, bad ones refused
 * with a reason, lines split with their limit, the agent's written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/control_proto.h"
#include "dlaunch/error.h"

static int parse(const char *line, struct control_msg *m)
{
	char err[256];
	return control_parse_line(line, strlen(line), m, err, sizeof(err));
}

static void test_hello(void **state)
{
	struct control_msg m;
	(void)state;
	assert_int_equal(
	    parse("{\"type\":\"hello\",\"version\":1,\"handles\":[\"abort\","
		  "\"membership\",\"dump\",\"future\"],\"extra\":{}}",
		  &m),
	    0);
	assert_int_equal(m.type, CONTROL_MSG_HELLO);
	assert_int_equal(m.version, 1);
	assert_int_equal(m.handles, CONTROL_HANDLES_ABORT |
					CONTROL_HANDLES_MEMBERSHIP |
					CONTROL_HANDLES_DUMP);
	assert_int_equal(parse("{\"type\":\"hello\",\"version\":2,"
			       "\"handles\":[]}",
			       &m),
			 0);
	assert_int_equal(m.version, 2);
	assert_int_equal(m.handles, 0);
}

static void test_answers(void **state)
{
	struct control_msg m;
	(void)state;
	assert_int_equal(parse("{\"type\":\"step\",\"step\":42}", &m), 0);
	assert_int_equal(m.type, CONTROL_MSG_STEP);
	assert_int_equal(m.step, 42);
	assert_int_equal(
	    parse("{\"type\":\"aborted\",\"round\":3,\"step\":7}", &m), 0);
	assert_int_equal(m.type, CONTROL_MSG_ABORTED);
	assert_int_equal(m.round, 3);
	assert_int_equal(m.step, 7);
	assert_int_equal(
	    parse("{\"step\":8,\"round\":4,\"type\":\"reformed\"}", &m), 0);
	assert_int_equal(m.type, CONTROL_MSG_REFORMED);
	assert_int_equal(m.round, 4);
	assert_int_equal(parse("{\"type\":\"dumped\",\"id\":\"d1\"}", &m), 0);
	assert_string_equal(m.id, "d1");
	/* a type of a later version is no error */
	assert_int_equal(parse("{\"type\":\"novelty\",\"x\":1}", &m), 0);
	assert_int_equal(m.type, CONTROL_MSG_UNKNOWN);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
	    "",
	    "garbage",
	    "[1,2]",
	    "\"hello\"",
	    "{}",
	    "{\"type\":1}",
	    "{\"type\":\"hello\"}",
	    "{\"type\":\"hello\",\"version\":1}",
	    "{\"type\":\"hello\",\"version\":1,\"handles\":\"abort\"}",
	    "{\"type\":\"hello\",\"version\":1,\"handles\":[1]}",
	    "{\"type\":\"hello\",\"version\":-1,\"handles\":[]}",
	    "{\"type\":\"step\"}",
	    "{\"type\":\"step\",\"step\":\"3\"}",
	    "{\"type\":\"step\",\"step\":-3}",
	    "{\"type\":\"step\",\"step\":1.5}",
	    "{\"type\":\"aborted\",\"round\":1}",
	    "{\"type\":\"reformed\",\"step\":1}",
	    "{\"type\":\"dumped\"}",
	    "{\"type\":\"step\",\"step\":1,\"step\":2}",
	    "{\"type\":\"step\",\"step\":1",
	    "{\"type\":\"step\",\"x\":[[[[[[[[[[1]]]]]]]]]],\"step\":1}",
	};
	struct control_msg m;
	char err[256];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = control_parse_line(bad[i], strlen(bad[i]), &m, err,
					    sizeof(err));
		if (rc == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
	}
	/* a NUL inside a line */
	assert_int_not_equal(control_parse_line("{\"type\":\"step\"\0}", 16, &m,
						err, sizeof(err)),
			     0);
}

static void feed(struct control_reader *r, const char *s)
{
	size_t avail, n = strlen(s);
	char *p = control_reader_space(r, &avail);
	assert_true(avail >= n);
	memcpy(p, s, n);
	control_reader_commit(r, n);
}

static void test_reader(void **state)
{
	struct control_reader *r = malloc(sizeof(*r));
	const char *line;
	size_t len, avail;
	char *p;
	(void)state;
	assert_non_null(r);
	control_reader_init(r);
	feed(r, "{\"a\":1}\n{\"b\"");
	assert_int_equal(control_reader_next(r, &line, &len), 1);
	assert_int_equal(len, 7);
	assert_memory_equal(line, "{\"a\":1}", 7);
	assert_int_equal(control_reader_next(r, &line, &len), 0);
	feed(r, ":2}\n\n");
	assert_int_equal(control_reader_next(r, &line, &len), 1);
	assert_memory_equal(line, "{\"b\":2}", 7);
	assert_int_equal(control_reader_next(r, &line, &len), 1);
	assert_int_equal(len, 0);
	assert_int_equal(control_reader_next(r, &line, &len), 0);
	/* a line as long as the limit allows: 65535 bytes and its newline */
	control_reader_init(r);
	p = control_reader_space(r, &avail);
	assert_int_equal(avail, CONTROL_LINE_MAX);
	memset(p, 'x', CONTROL_LINE_MAX - 1);
	p[CONTROL_LINE_MAX - 1] = '\n';
	control_reader_commit(r, CONTROL_LINE_MAX);
	assert_int_equal(control_reader_next(r, &line, &len), 1);
	assert_int_equal(len, CONTROL_LINE_MAX - 1);
	/* one byte more has no newline in the buffer: refused */
	control_reader_init(r);
	p = control_reader_space(r, &avail);
	memset(p, 'x', avail);
	control_reader_commit(r, avail);
	assert_int_equal(control_reader_next(r, &line, &len), DL_ELIMIT);
	p = control_reader_space(r, &avail);
	assert_int_equal(avail, 0);
	free(r);
}

static void test_writers(void **state)
{
	struct buf b;
	struct control_msg m;
	char err[256];
	struct control_membership mb = {.round = 2,
					.rank = 0,
					.world_size = 2,
					.local_rank = 0,
					.local_world_size = 2,
					.node_rank = 0,
					.nnodes = 1,
					.restart_count = 1,
					.master_addr = "10.0.0.2",
					.master_port = 41231,
					.store_prefix = "job42/2/"};
	(void)state;
	buf_init(&b, 1 << 16);
	assert_int_equal(control_write_welcome(&b, 1, 0, 0, 0), 0);
	assert_string_equal(buf_cstr(&b),
			    "{\"type\":\"welcome\",\"version\":1}\n");
	buf_reset(&b);
	/* the agent's bounds, for the worker's own waits */
	assert_int_equal(control_write_welcome(&b, 1, 30000, 75000, 0), 0);
	assert_string_equal(buf_cstr(&b), "{\"type\":\"welcome\",\"version\":1,"
					  "\"reform_timeout_ms\":30000,"
					  "\"rejoin_timeout_ms\":75000}\n");
	buf_reset(&b);
	/* an agent that preempts says its grace */
	assert_int_equal(control_write_welcome(&b, 1, 0, 0, 60000), 0);
	assert_string_equal(buf_cstr(&b), "{\"type\":\"welcome\",\"version\":1,"
					  "\"preempt_grace_ms\":60000}\n");
	buf_reset(&b);
	assert_int_equal(control_write_preempt(&b, 7935), 0);
	assert_string_equal(buf_cstr(&b),
			    "{\"type\":\"preempt\",\"step\":7935}\n");
	buf_reset(&b);
	assert_int_equal(control_write_abort(&b, 1, "node n0 lost"), 0);
	assert_non_null(strstr(buf_cstr(&b), "\"type\":\"abort\""));
	assert_non_null(strstr(buf_cstr(&b), "\"round\":1"));
	assert_non_null(strstr(buf_cstr(&b), "\"reason\":\"node n0 lost\""));
	buf_reset(&b);
	assert_int_equal(control_write_membership(&b, &mb), 0);
	assert_int_equal(b.data[b.len - 1], '\n');
	assert_null(memchr(b.data, '\n', b.len - 1)); /* one line */
	assert_non_null(strstr(buf_cstr(&b), "\"master_port\":41231"));
	assert_non_null(strstr(buf_cstr(&b), "\"store_prefix\":\"job42/2/\""));
	assert_non_null(strstr(buf_cstr(&b), "\"restart_count\":1"));
	assert_non_null(strstr(buf_cstr(&b), "\"world_size\":2"));
	/* a line the agent writes is not one a worker may send */
	assert_int_equal(
	    control_parse_line(b.data, b.len - 1, &m, err, sizeof(err)), 0);
	assert_int_equal(m.type, CONTROL_MSG_UNKNOWN);
	buf_release(&b);
	/* a full buffer takes nothing */
	buf_init(&b, 8);
	assert_int_equal(control_write_abort(&b, 1, "x"), DL_ELIMIT);
	assert_int_equal(b.len, 0);
	buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hello),   cmocka_unit_test(test_answers),
	    cmocka_unit_test(test_refused), cmocka_unit_test(test_reader),
	    cmocka_unit_test(test_writers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
