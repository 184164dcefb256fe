/*
 * slow_spawn.c - an LD_PRELOAD shim that holds an agent in the middle of
 * starting its workers, for faults_keeper.sh ("agent SIGKILL while
 * spawning").
 *
 * dlaunch starts a round's workers from a pool of helper threads
 * (spawn_start_many); each start is one clone() (fork() in sanitizer
 * builds). The SLOW_SPAWN_AT-th such call made by a helper thread (not by
 * the main thread, which also forks the keeper) creates the file
 * SLOW_SPAWN_FILE and then never returns: that worker is never started,
 * the others are, and the agent waits for the stuck start, so it is
 * caught spawning for as long as the case needs. Only clone() with
 * CLONE_VM|CLONE_VFORK is counted (the agent's spawns; not glibc's own
 * thread creation, which uses clone3 anyway).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

static int calls;

/* hold: the caller is the chosen start: mark it and stay here */
static void maybe_hold(void)
{
	const char *at = getenv("SLOW_SPAWN_AT");
	const char *file = getenv("SLOW_SPAWN_FILE");
	int n;
	if (!at || !file || gettid() == getpid())
		return;
	n = __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST);
	if (n != atoi(at))
		return;
	close(open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
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
	maybe_hold();
	return real();
}
