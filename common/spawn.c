/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.c - the one spawn function (see dlaunch/spawn.h).
 *
 * The program is resolved in the parent, so "no such program" is found
 * before anything is forked. The child only makes async-signal-safe calls
 * (sigaction, sigprocmask, setsid, prctl, getppid, dup2, close_range,
 * execve, write, _exit); if execve fails, its errno is written to a
 * close-on-exec pipe whose read end the parent reads in spawn_finish: EOF
 * means the exec succeeded.
 */
#include "dlaunch/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlaunch/error.h"
#include "dlaunch/parse.h"

extern char **environ;

static int executable_file(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	return access(path, X_OK) == 0;
}

int spawn_resolve(const char *file, char *out, size_t out_size, char *err,
		  size_t err_size)
{
	const char *path, *p, *colon;
	char cand[4096];
	int seen_noexec = 0;

	if (!file || !*file) {
		snprintf(err, err_size, "no program given");
		return DL_EINVAL;
	}
	if (strchr(file, '/')) {
		if (access(file, F_OK) != 0) {
			snprintf(err, err_size, "cannot run '%s': %s", file,
				 strerror(errno));
			return DL_ENOTFOUND;
		}
		if (!executable_file(file)) {
			snprintf(err, err_size,
				 "cannot run '%s': not an executable file "
				 "(for a python script use a .py name or -m)",
				 file);
			return DL_EINVAL;
		}
		if ((size_t)snprintf(out, out_size, "%s", file) >= out_size) {
			snprintf(err, err_size, "program path '%s' too long",
				 file);
			return DL_ELIMIT;
		}
		return 0;
	}
	path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; p; p = colon ? colon + 1 : NULL) {
		size_t dlen;
		colon = strchr(p, ':');
		dlen = colon ? (size_t)(colon - p) : strlen(p);
		if ((size_t)snprintf(cand, sizeof(cand), "%.*s%s%s", (int)dlen,
				     p, dlen ? "/" : "", file) >= sizeof(cand))
			continue;
		if (executable_file(cand)) {
			if ((size_t)snprintf(out, out_size, "%s", cand) >=
			    out_size)
				break;
			return 0;
		}
		if (access(cand, F_OK) == 0)
			seen_noexec = 1;
	}
	if (seen_noexec) {
		snprintf(err, err_size,
			 "cannot run '%s': found in PATH but not executable",
			 file);
		return DL_EINVAL;
	}
	snprintf(err, err_size, "cannot run '%s': program not found in PATH",
		 file);
	return DL_ENOTFOUND;
}

/* child_fail reports errno to the parent and exits; async-signal-safe. */
static void child_fail(int fd, int e)
{
	ssize_t w = write(fd, &e, sizeof(e));
	(void)w;
	_exit(127);
}

/* close_from closes every descriptor >= lo except keep_a and keep_b
 * (either may be < lo: none); async-signal-safe (close_range is a plain
 * system call). */
static void close_from(int lo, int keep_a, int keep_b)
{
	int k1 = keep_a < keep_b ? keep_a : keep_b;
	int k2 = keep_a < keep_b ? keep_b : keep_a;
	if (k1 >= lo && k1 != k2) {
		if (k1 > lo)
			syscall(SYS_close_range, (unsigned)lo, (unsigned)k1 - 1,
				0U);
		lo = k1 + 1;
	}
	if (k2 >= lo) {
		if (k2 > lo)
			syscall(SYS_close_range, (unsigned)lo, (unsigned)k2 - 1,
				0U);
		lo = k2 + 1;
	}
	syscall(SYS_close_range, (unsigned)lo, ~0U, 0U);
}

/* What the child is given. It lives in the frame of the thread that
 * starts the child, which waits until the child has exec'd. */
struct child_args {
	const struct spawn_opts *o;
	const char *path;
	int errfd, devnull;
	pid_t parent;
	int self_cgroup; /* move into o->watch->cgroup_fd by hand */
};

/* child_watch: what a watched child does before it execs; async-signal-
 * safe. A child that could not be started inside the cgroup (a clone()
 * without clone3) moves itself there; its notice goes to the keeper. A
 * failure of either leaves it to the process group alone. */
static void child_watch(const struct child_args *ca)
{
	const struct spawn_watch *w = ca->o->watch;
	struct spawn_notice n;
	ssize_t r;
	if (!w)
		return;
	if (ca->self_cgroup && w->cgroup_fd >= 0) {
		int fd =
		    openat(w->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			r = write(fd, "0", 1);
			close(fd);
		}
	}
	if (w->notify_fd >= 0) {
		n.kind = SPAWN_NOTICE_STARTED;
		n.pid = (int)getpid();
		r = write(w->notify_fd, &n, sizeof(n));
	}
	(void)r;
}

static void child(const struct child_args *ca)
{
	const struct spawn_opts *o = ca->o;
	int errfd = ca->errfd;
	struct sigaction sa;
	sigset_t none;
	int sig, in, outfd, errfd2;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL); /* fails harmlessly for some */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (!(o->flags & SPAWN_SAME_GROUP) && setsid() < 0)
		child_fail(errfd, errno);
	if (!(o->flags & SPAWN_OUTLIVE_PARENT)) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
			child_fail(errfd, errno);
		/* the parent may have died before prctl: then nobody would
		 * kill us */
		if (getppid() != ca->parent)
			_exit(127);
	}
	/* a worker lets the spawner and its children (eu-stack, gdb: the
	 * hang diagnosis) attach with ptrace under Yama's ptrace_scope 1,
	 * without root; a kernel without Yama says EINVAL, which is fine */
	if (!(o->flags & SPAWN_SAME_GROUP))
		prctl(PR_SET_PTRACER, (unsigned long)ca->parent, 0, 0, 0);
	child_watch(ca);

	in = o->stdin_fd >= 0 ? o->stdin_fd : ca->devnull;
	outfd = o->stdout_fd >= 0 ? o->stdout_fd : STDOUT_FILENO;
	errfd2 = o->stderr_fd >= 0 ? o->stderr_fd : STDERR_FILENO;
	/* dup2 onto 0..2; a source that is itself 0..2 may be overwritten
	 * by an earlier dup2, so move the sources above 2 first */
	if (in >= 0 && in <= 2 && in != STDIN_FILENO)
		in = fcntl(in, F_DUPFD, 3);
	if (outfd <= 2 && outfd != STDOUT_FILENO)
		outfd = fcntl(outfd, F_DUPFD, 3);
	if (errfd2 <= 2 && errfd2 != STDERR_FILENO)
		errfd2 = fcntl(errfd2, F_DUPFD, 3);
	if (in < 0 || outfd < 0 || errfd2 < 0)
		child_fail(errfd, errno);
	if (in != STDIN_FILENO && dup2(in, STDIN_FILENO) < 0)
		child_fail(errfd, errno);
	if (outfd != STDOUT_FILENO && dup2(outfd, STDOUT_FILENO) < 0)
		child_fail(errfd, errno);
	if (errfd2 != STDERR_FILENO && dup2(errfd2, STDERR_FILENO) < 0)
		child_fail(errfd, errno);
	/* dup2 clears close-on-exec on the copies; clear it on 0..2 even
	 * when no dup2 happened */
	fcntl(STDIN_FILENO, F_SETFD, 0);
	fcntl(STDOUT_FILENO, F_SETFD, 0);
	fcntl(STDERR_FILENO, F_SETFD, 0);
	/* the kept descriptor survives exec: no close-on-exec on it */
	if (o->keep_fd > 2 && fcntl(o->keep_fd, F_SETFD, 0) < 0)
		child_fail(errfd, errno);
	close_from(3, errfd, o->keep_fd);
	if (o->cwd && chdir(o->cwd) != 0)
		child_fail(errfd, errno);
	execve(ca->path, o->argv, o->envp ? o->envp : environ);
	child_fail(errfd, errno);
}

/* The sanitizers' interceptors keep state that a child sharing our memory
 * must not touch: sanitizer builds (gcc's macros, clang's __has_feature)
 * copy the process. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPAWN_COPY_PROCESS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPAWN_COPY_PROCESS 1
#endif
#endif

#ifdef SPAWN_COPY_PROCESS
/* a copied process moves itself into the cgroup (slower: a migration may
 * wait for an RCU grace period, which does not matter in these builds) */
static pid_t start_child(struct child_args *ca, int *cgroup_errno)
{
	pid_t p;
	*cgroup_errno = 0;
	ca->self_cgroup = 1;
	p = fork();
	if (p == 0)
		child(ca);
	return p;
}
#else
static int child_entry(void *arg)
{
	child(arg);
	return 127;
}

#if defined(__x86_64__) && defined(SYS_clone3) && defined(CLONE_INTO_CGROUP)
#define SPAWN_HAVE_CLONE3 1
/*
 * clone3_vfork is clone(fn, stack, CLONE_VM | CLONE_VFORK, arg) through
 * clone3, which can also start the child inside a cgroup. The child
 * begins on its own stack at the instruction after the system call, so
 * that part is assembly: it calls fn(arg) and exits with its result
 * (fn execs or _exits first). Returns the child's pid or -errno.
 */
static long clone3_vfork(struct clone_args *args, int (*fn)(void *), void *arg)
{
	register long rax __asm__("rax") = SYS_clone3;
	register void *rdi __asm__("rdi") = args;
	register size_t rsi __asm__("rsi") = sizeof(*args);
	register int (*r12)(void *) __asm__("r12") = fn;
	register void *r13 __asm__("r13") = arg;
	__asm__ volatile("syscall\n\t"
			 "test %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "xor %%ebp, %%ebp\n\t"
			 "mov %%r13, %%rdi\n\t"
			 "call *%%r12\n\t"
			 "mov %%eax, %%edi\n\t"
			 "mov $231, %%eax\n\t" /* exit_group */
			 "syscall\n\t"
			 "hlt\n"
			 "1:\n\t"
			 : "+r"(rax)
			 : "r"(rdi), "r"(rsi), "r"(r12), "r"(r13)
			 : "rcx", "r11", "memory", "cc");
	return rax;
}
#endif

/*
 * start_child runs child() in a new process that shares our memory until
 * it execs (CLONE_VM | CLONE_VFORK, as posix_spawn does): no page tables
 * are copied, which made fork the largest cost of starting many workers.
 * The calling thread is suspended meanwhile (other threads are not: see
 * spawn_start_many), so the child may use our memory and a stack in this
 * frame. All signals stay blocked around the clone so no handler of ours
 * can run on the child's stack; child() resets every disposition before
 * it unblocks them. With a cgroup to start in, clone3 puts the child
 * there as it is created; where clone3 cannot (an older kernel, or no
 * right to that cgroup) *cgroup_errno says why and the child starts
 * outside it.
 */
static pid_t start_child(struct child_args *ca, int *cgroup_errno)
{
	char stack[64 * 1024] __attribute__((aligned(64)));
	const struct spawn_watch *w = ca->o->watch;
	sigset_t all, old;
	pid_t p = -1;
	int saved = 0, started = 0;

	*cgroup_errno = 0;
	ca->self_cgroup = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (w && w->cgroup_fd >= 0) {
#ifdef SPAWN_HAVE_CLONE3
		struct clone_args args;
		long r;
		memset(&args, 0, sizeof(args));
		args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
		args.exit_signal = SIGCHLD;
		args.stack = (uint64_t)(uintptr_t)stack;
		args.stack_size = sizeof(stack);
		args.cgroup = (uint64_t)w->cgroup_fd;
		r = clone3_vfork(&args, child_entry, ca);
		if (r >= 0) {
			p = (pid_t)r;
			started = 1;
		} else if (r == -EAGAIN || r == -ENOMEM) {
			saved =
			    (int)-r; /* no process: not the cgroup's fault */
			started = 1;
		} else {
			*cgroup_errno = (int)-r;
		}
#else
		ca->self_cgroup = 1;
#endif
	}
	if (!started) {
		p = clone(child_entry, stack + sizeof(stack),
			  CLONE_VM | CLONE_VFORK | SIGCHLD, ca);
		saved = errno;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return p;
}
#endif

int spawn_start(const struct spawn_opts *o, struct spawn_child *c, char *err,
		size_t err_size)
{
	char path[4096];
	struct child_args ca;
	int pipefd[2] = {-1, -1}, devnull = -1, rc;
	pid_t p, parent = getpid();

	c->pid = -1;
	c->status_fd = -1;
	c->file = o->file;
	c->cgroup_errno = 0;
	rc = spawn_resolve(o->file, path, sizeof(path), err, err_size);
	if (rc)
		return rc;
	if (pipe2(pipefd, O_CLOEXEC) != 0) {
		snprintf(err, err_size, "cannot run '%s': pipe: %s", o->file,
			 strerror(errno));
		return DL_ESYS;
	}
	if (o->stdin_fd < 0) {
		devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull < 0) {
			snprintf(err, err_size, "cannot open /dev/null: %s",
				 strerror(errno));
			rc = DL_ESYS;
			goto out;
		}
	}
	ca.o = o;
	ca.path = path;
	ca.errfd = pipefd[1];
	ca.devnull = devnull;
	ca.parent = parent;
	p = start_child(&ca, &c->cgroup_errno);
	if (p < 0) {
		snprintf(err, err_size, "cannot run '%s': fork: %s", o->file,
			 strerror(errno));
		rc = DL_ESYS;
		goto out;
	}
	/* closed before the next spawn, so no later child holds this pipe
	 * open and its EOF still means "exec happened" */
	close(pipefd[1]);
	pipefd[1] = -1;
	c->pid = p;
	c->status_fd = pipefd[0];
	pipefd[0] = -1;
	rc = 0;
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (devnull >= 0)
		close(devnull);
	return rc;
}

int spawn_finish(struct spawn_child *c, pid_t *pid, char *err, size_t err_size)
{
	int child_errno = 0, rc = 0;
	ssize_t n;

	do
		n = read(c->status_fd, &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(c->status_fd);
	c->status_fd = -1;
	if (n > 0) {
		/* exec failed: the child exits at once; reap it here so no
		 * zombie is left and the caller's SIGCHLD handler finds
		 * nothing of ours */
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
		snprintf(err, err_size, "cannot run '%s': %s", c->file,
			 n == (ssize_t)sizeof(child_errno)
			     ? strerror(child_errno)
			     : "exec failed");
		rc = child_errno == ENOENT ? DL_ENOTFOUND : DL_ESYS;
	} else {
		*pid = c->pid;
	}
	return rc;
}

int spawn_process(const struct spawn_opts *o, pid_t *pid, char *err,
		  size_t err_size)
{
	struct spawn_child c;
	int rc = spawn_start(o, &c, err, err_size);
	return rc ? rc : spawn_finish(&c, pid, err, err_size);
}

/*
 * spawn_start_many's helpers: a pool of threads that live as long as the
 * process. They must: PR_SET_PDEATHSIG fires when the *thread* that
 * started a child ends, so a helper that exited would kill the workers it
 * started. The pool grows to what the largest round asked, up to one
 * helper per other core (with this thread, every core starts children)
 * and SPAWN_MAX_THREADS; between rounds its threads sleep on a condition
 * variable with every signal blocked.
 */
#define SPAWN_MAX_THREADS 16

struct start_many {
	const struct spawn_opts *o;
	struct spawn_child *c;
	int *rc;
	char *errs;
	size_t err_size;
	int n;
	atomic_int next; /* the next index to start */
	int busy;	 /* helpers working on it (under pool.mu) */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct start_many *job; /* the round being started, or NULL */
	unsigned long gen;	/* counts jobs, so none is taken twice */
	int nthreads;
} pool = {PTHREAD_MUTEX_INITIALIZER,
	  PTHREAD_COND_INITIALIZER,
	  PTHREAD_COND_INITIALIZER,
	  NULL,
	  0,
	  0};

static void start_many_run(struct start_many *m)
{
	int i;
	while ((i = atomic_fetch_add(&m->next, 1)) < m->n)
		m->rc[i] =
		    spawn_start(&m->o[i], &m->c[i],
				m->errs + (size_t)i * m->err_size, m->err_size);
}

static void *pool_thread(void *arg)
{
	unsigned long seen = 0;
	(void)arg;
	pthread_mutex_lock(&pool.mu);
	for (;;) {
		struct start_many *m;
		while (!pool.job || pool.gen == seen)
			pthread_cond_wait(&pool.work, &pool.mu);
		seen = pool.gen;
		m = pool.job;
		m->busy++;
		pthread_mutex_unlock(&pool.mu);
		start_many_run(m);
		pthread_mutex_lock(&pool.mu);
		if (--m->busy == 0)
			pthread_cond_broadcast(&pool.done);
	}
	return NULL;
}

/* pool_grow: up to want helpers, no more than there are other cores (a
 * start is CPU work: more threads than cores cannot run more of them at
 * once) and SPAWN_MAX_THREADS; fewer when threads cannot be made */
static void pool_grow(int want)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	if (cpus > 1 && want > cpus - 1)
		want = (int)cpus - 1;
	else if (cpus <= 1 && want > 1)
		want = 1;
	if (want > SPAWN_MAX_THREADS)
		want = SPAWN_MAX_THREADS;
	if (pool.nthreads >= want || pthread_attr_init(&attr) != 0)
		return;
	/* start_child's frame holds the child's 64 KiB stack */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* helpers take no signal: the loop's handlers stay on our thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (pool.nthreads < want &&
	       pthread_create(&tid, &attr, pool_thread, NULL) == 0)
		pool.nthreads++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
}

void spawn_start_many(const struct spawn_opts *o, struct spawn_child *c,
		      int *rc, char *errs, size_t err_size, int n)
{
	struct start_many m = {o, c, rc, errs, err_size, n, 0, 0};
	if (n > 1) {
		pthread_mutex_lock(&pool.mu);
		pool_grow(n - 1);
		pool.job = &m;
		pool.gen++;
		pthread_cond_broadcast(&pool.work);
		pthread_mutex_unlock(&pool.mu);
	}
	/* this thread starts children too, all of them without helpers */
	start_many_run(&m);
	if (n > 1) {
		pthread_mutex_lock(&pool.mu);
		while (m.busy > 0)
			pthread_cond_wait(&pool.done, &pool.mu);
		pool.job = NULL;
		pthread_mutex_unlock(&pool.mu);
	}
}

static const struct {
	int sig;
	const char *name;
} signal_names[] = {
    {SIGHUP, "SIGHUP"},	      {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
    {SIGILL, "SIGILL"},	      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},
    {SIGBUS, "SIGBUS"},	      {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"},
    {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
    {SIGCHLD, "SIGCHLD"},     {SIGCONT, "SIGCONT"}, {SIGSTOP, "SIGSTOP"},
    {SIGTSTP, "SIGTSTP"},     {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},
    {SIGURG, "SIGURG"},	      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},	      {SIGSYS, "SIGSYS"},
};

const char *spawn_signal_name(int sig, char *tmp, size_t tmp_size)
{
	size_t i;
	for (i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (signal_names[i].sig == sig)
			return signal_names[i].name;
	snprintf(tmp, tmp_size, "SIG%d", sig);
	return tmp;
}

int spawn_signal_parse(const char *s, int *sig)
{
	size_t i;
	int n;
	if (parse_int(s, 1, NSIG - 1, &n) == 0) {
		*sig = n;
		return 0;
	}
	for (i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++) {
		const char *name = signal_names[i].name;
		if (strcasecmp(s, name) == 0 || strcasecmp(s, name + 3) == 0) {
			*sig = signal_names[i].sig;
			return 0;
		}
	}
	return DL_EINVAL;
}
