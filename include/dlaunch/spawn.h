/* SPDX-License-Identifier: Apache-2.0 */
/*
 * spawn.h - the one way dlaunch starts a process.
 *
 * The child gets default signal dispositions and an empty signal mask, its
 * own session and process group (setsid: pgid == pid), dies with the
 * process that spawned it (PR_SET_PDEATHSIG SIGKILL), the given descriptors
 * as stdin/stdout/stderr and no other descriptor but an optional
 * keep_fd, and names the spawner as its ptracer (PR_SET_PTRACER, for the
 * hang diagnosis under Yama). Between fork and exec it
 * makes only async-signal-safe calls; an exec failure travels back to the
 * parent over a close-on-exec pipe, so spawn_process either returns a
 * running process or an error naming the program.
 *
 * A spawn may also be watched (struct spawn_watch): the child is started
 * inside a cgroup v2 directory (clone3's CLONE_INTO_CGROUP, so it is in
 * there before it runs a single instruction of its own), and it writes a
 * notice with its pid to a descriptor before it execs, so that a watcher
 * (the agent's keeper) knows of its process group before the program can
 * fork anything.
 */
#ifndef DLAUNCH_SPAWN_H
#define DLAUNCH_SPAWN_H
#include <stddef.h>
#include <sys/types.h>

/* what a watched child writes to spawn_watch.notify_fd before it execs
 * (one write, atomic on a pipe); the keeper's messages use it too */
struct spawn_notice {
	int kind; /* SPAWN_NOTICE_* */
	int pid;  /* the child's pid, which is its process group id */
};
#define SPAWN_NOTICE_STARTED 1 /* written by the child itself */
#define SPAWN_NOTICE_GONE    2 /* its group was killed and it was reaped */

struct spawn_watch {
	int cgroup_fd; /* a cgroup v2 directory to start the child in, or -1 */
	int notify_fd; /* where the child writes its spawn_notice, or -1 */
};

struct spawn_opts {
	const char *file;  /* program: a path, or a name looked up in PATH */
	char *const *argv; /* argv[0] included; NULL-terminated; borrowed */
	char *const *envp; /* NULL-terminated; NULL: the caller's environ */
	int stdin_fd;	   /* -1: /dev/null */
	int stdout_fd;	   /* -1: inherit the caller's */
	int stderr_fd;	   /* -1: inherit the caller's */
	const char *cwd;   /* NULL: the caller's working directory */
	const struct spawn_watch *watch; /* NULL: none; borrowed */
	int flags;			 /* SPAWN_*; 0: a worker */
	/* one more descriptor the child keeps, at the same number, open
	 * across exec (a worker's control channel); <= 2: none */
	int keep_fd;
};

/* flags for a helper of the caller's own rather than a worker: */
#define SPAWN_SAME_GROUP     1 /* no setsid: the caller's session, group */
#define SPAWN_OUTLIVE_PARENT 2 /* no PR_SET_PDEATHSIG */

/*
 * spawn_resolve finds file the way execvp would (a name with a '/' is used
 * as is, else each PATH entry) and checks that it is an executable regular
 * file. Writes the path into out. Returns 0, DL_ENOTFOUND (no such program)
 * or DL_EINVAL (found but not executable), with a message in err.
 */
int spawn_resolve(const char *file, char *out, size_t out_size, char *err,
		  size_t err_size);

/*
 * spawn_process starts o->file. On success *pid is the child's pid (and
 * its process group id) and 0 is returned; otherwise a DL_E* code and a
 * message such as "cannot run 'foo': no such file or directory" in err, and
 * no process is left behind. The descriptors in o stay owned by the caller.
 */
int spawn_process(const struct spawn_opts *o, pid_t *pid, char *err,
		  size_t err_size);

/*
 * The same in two steps, so that a caller starting many processes lets
 * them exec in parallel: spawn_start forks and returns at once (the child
 * is on its way to exec; o's descriptors may be closed by the caller right
 * after), spawn_finish waits until it has exec'd and returns what
 * spawn_process would. Every successful spawn_start must be followed by
 * one spawn_finish, before the caller reaps any child. c->file borrows
 * o->file.
 */
struct spawn_child {
	pid_t pid;
	int status_fd; /* exec-status pipe, read end; -1 once finished */
	const char *file;
	/* the child could not be started inside watch->cgroup_fd (this
	 * errno) and was started outside it; 0 when it is inside or there
	 * was none */
	int cgroup_errno;
};
int spawn_start(const struct spawn_opts *o, struct spawn_child *c, char *err,
		size_t err_size);
int spawn_finish(struct spawn_child *c, pid_t *pid, char *err, size_t err_size);

/*
 * spawn_start_many is spawn_start for o[i] into c[i], i < n, with several
 * starts under way at once: each start suspends only the thread that made
 * it until its child has exec'd, so n children's exec costs overlap
 * instead of following one another. rc[i] is what spawn_start returned
 * for i and errs + i * err_size its message. The helper threads live as
 * long as the process (a child's parent-death signal follows the thread
 * that started it) and sleep between calls. The caller then calls
 * spawn_finish for each started child, in any order. One call at a time,
 * while no other thread of the caller's touches what the opts borrow.
 */
void spawn_start_many(const struct spawn_opts *o, struct spawn_child *c,
		      int *rc, char *errs, size_t err_size, int n);

/* spawn_signal_name returns "SIGKILL" etc. for sig, or "SIG<n>". The result
 * is a static string or written into tmp (at least 16 bytes). */
const char *spawn_signal_name(int sig, char *tmp, size_t tmp_size);

/* spawn_signal_parse maps "SIGTERM", "TERM" or "15" to a signal number;
 * 0 or DL_EINVAL. */
int spawn_signal_parse(const char *s, int *sig);

#endif
