/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper_record.h - an agent's record of its workers' process groups in a
 * runtime directory, and ending what a dead agent's record names
 * (keeper_record.c; agent/ only).
 */
#ifndef DLAUNCH_AGENT_KEEPER_RECORD_H
#define DLAUNCH_AGENT_KEEPER_RECORD_H
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct record {
	char boot_id[64];
	char job[256];
	pid_t agent;
	uint64_t agent_start;
	char cgroup[PATH_MAX]; /* "" when none */
	pid_t *pgids;	       /* n groups, each with its leader's start */
	uint64_t *starts;
	int n;
};

/* record_boot_id: this boot's id (/proc/sys/kernel/random/boot_id);
 * 0, or -1 with "unknown" in out */
int record_boot_id(char *out, size_t size);

/* record_dir: the runtime directory (made when missing); 0, or -1 when
 * there is none we may trust */
int record_dir(char *out, size_t size);

/* record_write writes r to path (a temporary name, then renamed); 0/-1 */
int record_write(const char *path, const struct record *r);

/* record_parse parses the len bytes of a record file at text (the form
 * record_write writes; keeper_record.c's comment) into r: 0, or DL_EINVAL
 * (not of that form: an unknown or repeated line, a number out of range or
 * followed by anything, a missing line), DL_ELIMIT (a field too long, too
 * many groups) or DL_ENOMEM; r then holds nothing. record_release frees
 * r after a success. */
int record_parse(const char *text, size_t len, struct record *r);

/* record_release frees what record_parse allocated in r */
void record_release(struct record *r);

/* record_end_predecessors ends, for every record of job in dir whose agent
 * is gone, what it names (processes still in its groups or sessions that
 * started no earlier than their group's leader, and its cgroup), logs
 * what it found and removes the record. Records of earlier boots are
 * removed; those of running agents are left alone. */
void record_end_predecessors(const char *dir, const char *job,
			     const char *boot_id);

#endif
