/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper_proc.h - the keeper's life and the /proc and cgroup helpers the
 * keeper and the record of a dead agent share (keeper_proc.c); private to
 * agent/keeper/.
 */
#ifndef DLAUNCH_AGENT_KEEPER_PROC_H
#define DLAUNCH_AGENT_KEEPER_PROC_H
#include <stdint.h>
#include <sys/types.h>

/* keeper_run is the keeper's life: it reads spawn_notices from rfd until
 * end of file, then ends every group it still holds, their sessions and
 * everything in cgroup ("" when none), removes cgroup and record ("" when
 * none) and exits. Never returns. dlaunch-keeper's main() calls it; so
 * does a forked copy of the agent where that program is not found. */
void keeper_run(int rfd, const char *cgroup, const char *record)
    __attribute__((noreturn));

/* /proc and cgroup helpers the keeper and the record share (the
 * processes themselves are read by dlaunch/procfs.h) */

/* proc_kill_sessions SIGKILLs every live process (not a zombie) whose
 * process group or session is one of ids[0..n) and that started no
 * earlier than min_start[i] (NULL: any time). Returns how many it found. */
int proc_kill_sessions(const pid_t *ids, const uint64_t *min_start, int n);

/* cgroup_kill_procs SIGKILLs every pid listed in the cgroup directory
 * path, one by one (kernels without cgroup.kill, and a cgroup whose
 * cgroup.kill would kill children started into it later); no wait.
 * Returns how many it signalled. */
int cgroup_kill_procs(const char *path);

/* cgroup_kill kills every process in the cgroup directory path and waits
 * (up to timeout_ms) until it is empty; then removes it when rmdir_too.
 * 0 when it is empty (or gone), -1 otherwise. */
int cgroup_kill(const char *path, int rmdir_too, int timeout_ms);

#endif
