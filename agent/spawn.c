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

/* close_from closes every descriptor >= lo except keep; async-signal-safe
 * (close_range is a plain system call). */
static void close_from(int lo, int keep)
{
	if (keep >= lo) {
		if (keep > lo)
			syscall(SYS_close_range, (unsigned)lo,
				(unsigned)keep - 1, 0U);
		syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0U);
	} else {
		syscall(SYS_close_range, (unsigned)lo, ~0U, 0U);
	}
}

static void child(const struct spawn_opts *o, const char *path, int errfd,
		  pid_t parent, int devnull)
{
	struct sigaction sa;
	sigset_t none;
	int sig, in, outfd, errfd2;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL); /* fails harmlessly for some */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (setsid() < 0)
		child_fail(errfd, errno);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		child_fail(errfd, errno);
	/* the parent may have died before prctl: then nobody would kill us */
	if (getppid() != parent)
		_exit(127);

	in = o->stdin_fd >= 0 ? o->stdin_fd : devnull;
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
	close_from(3, errfd);
	if (o->cwd && chdir(o->cwd) != 0)
		child_fail(errfd, errno);
	execve(path, o->argv, o->envp ? o->envp : environ);
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
static pid_t start_child(const struct spawn_opts *o, const char *path,
			 int errfd, pid_t parent, int devnull)
{
	pid_t p = fork();
	if (p == 0)
		child(o, path, errfd, parent, devnull);
	return p;
}
#else
struct child_args {
	const struct spawn_opts *o;
	const char *path;
	int errfd, devnull;
	pid_t parent;
};

static int child_entry(void *arg)
{
	struct child_args *ca = arg;
	child(ca->o, ca->path, ca->errfd, ca->parent, ca->devnull);
	return 127;
}

/*
 * start_child runs child() in a new process that shares our memory until
 * it execs (CLONE_VM | CLONE_VFORK, as posix_spawn does): no page tables
 * are copied, which made fork the largest cost of starting many workers.
 * We are suspended meanwhile, so the child may use our memory and one
 * static stack serves every spawn. All signals stay blocked around the
 * clone so no handler of ours can run on the child's stack; child()
 * resets every disposition before it unblocks them.
 */
static pid_t start_child(const struct spawn_opts *o, const char *path,
			 int errfd, pid_t parent, int devnull)
{
	static char stack[64 * 1024] __attribute__((aligned(64)));
	struct child_args ca = {o, path, errfd, devnull, parent};
	sigset_t all, old;
	pid_t p;
	int saved;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	p = clone(child_entry, stack + sizeof(stack),
		  CLONE_VM | CLONE_VFORK | SIGCHLD, &ca);
	saved = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = saved;
	return p;
}
#endif

int spawn_start(const struct spawn_opts *o, struct spawn_child *c, char *err,
		size_t err_size)
{
	char path[4096];
	int pipefd[2] = {-1, -1}, devnull = -1, rc;
	pid_t p, parent = getpid();

	c->pid = -1;
	c->status_fd = -1;
	c->file = o->file;
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
	p = start_child(o, path, pipefd[1], parent, devnull);
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
