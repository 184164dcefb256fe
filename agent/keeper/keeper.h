/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper.h - what keeps a node's workers from outliving their agent
 * (docs/reliability.md, "What outlives an agent"): the one header of
 * agent/keeper/ that the rest of the agent includes. The files behind it
 * include nothing of the agent's but the public dlaunch/ headers.
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

#endif
