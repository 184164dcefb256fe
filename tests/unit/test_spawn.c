/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_spawn.c - the spawn function: resolution, exec errors, process
 * group, descriptors, signal reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlaunch/error.h"
#include "dlaunch/spawn.h"

static int run_capture(char *const *argv, char *out, size_t size, int *status)
{
	struct spawn_opts o;
	char err[256];
	int p[2], rc;
	pid_t pid;
	size_t got = 0;
	ssize_t n;
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	memset(&o, 0, sizeof(o));
	o.file = argv[0];
	o.argv = argv;
	o.stdin_fd = -1;
	o.stdout_fd = p[1];
	o.stderr_fd = -1;
	rc = spawn_process(&o, &pid, err, sizeof(err));
	close(p[1]);
	if (rc) {
		close(p[0]);
		return rc;
	}
	while ((n = read(p[0], out + got, size - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	waitpid(pid, status, 0);
	return 0;
}

static void test_missing_program(void **state)
{
	struct spawn_opts o;
	char *argv[] = {"dlaunch-no-such-program", NULL};
	char err[256];
	pid_t pid = 0;
	(void)state;
	memset(&o, 0, sizeof(o));
	o.file = argv[0];
	o.argv = argv;
	o.stdin_fd = o.stdout_fd = o.stderr_fd = -1;
	assert_int_equal(spawn_process(&o, &pid, err, sizeof(err)),
			 DL_ENOTFOUND);
	assert_non_null(strstr(err, "dlaunch-no-such-program"));
	assert_int_equal(pid, 0);
	o.file = "/nonexistent/prog";
	assert_int_equal(spawn_process(&o, &pid, err, sizeof(err)),
			 DL_ENOTFOUND);
	assert_non_null(strstr(err, "/nonexistent/prog"));
}

/* make_unrunnable fills the mkstemp template path with an executable
 * file that is not a valid program: exec fails on it with ENOEXEC */
static void make_unrunnable(char *path)
{
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd,
			       "\x7f"
			       "ELF garbage",
			       12),
			 12);
	close(fd);
	chmod(path, 0755);
}

static void test_exec_error_reported(void **state)
{
	char path[] = "/tmp/dlaunch-spawn-XXXXXX";
	char *argv[] = {path, NULL};
	struct spawn_opts o;
	char err[256];
	pid_t pid;
	(void)state;
	make_unrunnable(path);
	memset(&o, 0, sizeof(o));
	o.file = path;
	o.argv = argv;
	o.stdin_fd = o.stdout_fd = o.stderr_fd = -1;
	assert_int_not_equal(spawn_process(&o, &pid, err, sizeof(err)), 0);
	assert_non_null(strstr(err, path));
	/* no zombie left: the spawn reaped the failed child */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	unlink(path);
}

/* Two-step spawns: several children forked before any exec is waited for;
 * a failed exec among them is reported for that child alone, and its
 * status pipe does not leak into the others. */
static void test_start_then_finish(void **state)
{
	char bad[] = "/tmp/dlaunch-spawn-XXXXXX";
	char *ok_argv[] = {"/bin/sh", "-c", "exit 7", NULL};
	char *bad_argv[] = {bad, NULL};
	struct spawn_opts ok, ko;
	struct spawn_child c[3];
	char err[256];
	pid_t pid[3];
	int status;
	(void)state;
	make_unrunnable(bad);
	memset(&ok, 0, sizeof(ok));
	ok.file = ok_argv[0];
	ok.argv = ok_argv;
	ok.stdin_fd = ok.stdout_fd = ok.stderr_fd = -1;
	ko = ok;
	ko.file = bad;
	ko.argv = bad_argv;
	assert_int_equal(spawn_start(&ok, &c[0], err, sizeof(err)), 0);
	assert_int_equal(spawn_start(&ko, &c[1], err, sizeof(err)), 0);
	assert_int_equal(spawn_start(&ok, &c[2], err, sizeof(err)), 0);
	assert_int_equal(spawn_finish(&c[0], &pid[0], err, sizeof(err)), 0);
	assert_int_not_equal(spawn_finish(&c[1], &pid[1], err, sizeof(err)), 0);
	assert_non_null(strstr(err, bad));
	assert_int_equal(spawn_finish(&c[2], &pid[2], err, sizeof(err)), 0);
	for (int i = 0; i < 3; i += 2) {
		assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 7);
	}
	/* the failed one was reaped by spawn_finish: nothing is left */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	unlink(bad);
}

/* spawn_start_many: many children under way at once, from helper
 * threads; a failed exec among them is reported for that one alone; the
 * others run to their end (not killed by a helper's parent-death signal:
 * the helpers outlive them), each in its own group; and a watched child
 * writes its notice before it execs. */
static void test_start_many(void **state)
{
	enum { N = 12 };
	char bad[] = "/tmp/dlaunch-spawn-XXXXXX";
	char *ok_argv[] = {"/bin/sh", "-c", "sleep 0.2; exit 5", NULL};
	char *bad_argv[] = {bad, NULL};
	struct spawn_opts o[N];
	struct spawn_child c[N];
	struct spawn_watch w = {-1, -1};
	struct spawn_notice notes[N + 1];
	char errs[N][256];
	int rc[N], p[2], status, seen[N] = {0};
	pid_t pid[N];
	ssize_t got;
	(void)state;
	make_unrunnable(bad);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	w.notify_fd = p[1];
	for (int i = 0; i < N; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		o[i].file = i == 5 ? bad : ok_argv[0];
		o[i].argv = i == 5 ? bad_argv : ok_argv;
		o[i].stdin_fd = o[i].stdout_fd = o[i].stderr_fd = -1;
		o[i].watch = &w;
	}
	spawn_start_many(o, c, rc, &errs[0][0], sizeof(errs[0]), N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(rc[i], 0);
		if (i == 5) {
			assert_int_not_equal(
			    spawn_finish(&c[i], &pid[i], errs[i], 256), 0);
			assert_non_null(strstr(errs[i], bad));
		} else {
			assert_int_equal(
			    spawn_finish(&c[i], &pid[i], errs[i], 256), 0);
		}
	}
	/* every child, the failed one too, announced itself before exec */
	close(p[1]);
	got = read(p[0], notes, sizeof(notes));
	close(p[0]);
	assert_int_equal(got, (ssize_t)(N * sizeof(notes[0])));
	for (int k = 0; k < N; k++) {
		assert_int_equal(notes[k].kind, SPAWN_NOTICE_STARTED);
		for (int i = 0; i < N; i++)
			if (c[i].pid == notes[k].pid)
				seen[i]++;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(seen[i], 1);
		if (i == 5)
			continue;
		assert_int_equal(getpgid(pid[i]), pid[i]);
		assert_int_equal(waitpid(pid[i], &status, 0), pid[i]);
		/* ran to its end: not killed when its starter went idle */
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 5);
	}
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	unlink(bad);
}

/* cgroup_dir: a fresh cgroup v2 directory below ours when this machine
 * lets us make one (root, or delegation), else 0 */
static int cgroup_dir(char *out, size_t size)
{
	char line[2048], rel[2048] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	const char *mnt = NULL;
	static const char *const mounts[] = {"/sys/fs/cgroup/unified",
					     "/sys/fs/cgroup"};
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(rel, sizeof(rel), "%s", line + 3);
		}
	fclose(f);
	for (size_t i = 0; i < 2 && rel[0] == '/'; i++) {
		char probe[4200];
		snprintf(probe, sizeof(probe), "%s%s/cgroup.procs", mounts[i],
			 strcmp(rel, "/") == 0 ? "" : rel);
		if (access(probe, W_OK) == 0) {
			mnt = mounts[i];
			break;
		}
	}
	if (!mnt)
		return 0;
	snprintf(out, size, "%s%s/dlaunch-test.%ld", mnt,
		 strcmp(rel, "/") == 0 ? "" : rel, (long)getpid());
	return mkdir(out, 0755) == 0;
}

/* a watched child with a cgroup starts inside it */
static void test_start_in_cgroup(void **state)
{
	char dir[4300], out[512], want[4400];
	char *argv[] = {"/bin/sh", "-c", "cat /proc/self/cgroup", NULL};
	struct spawn_watch w = {-1, -1};
	struct spawn_opts o;
	struct spawn_child c;
	int p[2], status, rc;
	char err[256];
	pid_t pid;
	ssize_t n;
	(void)state;
	if (!cgroup_dir(dir, sizeof(dir))) {
		skip(); /* no cgroup v2 of ours here */
		return;
	}
	w.cgroup_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(w.cgroup_fd >= 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	memset(&o, 0, sizeof(o));
	o.file = argv[0];
	o.argv = argv;
	o.stdin_fd = o.stderr_fd = -1;
	o.stdout_fd = p[1];
	o.watch = &w;
	spawn_start_many(&o, &c, &rc, err, sizeof(err), 1);
	assert_int_equal(rc, 0);
	assert_int_equal(spawn_finish(&c, &pid, err, sizeof(err)), 0);
	close(p[1]);
	n = read(p[0], out, sizeof(out) - 1);
	close(p[0]);
	assert_true(n > 0);
	out[n] = '\0';
	assert_int_equal(waitpid(pid, &status, 0), pid);
	close(w.cgroup_fd);
	rmdir(dir);
	assert_int_equal(c.cgroup_errno, 0);
	snprintf(want, sizeof(want), "/dlaunch-test.%ld\n", (long)getpid());
	assert_non_null(strstr(out, want));
}

static void test_own_group_and_fds(void **state)
{
	char out[512];
	int status, extra = open("/dev/null", O_RDONLY); /* not CLOEXEC */
	char *argv[] = {"/bin/sh", "-c",
			"echo pgid=$(ps -o pgid= -p $$ | tr -d ' ') pid=$$; "
			"ls /proc/self/fd | wc -l",
			NULL};
	(void)state;
	assert_true(extra >= 0);
	assert_int_equal(run_capture(argv, out, sizeof(out), &status), 0);
	close(extra);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unsigned long pgid = 0, pid = 1;
	assert_int_equal(sscanf(out, "pgid=%lu pid=%lu", &pgid, &pid), 2);
	assert_int_equal(pgid, pid);
	/* ls sees 0, 1, 2 and its own directory fd: nothing leaked */
	assert_non_null(strstr(out, "\n4\n"));
}

/* keep_fd: that one descriptor (close-on-exec in the parent, as the
 * agent's are) reaches the program at its number, and nothing else does;
 * the program can write to the other end through it */
static void test_keep_fd(void **state)
{
	struct spawn_opts o;
	char err[256], cmd[160], got[64] = "";
	int sv[2], status, p[2];
	pid_t pid;
	ssize_t n;
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	if (sv[1] <= 2) { /* never here: the test's stdio is open */
		int hi = fcntl(sv[1], F_DUPFD_CLOEXEC, 3);
		close(sv[1]);
		sv[1] = hi;
	}
	snprintf(cmd, sizeof(cmd),
		 "echo kept >&%d; ls /proc/self/fd | wc -l | tr -d ' \n'",
		 sv[1]);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	memset(&o, 0, sizeof(o));
	o.file = argv[0];
	o.argv = argv;
	o.stdin_fd = -1;
	o.stdout_fd = p[1];
	o.stderr_fd = -1;
	o.keep_fd = sv[1];
	assert_int_equal(spawn_process(&o, &pid, err, sizeof(err)), 0);
	close(p[1]);
	close(sv[1]);
	n = read(sv[0], got, sizeof(got) - 1);
	assert_true(n > 0);
	got[n] = '\0';
	assert_string_equal(got, "kept\n");
	n = read(p[0], got, sizeof(got) - 1);
	assert_true(n > 0);
	got[n] = '\0';
	/* 0, 1, 2, the kept one and ls's own directory */
	assert_string_equal(got, "5");
	close(p[0]);
	close(sv[0]);
	waitpid(pid, &status, 0);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_signals_reset(void **state)
{
	char out[256];
	int status;
	char *argv[] = {"/bin/sh", "-c",
			"grep -E '^(SigBlk|SigIgn)' /proc/self/status", NULL};
	sigset_t block;
	(void)state;
	signal(SIGUSR1, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	sigprocmask(SIG_BLOCK, &block, NULL);
	assert_int_equal(run_capture(argv, out, sizeof(out), &status), 0);
	signal(SIGUSR1, SIG_DFL);
	sigprocmask(SIG_UNBLOCK, &block, NULL);
	assert_non_null(strstr(out, "SigBlk:\t0000000000000000"));
	/* Signals 32 and 33 are glibc's own (thread cancellation, setxid):
	 * its sigaction refuses to change them, and a parent such as make may
	 * leave them ignored; every glibc program installs its handlers for
	 * them at start. Every other signal must be back to its default. */
	const char *ign = strstr(out, "SigIgn:\t");
	assert_non_null(ign);
	unsigned long long mask = strtoull(ign + 8, NULL, 16);
	assert_true((mask & ~0x180000000ull) == 0);
}

static void test_signal_names(void **state)
{
	char tmp[16];
	int sig;
	(void)state;
	assert_string_equal(spawn_signal_name(SIGKILL, tmp, sizeof(tmp)),
			    "SIGKILL");
	assert_string_equal(spawn_signal_name(63, tmp, sizeof(tmp)), "SIG63");
	assert_int_equal(spawn_signal_parse("TERM", &sig), 0);
	assert_int_equal(sig, SIGTERM);
	assert_int_equal(spawn_signal_parse("SIGhup", &sig), 0);
	assert_int_equal(sig, SIGHUP);
	assert_int_equal(spawn_signal_parse("9", &sig), 0);
	assert_int_equal(sig, 9);
	assert_int_equal(spawn_signal_parse("SIGNOPE", &sig), DL_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_missing_program),
	    cmocka_unit_test(test_exec_error_reported),
	    cmocka_unit_test(test_own_group_and_fds),
	    cmocka_unit_test(test_keep_fd),
	    cmocka_unit_test(test_start_then_finish),
	    cmocka_unit_test(test_start_many),
	    cmocka_unit_test(test_start_in_cgroup),
	    cmocka_unit_test(test_signals_reset),
	    cmocka_unit_test(test_signal_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
