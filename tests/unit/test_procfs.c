/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_procfs.c - the one /proc/PID/stat reader (common/procfs.c): a comm
 * with spaces and parentheses, every field checked (trailing junk, a sign
 * where none belongs, overflow, a short line), signed fields read, and
 * real processes: this one, a child that renamed itself, the same child
 * as a zombie, and once reaped, gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/procfs.h"

/* a line of the kernel's form; the comm "py thon) x" and 22 fields after
 * it: ppid 1, pgrp and session 4242, tpgid -1, utime 150, stime 50,
 * priority -21, 7 threads, starttime 12345 */
#define GOOD                                                                   \
	"4242 (py thon) x) S 1 4242 4242 0 -1 4194304 100 0 0 0 150 50 0 0 "   \
	"-21 0 7 0 12345 0 0\n"

/* GOOD with one field replaced: field f (proc(5)'s numbering, 4 = ppid)
 * becomes v */
static void with_field(int f, const char *v, char *out, size_t size)
{
	const char *fields[] = {"1",	   "4242", "4242", "0",	   "-1",
				"4194304", "100",  "0",	   "0",	   "0",
				"150",	   "50",   "0",	   "0",	   "-21",
				"0",	   "7",	   "0",	   "12345"};
	size_t len = (size_t)snprintf(out, size, "4242 (py thon) x) S");
	for (int i = 0; i < 19; i++)
		len += (size_t)snprintf(out + len, size - len, " %s",
					i + 4 == f ? v : fields[i]);
	snprintf(out + len, size - len, " 0 0\n");
}

static void test_parse_good(void **state)
{
	struct procfs_stat st;
	(void)state;
	assert_int_equal(procfs_parse_stat(GOOD, &st), 0);
	assert_string_equal(st.comm, "py thon) x");
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.pgid, 4242);
	assert_int_equal(st.sid, 4242);
	assert_int_equal(st.utime, 150);
	assert_int_equal(st.stime, 50);
	assert_int_equal(st.threads, 7);
	assert_int_equal(st.start, 12345);
	/* nested parentheses, and a line that ends at starttime */
	assert_int_equal(procfs_parse_stat("77 ((a) (b)) Z 9 77 77 0 0 0 0 0 0 "
					   "0 1 2 0 0 20 0 1 0 555",
					   &st),
			 0);
	assert_string_equal(st.comm, "(a) (b)");
	assert_int_equal(st.state, 'Z');
	assert_int_equal(st.ppid, 9);
	assert_int_equal(st.start, 555);
	/* an empty comm; a comm longer than the struct's is cut */
	assert_int_equal(procfs_parse_stat("5 () R 1 5 5 0 0 0 0 0 0 0 0 0 0 0 "
					   "20 0 1 0 9",
					   &st),
			 0);
	assert_string_equal(st.comm, "");
	{
		char line[512], comm[100];
		memset(comm, 'c', sizeof(comm) - 1);
		comm[sizeof(comm) - 1] = '\0';
		snprintf(line, sizeof(line),
			 "6 (%s) R 1 6 6 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 9",
			 comm);
		assert_int_equal(procfs_parse_stat(line, &st), 0);
		assert_int_equal(strlen(st.comm), sizeof(st.comm) - 1);
		assert_int_equal(st.start, 9);
	}
}

static void test_parse_bad(void **state)
{
	struct procfs_stat st;
	char line[512];
	(void)state;
	assert_int_equal(procfs_parse_stat("", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("no paren", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("1 (x", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("1 x) S 1", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("1 (x)S 1", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("1 (x) S", &st), DL_EINVAL);
	assert_int_equal(procfs_parse_stat("1 (x) SS 1", &st), DL_EINVAL);
	/* short: the line ends before starttime */
	assert_int_equal(procfs_parse_stat("4242 (x) S 1 2", &st), DL_EINVAL);
	assert_int_equal(
	    procfs_parse_stat("4242 (x) S 1 4242 4242 0 -1 4194304 "
			      "100 0 0 0 150 50 0 0 20 0 7 0",
			      &st),
	    DL_EINVAL);
	/* two spaces: an empty field */
	assert_int_equal(procfs_parse_stat("4242 (x) S  1 4242 4242 0 -1 0 0 0 "
					   "0 0 150 50 0 0 20 0 7 0 12345",
					   &st),
			 DL_EINVAL);
	/* trailing junk in a field, every position */
	for (int f = 4; f <= 22; f++) {
		with_field(f, "12x", line, sizeof(line));
		assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
		with_field(f, "", line, sizeof(line));
		assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
		with_field(f, "+", line, sizeof(line));
		assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
	}
	/* a sign where proc(5) has none */
	for (int f = 4; f <= 22; f++) {
		int is_signed = f == 7 || f == 8 || f == 16 || f == 17 ||
				f == 18 || f == 19 || f == 20 || f == 21;
		with_field(f, "-1", line, sizeof(line));
		assert_int_equal(procfs_parse_stat(line, &st),
				 is_signed && f != 20 ? 0 : DL_EINVAL);
	}
	/* overflow: past 64 bits, past a pid, past the field's length */
	with_field(22, "18446744073709551616", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
	with_field(22, "18446744073709551615", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), 0);
	assert_true(st.start == UINT64_MAX);
	with_field(4, "2147483648", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
	with_field(4, "2147483647", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), 0);
	assert_int_equal(st.ppid, 2147483647);
	with_field(8, "-9223372036854775809", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
	with_field(14, "0000000000000000000000150", line, sizeof(line));
	assert_int_equal(procfs_parse_stat(line, &st), DL_EINVAL);
}

static void test_read_self(void **state)
{
	struct procfs_stat st;
	(void)state;
	assert_int_equal(procfs_read_stat(getpid(), &st), 0);
	assert_int_equal(st.state, 'R');
	assert_int_equal(st.ppid, getppid());
	assert_int_equal(st.pgid, getpgrp());
	assert_int_equal(st.sid, getsid(0));
	assert_true(st.threads >= 1);
	assert_true(st.start > 0);
	/* no such process */
	assert_int_equal(procfs_read_stat(0x7ffffff0, &st), DL_ENOTFOUND);
}

/* wait_state: polls pid's stat until its state is want (5 s at most) */
static int wait_state(pid_t pid, char want, struct procfs_stat *st)
{
	uint64_t deadline = clock_now_ms() + 5000;
	struct timespec ms = {0, 1000000};
	while (clock_now_ms() < deadline) {
		if (procfs_read_stat(pid, st) == 0 && st->state == want)
			return 0;
		nanosleep(&ms, NULL);
	}
	return -1;
}

/* a child that names itself "a) (b c" and waits; then killed: a zombie
 * (its stat still there, state Z); then reaped: gone */
static void test_child_zombie_gone(void **state)
{
	struct procfs_stat st, before;
	int fds[2], status;
	char c;
	pid_t pid;
	(void)state;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		prctl(PR_SET_NAME, "a) (b c", 0, 0, 0);
		if (write(fds[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	assert_int_equal(wait_state(pid, 'S', &before), 0);
	assert_string_equal(before.comm, "a) (b c");
	assert_int_equal(before.ppid, getpid());
	assert_int_equal(before.pgid, getpgrp());
	assert_int_equal(before.threads, 1);

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(wait_state(pid, 'Z', &st), 0);
	assert_int_equal(st.ppid, getpid());
	assert_true(st.start == before.start);

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(procfs_read_stat(pid, &st), DL_ENOTFOUND);
}

static void test_read_small(void **state)
{
	char path[] = "/tmp/test_procfs.XXXXXX", buf[8];
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "0123456789", 10), 10);
	close(fd);
	/* cut to the buffer, NUL-terminated */
	assert_int_equal(procfs_read_small(path, buf, sizeof(buf)), 7);
	assert_string_equal(buf, "0123456");
	assert_int_equal(unlink(path), 0);
	errno = 0;
	assert_int_equal(procfs_read_small(path, buf, sizeof(buf)), -1);
	assert_int_equal(errno, ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_read_self),
	    cmocka_unit_test(test_child_zombie_gone),
	    cmocka_unit_test(test_read_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
