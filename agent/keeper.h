/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper.h - what keeps a node's workers from outliving their agent
 * (agent/ only; see docs/reliability.md, "What outlives an agent").
 *
 * The keeper is a small process the agent forks at start. The agent holds
 * the write end of a pipe to it; every worker, before it execs, writes its
 * pid (its process group and session id) there, and the agent writes when
 * it has killed a group and reaped its leader. The pipe's end of file
 * means the agent is gone, however it died: the keeper then kills every
 * group it still holds, every process left in those groups' sessions and,
 * where the agent could make one, everything in the workers' cgroup, and
 * exits. Each agent also leaves a record of its groups in a runtime
 * directory, so that when agent and keeper die together, the next agent
 * of the job on this host ends what they left before it spawns.
 */
#ifndef DLAUNCH_AGENT_KEEPER_H
#define DLAUNCH_AGENT_KEEPER_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlaunch/spawn.h"

struct keeper;

/*
 * keeper_start ends what dead agents of job left on this host (their
 * records), makes the workers' cgroup where a writable cgroup v2 is found
 * (not with DLAUNCH_CGROUP=0), writes this agent's record and forks the
 * keeper. Whatever of that cannot be had is logged and left out; only
 * DL_ENOMEM is returned as an error. *out is owned by the caller
 * (keeper_free).
 */
int keeper_start(const char *job, struct keeper **out);

/* keeper_watch: what each spawn passes on (spawn_opts.watch); borrowed */
const struct spawn_watch *keeper_watch(const struct keeper *k);

/* keeper_pid: the keeper process (a child of the agent), or 0 */
pid_t keeper_pid(const struct keeper *k);

/* keeper_has_cgroup: 1 when the workers start in their own cgroup */
int keeper_has_cgroup(const struct keeper *k);

/* keeper_forget: group pgid is killed and its leader reaped; the keeper
 * lets it go (its id may be reused from now on). */
void keeper_forget(struct keeper *k, pid_t pgid);

/* keeper_reaped: pid was reaped; when it is the keeper, say so and go on
 * without one. Returns 1 when pid was the keeper. */
int keeper_reaped(struct keeper *k, pid_t pid, int wstatus);

/* keeper_record rewrites this agent's record with the process groups of
 * the round (n pids, each its group's id). */
void keeper_record(struct keeper *k, const pid_t *pgids, int n);

/* keeper_kill_cgroup kills whatever is left in the workers' cgroup (the
 * round's workers are all reaped: what is left escaped their groups). */
void keeper_kill_cgroup(struct keeper *k);

/* keeper_free ends the keeper (it kills what is still registered, removes
 * the cgroup and the record, and exits), waits for it, and frees k. */
void keeper_free(struct keeper *k);

/* ---- keeper_proc.c ---- */

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
