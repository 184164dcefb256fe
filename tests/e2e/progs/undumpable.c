/* SPDX-License-Identifier: Apache-2.0 */
/*
 * undumpable.c - a worker for the hang tests (tests/e2e/agent_hang.sh)
 * whose stuck rank cannot be dumped, each a real fault:
 *
 *   undumpable zombie   its main thread leaves with pthread_exit while
 *                       another thread goes on (the leader shows Z, the
 *                       process lives on);
 *   undumpable dsleep   it vfork()s a child that sleeps without exec: the
 *                       parent waits in uninterruptible sleep (D), where
 *                       ptrace cannot stop it; with UNDUMP_RELEASE set,
 *                       the child exits once that file exists and the
 *                       parent prints "released" and ticks on;
 *   undumpable traced   a child of its own traces it (PTRACE_SEIZE),
 *                       forwarding its signals, so no other tracer may
 *                       attach (ptrace refused, even for root).
 *
 * Every rank prints "tick N" every 100 ms and reports it as step N on
 * the control channel (DLAUNCH_CONTROL_FD, docs/worker-protocol.md), so
 * the analysis sees whose step stopped first; the rank UNDUMP_RANK names
 * (default 1) prints "entering MODE, pid PID" after its third tick and then
 * never again. Writes nothing but its output; stops on SIGTERM like any worker.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *blocked_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void zombie(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, blocked_thread, NULL) != 0) {
		fprintf(stderr, "undumpable: pthread_create failed\n");
		exit(1);
	}
	pthread_exit(NULL);
}

static void dsleep(void)
{
	const char *release = getenv("UNDUMP_RELEASE");
	pid_t child = vfork();
	if (child == 0) {
		/* the parent is held in the kernel until this exits or
		 * execs; only system calls here, the stack is the parent's */
		for (;;) {
			struct timespec ts = {0, 100 * 1000000L};
			if (release && access(release, F_OK) == 0)
				_exit(0);
			nanosleep(&ts, NULL);
		}
	}
	if (child < 0) {
		fprintf(stderr, "undumpable: vfork failed: %s\n",
			strerror(errno));
		exit(1);
	}
	waitpid(child, NULL, 0);
	printf("released\n");
	fflush(stdout);
}

static int traced_by_someone(void)
{
	char line[256];
	int traced = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "TracerPid:", 10) == 0)
			traced = strtol(line + 10, NULL, 10) != 0;
	fclose(f);
	return traced;
}

/* tracer_main: seize the parent and pass its signals on until it ends
 * (or this dies with the worker's process group) */
static void tracer_main(pid_t tracee)
{
	int tries = 0;
	while (ptrace(PTRACE_SEIZE, tracee, NULL, NULL) != 0) {
		/* the parent allows us (PR_SET_PTRACER) just after fork */
		if (++tries > 500) {
			perror("undumpable: PTRACE_SEIZE");
			_exit(1);
		}
		nap_ms(10);
	}
	for (;;) {
		int st;
		pid_t r = waitpid(tracee, &st, __WALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st))
			_exit(0);
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) == PTRACE_EVENT_STOP)
			ptrace(PTRACE_LISTEN, tracee, NULL, NULL);
		else
			ptrace(PTRACE_CONT, tracee, NULL,
			       (void *)(long)WSTOPSIG(st));
	}
}

static void traced(void)
{
	pid_t me = getpid(), child = fork();
	if (child < 0) {
		fprintf(stderr, "undumpable: fork failed\n");
		exit(1);
	}
	if (child == 0)
		tracer_main(me);
	prctl(PR_SET_PTRACER, (unsigned long)child, 0, 0, 0);
	for (int i = 0; !traced_by_someone(); i++) {
		if (i > 500) {
			fprintf(stderr, "undumpable: the tracer never came\n");
			exit(1);
		}
		nap_ms(10);
	}
	for (;;)
		pause();
}

/* control_fd: the agent's control channel, after our hello; -1 if none */
static int control_fd(void)
{
	static const char hello[] =
	    "{\"type\":\"hello\",\"version\":1,\"handles\":[]}\n";
	const char *v = getenv("DLAUNCH_CONTROL_FD");
	char *end;
	long fd = v ? strtol(v, &end, 10) : -1;
	if (!v || end == v || *end || fd < 0 || fd > 1024 ||
	    write((int)fd, hello, sizeof(hello) - 1) < 0)
		return -1;
	return (int)fd;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *rank = getenv("RANK"), *stuck = getenv("UNDUMP_RANK");
	int is_stuck;
	if (strcmp(mode, "zombie") && strcmp(mode, "dsleep") &&
	    strcmp(mode, "traced")) {
		fprintf(stderr, "usage: undumpable zombie|dsleep|traced\n");
		return 2;
	}
	int ctl = control_fd();
	is_stuck = rank && !strcmp(rank, stuck ? stuck : "1");
	for (long n = 1;; n++) {
		printf("tick %ld\n", n);
		fflush(stdout);
		if (ctl >= 0) {
			char line[64];
			int len =
			    snprintf(line, sizeof(line),
				     "{\"type\":\"step\",\"step\":%ld}\n", n);
			if (write(ctl, line, (size_t)len) < 0)
				ctl = -1;
		}
		if (is_stuck && n == 3) {
			printf("entering %s, pid %ld\n", mode, (long)getpid());
			fflush(stdout);
			if (!strcmp(mode, "zombie"))
				zombie();
			else if (!strcmp(mode, "dsleep"))
				dsleep();
			else
				traced();
		}
		nap_ms(100);
	}
}
