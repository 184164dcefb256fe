/* SPDX-License-Identifier: Apache-2.0 */
/*
 * floor_spawn.c - the floor of the launch and restart benchmarks: the
 * least a launcher can do to run N workers, so that dlaunch's time can be
 * shown beside it (bench.py launch, restart).
 *
 *     floor_spawn N PROGRAM [ARG...]
 *     floor_spawn --restart STAMP N PROGRAM [ARG...]
 *
 * Starts N copies of PROGRAM at once (fork and execve in a loop, with
 * RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE set), waits for all of
 * them and exits 0 when every one exited 0, else 1. No rendezvous, no
 * output handling, no process groups: nothing but the execs.
 *
 * With --restart it stands for the second attempt of the restart
 * benchmark: it first appends "die 0 0 SECONDS" to STAMP (wall clock with
 * microseconds, like bash's $EPOCHREALTIME in restart_worker.sh), then
 * starts the workers with TORCHELASTIC_RESTART_COUNT=1, so each appends
 * its "start 1 RANK SECONDS" and exits: from the die line to the last
 * start line is the time no launcher can beat with these workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int usage(void)
{
	fprintf(stderr, "usage: floor_spawn [--restart STAMP] N PROGRAM "
			"[ARG...]\n");
	return 2;
}

/* env_with: environ plus the given NAME=VALUE strings (which replace any
 * of the same name); NULL when out of memory */
static char **env_with(char *const *extra, int n_extra)
{
	size_t n = 0, k = 0;
	char **env;
	while (environ[n])
		n++;
	env = calloc(n + (size_t)n_extra + 1, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int replaced = 0;
		for (int j = 0; j < n_extra; j++) {
			size_t len = strcspn(extra[j], "=") + 1;
			if (strncmp(environ[i], extra[j], len) == 0)
				replaced = 1;
		}
		if (!replaced)
			env[k++] = environ[i];
	}
	for (int j = 0; j < n_extra; j++)
		env[k++] = extra[j];
	return env;
}

int main(int argc, char **argv)
{
	const char *stamp = NULL;
	char *end, ws[24], restart[] = "TORCHELASTIC_RESTART_COUNT=1";
	long n;
	int first = 1, failed = 0;

	if (argc > 2 && strcmp(argv[1], "--restart") == 0) {
		stamp = argv[2];
		first = 3;
	}
	if (argc < first + 2)
		return usage();
	errno = 0;
	n = strtol(argv[first], &end, 10);
	if (errno || *end || n < 1 || n > 4096)
		return usage();
	snprintf(ws, sizeof(ws), "%ld", n);

	/* every worker's environment is made before the first fork */
	char ***envs = calloc((size_t)n, sizeof(*envs));
	char(*vars)[4][64] = calloc((size_t)n, sizeof(*vars));
	if (!envs || !vars)
		return 1;
	for (long i = 0; i < n; i++) {
		char *extra[5];
		snprintf(vars[i][0], 64, "RANK=%ld", i);
		snprintf(vars[i][1], 64, "LOCAL_RANK=%ld", i);
		snprintf(vars[i][2], 64, "WORLD_SIZE=%s", ws);
		snprintf(vars[i][3], 64, "LOCAL_WORLD_SIZE=%s", ws);
		for (int j = 0; j < 4; j++)
			extra[j] = vars[i][j];
		extra[4] = restart;
		envs[i] = env_with(extra, stamp ? 5 : 4);
		if (!envs[i])
			return 1;
	}

	if (stamp) {
		struct timespec t;
		char line[64];
		int fd = open(stamp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			      0644);
		if (fd < 0) {
			perror(stamp);
			return 1;
		}
		clock_gettime(CLOCK_REALTIME, &t);
		int len = snprintf(line, sizeof(line), "die 0 0 %lld.%06ld\n",
				   (long long)t.tv_sec, t.tv_nsec / 1000);
		if (write(fd, line, (size_t)len) != len) {
			perror(stamp);
			return 1;
		}
		close(fd);
	}
	for (long i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) {
			execve(argv[first + 1], argv + first + 1, envs[i]);
			_exit(127);
		}
		if (p < 0) {
			perror("fork");
			failed = 1;
			n = i;
			break;
		}
	}
	for (long i = 0; i < n; i++) {
		int status;
		if (wait(&status) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}
