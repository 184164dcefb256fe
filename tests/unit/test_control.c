/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_control.c - dlaunch-train's side of the worker control channel:
 * the strict message reader (every message type, unknown members and
 * types, each kind of bad input), the lines the worker writes, and the
 * channel over a real socket pair (hello, welcome, fencing, an abort
 * calling its hook, a membership, garbage ending the channel).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trainer/control.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"

static int parse(const char *line, struct control_msg *m)
{
	char err[256];

	return control_parse(line, strlen(line), m, err, sizeof(err));
}

static const char *membership_line =
    "{\"type\":\"membership\",\"round\":2,\"rank\":1,\"world_size\":2,"
    "\"local_rank\":1,\"local_world_size\":2,\"node_rank\":0,\"nnodes\":1,"
    "\"master_addr\":\"10.0.0.2\",\"master_port\":41231,"
    "\"restart_count\":1,\"store_prefix\":\"job42/2/\"}";

static void test_parse_messages(void **state)
{
	struct control_msg m;

	(void)state;
	assert_int_equal(parse("{\"type\":\"welcome\",\"version\":1}", &m), 0);
	assert_int_equal(m.type, CONTROL_WELCOME);
	assert_int_equal(m.version, 1);
	assert_int_equal(m.reform_timeout_ms, 0); /* absent: not told */
	assert_int_equal(m.rejoin_timeout_ms, 0);
	assert_int_equal(parse("{\"type\":\"welcome\",\"version\":1,"
			       "\"reform_timeout_ms\":30000,"
			       "\"rejoin_timeout_ms\":75000}",
			       &m),
			 0);
	assert_int_equal(m.type, CONTROL_WELCOME);
	assert_int_equal(m.reform_timeout_ms, 30000);
	assert_int_equal(m.rejoin_timeout_ms, 75000);
	assert_int_equal(
	    parse(" { \"reason\" : \"node n0 lost \\u00e9\\n\", \"round\":7,"
		  "\"type\":\"abort\" } ",
		  &m),
	    0);
	assert_int_equal(m.type, CONTROL_ABORT);
	assert_int_equal(m.round, 7);
	assert_string_equal(m.reason, "node n0 lost \xc3\xa9\n");
	assert_int_equal(parse(membership_line, &m), 0);
	assert_int_equal(m.type, CONTROL_MEMBERSHIP);
	assert_int_equal(m.m.round, 2);
	assert_int_equal(m.m.rank, 1);
	assert_int_equal(m.m.world_size, 2);
	assert_int_equal(m.m.local_world_size, 2);
	assert_int_equal(m.m.master_port, 41231);
	assert_string_equal(m.m.master_addr, "10.0.0.2");
	assert_string_equal(m.m.store_prefix, "job42/2/");
	assert_int_equal(m.m.restart_count, 1);
	/* a long reason is cut to fit, on a character boundary */
	{
		char *line = malloc(8192);
		size_t n = (size_t)snprintf(
		    line, 8192,
		    "{\"type\":\"abort\",\"round\":1,\"reason\":\"");
		for (int i = 0; i < 1000; i++)
			n += (size_t)snprintf(line + n, 8192 - n, "\xc3\xa9");
		snprintf(line + n, 8192 - n, "\"}");
		assert_int_equal(parse(line, &m), 0);
		assert_true(strlen(m.reason) < sizeof(m.reason));
		assert_true(strlen(m.reason) >= sizeof(m.reason) - 3);
		assert_int_equal(strlen(m.reason) % 2, 0);
		free(line);
	}
	assert_int_equal(parse("{\"type\":\"preempt\",\"step\":100}", &m), 0);
	assert_int_equal(m.type, CONTROL_PREEMPT);
	assert_int_equal(m.step, 100);
	assert_int_equal(
	    parse("{\"type\":\"dump\",\"id\":\"x\",\"path\":\"/tmp/a\"}", &m),
	    0);
	assert_int_equal(m.type, CONTROL_DUMP);
}

static void test_parse_unknown(void **state)
{
	struct control_msg m;

	(void)state;
	/* unknown members of any JSON type are skipped */
	assert_int_equal(
	    parse("{\"type\":\"welcome\",\"x\":[1,{\"a\":null},true,false,"
		  "-1.5e3,\"\\ud83d\\ude00\"],\"version\":1,\"y\":{}}",
		  &m),
	    0);
	assert_int_equal(m.type, CONTROL_WELCOME);
	/* an unknown type, short or long, is no error */
	assert_int_equal(parse("{\"type\":\"future\",\"round\":\"x\"}", &m), 0);
	assert_int_equal(m.type, CONTROL_UNKNOWN);
	assert_int_equal(parse("{\"type\":\"a-type-name-far-longer-than-any-"
			       "this-worker-knows\"}",
			       &m),
			 0);
	assert_int_equal(m.type, CONTROL_UNKNOWN);
}

static void test_parse_bad(void **state)
{
	static const char *bad[] = {
	    "",
	    "[]",
	    "\"type\"",
	    "{",
	    "{}",
	    "{\"version\":1}",
	    "{\"type\":1}",
	    "{\"type\":\"welcome\"}",
	    "{\"type\":\"welcome\",\"version\":\"1\"}",
	    "{\"type\":\"welcome\",\"version\":-1}",
	    "{\"type\":\"welcome\",\"version\":1.5}",
	    "{\"type\":\"welcome\",\"version\":1} x",
	    "{\"type\":\"welcome\",\"version\":1,}",
	    "{\"type\":\"welcome\",\"version\":1,\"reform_timeout_ms\":-1}",
	    "{\"type\":\"welcome\",\"version\":1,\"reform_timeout_ms\":\"30\"}",
	    "{\"type\":\"welcome\",\"version\":1,\"rejoin_timeout_ms\":1.5}",
	    "{\"type\":\"welcome\",\"version\":1,"
	    "\"rejoin_timeout_ms\":4294967296}",
	    "{\"type\":\"welcome\" \"version\":1}",
	    "{\"type\":\"welcome\",\"type\":\"abort\",\"version\":1}",
	    "{\"type\":\"abort\",\"round\":1,\"round\":2}",
	    "{\"type\":\"abort\",\"round\":99999999999999999999}",
	    "{\"type\":\"abort\",\"round\":01}",
	    "{\"type\":\"abort\",\"round\":1,\"reason\":\"a\tb\"}",
	    "{\"type\":\"abort\",\"round\":1,\"reason\":\"\\x\"}",
	    "{\"type\":\"abort\",\"round\":1,\"reason\":\"\\ud800\"}",
	    "{\"type\":\"abort\",\"round\":1,\"x\":tru}",
	    "{\"type\":\"abort\",\"round\":1,\"x\":[1,]}",
	    "{\"type\":\"abort\",\"round\":1,\"x\":\"unterminated}",
	    "{\"type\":\"preempt\"}",
	    /* membership: each member missing or out of range */
	    "{\"type\":\"membership\",\"round\":2,\"rank\":2,\"world_size\":2,"
	    "\"local_rank\":0,\"local_world_size\":1,\"node_rank\":0,"
	    "\"nnodes\":1,\"master_addr\":\"h\",\"master_port\":1,"
	    "\"restart_count\":0,\"store_prefix\":\"p\"}",
	    "{\"type\":\"membership\",\"round\":2,\"rank\":0,\"world_size\":2,"
	    "\"local_rank\":0,\"local_world_size\":1,\"node_rank\":0,"
	    "\"nnodes\":1,\"master_addr\":\"h\",\"master_port\":0,"
	    "\"restart_count\":0,\"store_prefix\":\"p\"}",
	    "{\"type\":\"membership\",\"round\":2,\"rank\":0,\"world_size\":2,"
	    "\"local_rank\":0,\"local_world_size\":1,\"node_rank\":0,"
	    "\"nnodes\":1,\"master_addr\":\"h\",\"master_port\":70000,"
	    "\"restart_count\":0,\"store_prefix\":\"p\"}",
	    "{\"type\":\"membership\",\"round\":2,\"rank\":0,\"world_size\":2,"
	    "\"local_rank\":0,\"local_world_size\":1,\"node_rank\":0,"
	    "\"nnodes\":1,\"master_port\":1,"
	    "\"restart_count\":0,\"store_prefix\":\"p\"}",
	    "{\"type\":\"membership\",\"round\":2,\"rank\":0,\"world_size\":2,"
	    "\"local_rank\":0,\"local_world_size\":1,\"node_rank\":0,"
	    "\"nnodes\":1,\"master_addr\":\"a\\u0000b\",\"master_port\":1,"
	    "\"restart_count\":0,\"store_prefix\":\"p\"}",
	};
	struct control_msg m;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		if (control_parse(bad[i], strlen(bad[i]), &m, err,
				  sizeof(err)) == 0)
			fail_msg("accepted: %s", bad[i]);
		assert_true(err[0] != '\0');
	}
	/* deep nesting is refused, not recursed into without bound */
	char deep[512] = "{\"type\":\"welcome\",\"version\":1,\"x\":";
	size_t n = strlen(deep);
	for (int i = 0; i < 100; i++)
		deep[n++] = '[';
	for (int i = 0; i < 100; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	assert_int_equal(control_parse(deep, n, &m, err, sizeof(err)),
			 DL_ELIMIT);
	/* a master_addr longer than its buffer */
	char *big = malloc(2048);
	snprintf(
	    big, 2048,
	    "{\"type\":\"membership\",\"round\":2,\"rank\":0,"
	    "\"world_size\":2,\"local_rank\":0,\"local_world_size\":1,"
	    "\"node_rank\":0,\"nnodes\":1,\"master_addr\":\"%0600d\","
	    "\"master_port\":1,\"restart_count\":0,\"store_prefix\":\"p\"}",
	    0);
	assert_int_not_equal(parse(big, &m), 0);
	free(big);
	/* the parser never reads past len: a valid line cut short */
	assert_int_not_equal(
	    control_parse(membership_line, 40, &m, err, sizeof(err)), 0);
}

static void test_format(void **state)
{
	char buf[128];
	struct control_msg m;

	(void)state;
	assert_true(control_format_hello(buf, sizeof(buf)) > 0);
	assert_string_equal(buf, "{\"type\":\"hello\",\"version\":1,"
				 "\"handles\":[\"abort\",\"membership\","
				 "\"dump\"]}\n");
	assert_int_equal(control_format_step(buf, sizeof(buf), 42),
			 (int)strlen("{\"type\":\"step\",\"step\":42}\n"));
	assert_string_equal(buf, "{\"type\":\"step\",\"step\":42}\n");
	control_format_aborted(buf, sizeof(buf), 3, 17);
	assert_string_equal(buf,
			    "{\"type\":\"aborted\",\"round\":3,\"step\":17}\n");
	control_format_reformed(buf, sizeof(buf), 4, 17);
	assert_string_equal(
	    buf, "{\"type\":\"reformed\",\"round\":4,\"step\":17}\n");
	/* what the worker writes reads back (an unknown type) */
	assert_int_equal(control_parse(buf, strlen(buf) - 1, &m, NULL, 0), 0);
	assert_int_equal(control_format_step(buf, 8, 42), -1);
}

/* the channel over a socket pair: what the agent side reads */
static void read_line(int fd, char *out, size_t size)
{
	size_t n = 0;

	while (n + 1 < size) {
		ssize_t k = read(fd, out + n, 1);
		assert_true(k == 1);
		if (out[n++] == '\n')
			break;
	}
	out[n] = '\0';
}

static void say(int fd, const char *line)
{
	size_t n = strlen(line);
	assert_int_equal(write(fd, line, n), (ssize_t)n);
}

static int hook_calls;
static void count_hook(void *ctx)
{
	(void)ctx;
	hook_calls++;
}

/* the agent's bounds in its welcome bound the wait for membership */
static void test_channel_welcome_bounds(void **state)
{
	int sv[2];
	char fdtext[16], line[256], err[256];
	struct control *c;
	struct control_membership m;
	uint64_t round, t0;

	(void)state;
	assert_int_equal(control_membership_wait_ms(NULL, 300000), 300000);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	snprintf(fdtext, sizeof(fdtext), "%d", sv[1]);
	setenv("DLAUNCH_CONTROL_FD", fdtext, 1);
	setenv("DLAUNCH_ROUND", "1", 1);
	assert_int_equal(control_open(&c, err, sizeof(err)), 0);
	read_line(sv[0], line, sizeof(line));
	/* not welcomed yet: --timeout alone */
	assert_int_equal(control_membership_wait_ms(c, 300000), 300000);
	say(sv[0], "{\"type\":\"welcome\",\"version\":1,"
		   "\"reform_timeout_ms\":200,\"rejoin_timeout_ms\":300}\n");
	for (int i = 0; i < 500 && !control_in_place(c); i++)
		assert_int_equal(control_wait_abort(c, 10, &round),
				 DL_ETIMEDOUT);
	assert_true(control_in_place(c));
	/* the agent's step bound and its rejoin bound, when shorter */
	assert_int_equal(control_membership_wait_ms(c, 300000), 500);
	assert_int_equal(control_membership_wait_ms(c, 400), 400);
	/* no membership comes: the wait ends at the agent's bound */
	t0 = clock_now_ms();
	assert_int_equal(control_wait_membership(
			     c, 1, control_membership_wait_ms(c, 300000), &m),
			 DL_ETIMEDOUT);
	assert_true(clock_now_ms() - t0 >= 500);
	control_close(c);
	close(sv[0]);
	unsetenv("DLAUNCH_CONTROL_FD");
	unsetenv("DLAUNCH_ROUND");
}

static void test_channel(void **state)
{
	int sv[2];
	char fdtext[16], line[256], err[256];
	struct control *c;
	struct control_membership m;
	uint64_t round;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	snprintf(fdtext, sizeof(fdtext), "%d", sv[1]);
	setenv("DLAUNCH_CONTROL_FD", fdtext, 1);
	setenv("DLAUNCH_ROUND", "3", 1);
	assert_int_equal(control_open(&c, err, sizeof(err)), 0);
	assert_non_null(c);
	read_line(sv[0], line, sizeof(line));
	assert_non_null(strstr(line, "\"hello\""));
	assert_false(control_in_place(c));
	say(sv[0], "{\"type\":\"welcome\",\"version\":1}\n");
	control_send_step(c, 5);
	read_line(sv[0], line, sizeof(line));
	assert_string_equal(line, "{\"type\":\"step\",\"step\":5}\n");
	/* the reader thread takes the welcome in its own time (bounded) */
	for (int i = 0; i < 500 && !control_in_place(c); i++)
		assert_int_equal(control_wait_abort(c, 10, &round),
				 DL_ETIMEDOUT);
	assert_true(control_in_place(c));
	control_set_abort_hook(c, count_hook, NULL);
	/* fenced: an abort of a round before the one we started in */
	say(sv[0], "{\"type\":\"abort\",\"round\":2}\n");
	say(sv[0], "{\"type\":\"abort\",\"round\":3,\"reason\":\"test\"}\n");
	assert_int_equal(control_wait_abort(c, 5000, &round), 0);
	assert_int_equal(round, 3);
	assert_int_equal(hook_calls, 1);
	control_take_abort(c);
	control_send_aborted(c, 3, 5);
	read_line(sv[0], line, sizeof(line));
	assert_string_equal(line,
			    "{\"type\":\"aborted\",\"round\":3,\"step\":5}\n");
	/* an older membership is skipped for the newer one */
	say(sv[0], "{\"type\":\"unknown-thing\"}\n");
	say(sv[0], "{\"type\":\"membership\",\"round\":4,\"rank\":0,"
		   "\"world_size\":1,\"local_rank\":0,\"local_world_size\":1,"
		   "\"node_rank\":0,\"nnodes\":1,\"master_addr\":\"h\","
		   "\"master_port\":9,\"restart_count\":1,"
		   "\"store_prefix\":\"p\"}\n");
	assert_int_equal(control_wait_membership(c, 3, 5000, &m), 0);
	assert_int_equal(m.round, 4);
	assert_int_equal(m.master_port, 9);
	/* garbage ends the channel: the worker is plain from then on */
	say(sv[0], "not json\n");
	assert_int_equal(control_wait_membership(c, 4, 5000, &m), DL_ECLOSED);
	assert_false(control_in_place(c));
	control_set_abort_hook(c, NULL, NULL);
	control_close(c);
	close(sv[0]);
	unsetenv("DLAUNCH_ROUND");

	/* a variable that names no socket is an error */
	setenv("DLAUNCH_CONTROL_FD", "x", 1);
	assert_int_equal(control_open(&c, err, sizeof(err)), DL_EINVAL);
	setenv("DLAUNCH_CONTROL_FD", "999", 1);
	assert_int_equal(control_open(&c, err, sizeof(err)), DL_EINVAL);
	unsetenv("DLAUNCH_CONTROL_FD");
	assert_int_equal(control_open(&c, err, sizeof(err)), 0);
	assert_null(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_messages),
	    cmocka_unit_test(test_parse_unknown),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_format),
	    cmocka_unit_test(test_channel),
	    cmocka_unit_test(test_channel_welcome_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
