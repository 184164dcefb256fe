/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_keeper_record.c - the strict parser of an agent's record
 * (agent/keeper/keeper_record.c, record_parse): what record_write writes reads
 * back the same; an unknown, repeated or missing line, trailing junk, a
 * sign, an overflow, a field too long and too many groups each make the
 * whole record unreadable, with nothing left allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../agent/keeper/keeper_record.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"

#define HEAD                                                                   \
	"dlaunch-record 1\n"                                                   \
	"boot 0b1d-42\n"                                                       \
	"job train\n"

static int parse(const char *text, struct record *r)
{
	return record_parse(text, strlen(text), r);
}

/* a failed parse leaves nothing to free */
static void assert_rejected(const char *text, int code)
{
	struct record r;
	assert_int_equal(parse(text, &r), code);
	assert_null(r.pgids);
	assert_null(r.starts);
	assert_int_equal(r.n, 0);
}

static void test_round_trip(void **state)
{
	char path[] = "/tmp/test_keeper_record.XXXXXX";
	pid_t pgids[] = {100, 2147483647};
	uint64_t starts[] = {0, UINT64_MAX};
	struct record w = {
	    .agent = 77,
	    .agent_start = 123456789,
	    .pgids = pgids,
	    .starts = starts,
	    .n = 2,
	};
	struct record r;
	char *text;
	size_t len;
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(w.boot_id, sizeof(w.boot_id), "0b1d-42");
	snprintf(w.job, sizeof(w.job), "train");
	snprintf(w.cgroup, sizeof(w.cgroup), "/sys/fs/cgroup/a b/dlaunch");
	assert_int_equal(record_write(path, &w), 0);
	assert_int_equal(fs_read_file(path, 1 << 20, &text, &len), 0);
	unlink(path);
	assert_int_equal(record_parse(text, len, &r), 0);
	free(text);
	assert_string_equal(r.boot_id, "0b1d-42");
	assert_string_equal(r.job, "train");
	assert_string_equal(r.cgroup, "/sys/fs/cgroup/a b/dlaunch");
	assert_int_equal(r.agent, 77);
	assert_int_equal(r.agent_start, 123456789);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.pgids[0], 100);
	assert_int_equal(r.starts[0], 0);
	assert_int_equal(r.pgids[1], 2147483647);
	assert_true(r.starts[1] == UINT64_MAX);
	record_release(&r);

	/* no cgroup, no group: lines in any order */
	assert_int_equal(parse("dlaunch-record 1\nagent 5 6\ncgroup -\n"
			       "job j\nboot b\n",
			       &r),
			 0);
	assert_string_equal(r.cgroup, "");
	assert_int_equal(r.agent, 5);
	assert_int_equal(r.n, 0);
	record_release(&r);
}

static void test_rejected(void **state)
{
	(void)state;
	/* the first line */
	assert_rejected("", DL_EINVAL);
	assert_rejected("dlaunch-record 2\nboot b\njob j\nagent 1 1\n"
			"cgroup -\n",
			DL_EINVAL);
	assert_rejected("dlaunch-record 1 \nboot b\njob j\nagent 1 1\n"
			"cgroup -\n",
			DL_EINVAL);
	/* a missing line */
	assert_rejected(HEAD "agent 1 1\n", DL_EINVAL);
	assert_rejected(HEAD "cgroup -\n", DL_EINVAL);
	assert_rejected("dlaunch-record 1\nboot b\nagent 1 1\ncgroup -\n",
			DL_EINVAL);
	/* an unknown word, a repeated line, an empty or unended one */
	assert_rejected(HEAD "agent 1 1\ncgroup -\nflavour x\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup -\nboot c\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\nagent 2 2\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ncgroup /x\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\n\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup 3 4", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup \n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup\n", DL_EINVAL);
	/* a space where one value is expected */
	assert_rejected("dlaunch-record 1\nboot b c\njob j\nagent 1 1\n"
			"cgroup -\n",
			DL_EINVAL);
	assert_rejected("dlaunch-record 1\nboot b\njob j k\nagent 1 1\n"
			"cgroup -\n",
			DL_EINVAL);
	/* numbers: trailing junk, too many, too few, signs, zero, overflow */
	assert_rejected(HEAD "agent 1 1x\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1x 1\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1 1\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1  1\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent -1 1\ncgroup -\n", DL_ERANGE);
	assert_rejected(HEAD "agent 1 -1\ncgroup -\n", DL_EINVAL);
	assert_rejected(HEAD "agent 0 1\ncgroup -\n", DL_ERANGE);
	assert_rejected(HEAD "agent 2147483648 1\ncgroup -\n", DL_ERANGE);
	assert_rejected(HEAD "agent 1 18446744073709551616\ncgroup -\n",
			DL_ERANGE);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup 0 1\n", DL_ERANGE);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup 3 4 5\n", DL_EINVAL);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup 3 99999999999999999"
			     "999999\n",
			DL_ERANGE);
	assert_rejected(HEAD "agent 1 1\ncgroup -\ngroup 3 "
			     "000000000000000000000000001\n",
			DL_EINVAL);
	/* a NUL inside a line */
	{
		static const char nul[] =
		    HEAD "agent 1 1\ncgroup -\ngroup 3\0 4\n";
		struct record r;
		assert_int_equal(record_parse(nul, sizeof(nul) - 1, &r),
				 DL_EINVAL);
		assert_null(r.pgids);
	}
}

static void test_limits(void **state)
{
	char big[400];
	const size_t groups = 65537;
	char *text = malloc(64 + groups * 16);
	size_t len;
	struct record r;
	(void)state;
	/* a boot id over its 63 bytes */
	memset(big, 'b', 64);
	big[64] = '\0';
	snprintf(text, 64 + groups * 16,
		 "dlaunch-record 1\nboot %s\njob j\nagent 1 1\ncgroup -\n",
		 big);
	assert_rejected(text, DL_ELIMIT);
	/* 65536 groups are read; one more is refused */
	len = (size_t)sprintf(text, "%s", HEAD "agent 1 1\ncgroup -\n");
	for (size_t i = 0; i < groups - 1; i++)
		len += (size_t)sprintf(text + len, "group %zu 7\n", i + 1);
	assert_int_equal(record_parse(text, len, &r), 0);
	assert_int_equal(r.n, 65536);
	assert_int_equal(r.pgids[65535], 65536);
	record_release(&r);
	len += (size_t)sprintf(text + len, "group 9 9\n");
	assert_int_equal(record_parse(text, len, &r), DL_ELIMIT);
	assert_null(r.pgids);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_rejected),
	    cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
