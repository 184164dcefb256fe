/* SPDX-License-Identifier: Apache-2.0 */
/*
 * slow_spawn.c - an LD_PRELOAD shim that holds an agent in the middle of
 * starting its workers, for faults_keeper.sh ("agent SIGKILL while
 * spawning").
 *
 * dlaunch starts a round's workers from its main thread and a pool of
 * helper threads (spawn_start_many); each start is one clone() with
 * CLONE_VM|CLONE_VFORK (fork() in sanitizer builds). The keeper is started
 * the same way before any worker (or forked, where dlaunch-keeper is
 * missing): a fork() first is not counted, a clone() is. The
 * SLOW_SPAWN_AT-th counted start (AT >= 2, so never the keeper's) creates
 * the file SLOW_SPAWN_FILE and then never returns: that worker is never
 * started, the others are (by the other threads), and the agent waits for
 * the stuck start, so it is caught spawning for as long as the case
 * needs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int calls, forks, hold_at;
static char *hold_file;

/* the agent's workers must not inherit the shim: it is read here and
 * taken out of the environment they are given */
__attribute__((constructor)) static void slow_spawn_init(void)
{
	const char *at = getenv("SLOW_SPAWN_AT");
	const char *file = getenv("SLOW_SPAWN_FILE");
	if (at && file) {
		hold_at = atoi(at);
		hold_file = strdup(file);
	}
	unsetenv("SLOW_SPAWN_AT");
	unsetenv("SLOW_SPAWN_FILE");
	unsetenv("LD_PRELOAD");
}

/* maybe_hold: when the caller is the chosen start, mark it and stay */
static void maybe_hold(void)
{
	if (!hold_file ||
	    __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) != hold_at)
		return;
	close(open(hold_file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	for (;;)
		pause();
}

int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	static int (*real)(int (*)(void *), void *, int, void *, ...);
	va_list ap;
	pid_t *ptid;
	void *tls;
	pid_t *ctid;
	if (!real)
		real = (int (*)(int (*)(void *), void *, int, void *,
				...))dlsym(RTLD_NEXT, "clone");
	va_start(ap, arg);
	ptid = va_arg(ap, pid_t *);
	tls = va_arg(ap, void *);
	ctid = va_arg(ap, pid_t *);
	va_end(ap);
	if ((flags & (CLONE_VM | CLONE_VFORK)) == (CLONE_VM | CLONE_VFORK))
		maybe_hold();
	return real(fn, stack, flags, arg, ptid, tls, ctid);
}

pid_t fork(void)
{
	static pid_t (*real)(void);
	if (!real)
		real = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	/* the first is the keeper's */
	if (__atomic_add_fetch(&forks, 1, __ATOMIC_SEQ_CST) > 1)
		maybe_hold();
	return real();
}
