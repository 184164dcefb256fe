/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keeper_record.c - each agent's record of its workers, for the next agent
 * of the job on this host (keeper.h).
 *
 * The record is a small text file, RUNTIME/JOB.PID.rec, rewritten (to a
 * temporary name, then renamed) each round:
 *
 *     dlaunch-record 1
 *     boot BOOT_ID
 *     job JOB
 *     agent PID START
 *     cgroup PATH            (or "cgroup -")
 *     group PGID START       (one per worker of the round)
 *
 * Each line is read strictly (record_parse): a word it does not know, a
 * line given twice, a number out of range or anything after it makes the
 * whole record unreadable, and an unreadable record is left alone.
 *
 * START is the process's start time in clock ticks after boot, so that a
 * pid used again by another process is told apart. A new agent of JOB
 * reads every record of JOB whose agent is no longer alive (or is of an
 * earlier boot), ends what it names and removes it. RUNTIME is
 * $DLAUNCH_RUNTIME_DIR, else $XDG_RUNTIME_DIR/dlaunch, else /run/dlaunch
 * for root and /tmp/dlaunch-UID for others; it must be a directory of
 * ours that nobody else can write, or no record is kept (someone who
 * could plant a record could have us kill what they name).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "keeper_proc.h"
#include "keeper_record.h"

#define RECORD_MAX_BYTES  (1 << 20)
#define RECORD_MAX_GROUPS 65536

int record_boot_id(char *out, size_t size)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	int ok = f && fgets(out, (int)size, f);
	if (f)
		fclose(f);
	if (!ok) {
		snprintf(out, size, "unknown");
		return -1;
	}
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* dir_ours: path is a directory (not a link) owned by us that only we
 * may write */
static int dir_ours(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_uid == geteuid() && (st.st_mode & 022) == 0;
}

int record_dir(char *out, size_t size)
{
	const char *env = getenv("DLAUNCH_RUNTIME_DIR");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (env && *env)
		n = snprintf(out, size, "%s", env);
	else if (xdg && *xdg)
		n = snprintf(out, size, "%s/dlaunch", xdg);
	else if (geteuid() == 0)
		n = snprintf(out, size, "/run/dlaunch");
	else
		n = snprintf(out, size, "/tmp/dlaunch-%ld", (long)geteuid());
	if (n < 0 || (size_t)n >= size)
		return -1;
	if (mkdir(out, 0700) != 0 && errno != EEXIST)
		return -1;
	return dir_ours(out) ? 0 : -1;
}

int record_write(const char *path, const struct record *r)
{
	char tmp[4200];
	FILE *f;
	int ok;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "we");
	if (!f)
		return -1;
	fprintf(f, "dlaunch-record 1\nboot %s\njob %s\nagent %ld %llu\n",
		r->boot_id, r->job, (long)r->agent,
		(unsigned long long)r->agent_start);
	fprintf(f, "cgroup %s\n", r->cgroup[0] ? r->cgroup : "-");
	for (int i = 0; i < r->n; i++)
		fprintf(f, "group %ld %llu\n", (long)r->pgids[i],
			(unsigned long long)r->starts[i]);
	ok = fflush(f) == 0 && !ferror(f);
	ok = fclose(f) == 0 && ok;
	/* a runtime record: a crash of the machine voids it (boot id), so
	 * it is renamed into place without an fsync */
	if (!ok || rename(tmp, path) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

void record_release(struct record *r)
{
	free(r->pgids);
	free(r->starts);
	memset(r, 0, sizeof(*r));
}

/* copy_field: the n bytes at val into dst as a string, or DL_ELIMIT
 * when they do not fit */
static int copy_field(char *dst, size_t size, const char *val, size_t n)
{
	if (n >= size)
		return DL_ELIMIT;
	memcpy(dst, val, n);
	dst[n] = '\0';
	return 0;
}

/* pid_and_start: "PID START" (each as record_write prints it, nothing
 * else): 0, or DL_EINVAL / DL_ERANGE */
static int pid_and_start(const char *val, size_t n, pid_t *pid, uint64_t *start)
{
	char num[2][24];
	const char *sp = memchr(val, ' ', n);
	int64_t p;
	int rc;
	if (sp == NULL ||
	    copy_field(num[0], sizeof(num[0]), val, (size_t)(sp - val)) ||
	    copy_field(num[1], sizeof(num[1]), sp + 1,
		       n - (size_t)(sp + 1 - val)))
		return DL_EINVAL;
	rc = parse_i64(num[0], 1, INT32_MAX, &p);
	if (rc == 0)
		rc = parse_u64(num[1], 0, UINT64_MAX, start);
	if (rc == 0)
		*pid = (pid_t)p;
	return rc;
}

/* add_group: one more PGID START in r */
static int add_group(struct record *r, int *cap, pid_t pgid, uint64_t start)
{
	if (r->n == *cap) {
		void *p, *q;
		if (*cap >= RECORD_MAX_GROUPS)
			return DL_ELIMIT;
		*cap = *cap ? 2 * *cap : 16;
		p = realloc(r->pgids, (size_t)*cap * sizeof(pid_t));
		if (p)
			r->pgids = p;
		q = realloc(r->starts, (size_t)*cap * sizeof(uint64_t));
		if (q)
			r->starts = q;
		if (!p || !q)
			return DL_ENOMEM;
	}
	r->pgids[r->n] = pgid;
	r->starts[r->n] = start;
	r->n++;
	return 0;
}

/* word_is: the n bytes at p are the word w */
static int word_is(const char *p, size_t n, const char *w)
{
	return strlen(w) == n && memcmp(p, w, n) == 0;
}

int record_parse(const char *text, size_t len, struct record *r)
{
	static const char magic[] = "dlaunch-record 1\n";
	const char *p = text, *end = text + len;
	int cap = 0, rc = 0, seen_boot = 0, seen_job = 0, seen_agent = 0,
	    seen_cgroup = 0;
	memset(r, 0, sizeof(*r));
	if (len < sizeof(magic) - 1 || memcmp(text, magic, sizeof(magic) - 1))
		return DL_EINVAL;
	for (p += sizeof(magic) - 1; p < end && rc == 0;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *sp, *val;
		size_t n, word;
		/* every line ends in a newline and holds "WORD VALUE" */
		if (nl == NULL || memchr(p, '\0', (size_t)(nl - p))) {
			rc = DL_EINVAL;
			break;
		}
		sp = memchr(p, ' ', (size_t)(nl - p));
		if (sp == NULL || sp + 1 == nl) {
			rc = DL_EINVAL;
			break;
		}
		word = (size_t)(sp - p);
		val = sp + 1;
		n = (size_t)(nl - val);
		if (word_is(p, word, "boot") && !seen_boot++ &&
		    !memchr(val, ' ', n))
			rc = copy_field(r->boot_id, sizeof(r->boot_id), val, n);
		else if (word_is(p, word, "job") && !seen_job++ &&
			 !memchr(val, ' ', n))
			rc = copy_field(r->job, sizeof(r->job), val, n);
		else if (word_is(p, word, "cgroup") && !seen_cgroup++)
			/* a path may hold spaces: the rest of the line */
			rc = n == 1 && val[0] == '-'
				 ? 0
				 : copy_field(r->cgroup, sizeof(r->cgroup), val,
					      n);
		else if (word_is(p, word, "agent") && !seen_agent++)
			rc = pid_and_start(val, n, &r->agent, &r->agent_start);
		else if (word_is(p, word, "group")) {
			pid_t pgid;
			uint64_t start;
			rc = pid_and_start(val, n, &pgid, &start);
			if (rc == 0)
				rc = add_group(r, &cap, pgid, start);
		} else
			rc = DL_EINVAL; /* unknown, repeated or malformed */
		p = nl + 1;
	}
	if (rc == 0 && (!seen_boot || !seen_job || !seen_agent || !seen_cgroup))
		rc = DL_EINVAL;
	if (rc != 0)
		record_release(r);
	return rc;
}

/* record_read parses the record at path into r (record_release frees
 * it); 0 or a DL_E* code */
static int record_read(const char *path, struct record *r)
{
	char *text = NULL;
	size_t len = 0;
	int rc;
	memset(r, 0, sizeof(*r));
	rc = fs_read_file(path, RECORD_MAX_BYTES, &text, &len);
	if (rc == 0)
		rc = record_parse(text, len, r);
	free(text);
	return rc;
}

/* alive_as: pid is alive (not a zombie) and started at start */
static int alive_as(pid_t pid, uint64_t start)
{
	struct procfs_stat pi;
	return procfs_read_stat(pid, &pi) == 0 && pi.start == start &&
	       pi.state != 'Z' && pi.state != 'X';
}

/* cgroup_ok: path names a cgroup directory (it has a cgroup.procs) */
static int cgroup_ok(const char *path)
{
	char file[4300];
	if (path[0] != '/' || strstr(path, "/../"))
		return 0;
	snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	return access(file, F_OK) == 0;
}

/* end_record ends what the dead agent of r left; the number of processes
 * found in its groups and sessions */
static int end_record(const struct record *r)
{
	pid_t *ids = calloc((size_t)r->n + 1, sizeof(pid_t));
	uint64_t *min = calloc((size_t)r->n + 1, sizeof(uint64_t));
	int n = 0, found = 0;
	if (!ids || !min)
		goto out;
	for (int i = 0; i < r->n; i++) {
		struct procfs_stat pi;
		/* a leader still there must be the one recorded, else its
		 * pid (and group) is someone else's now */
		if (procfs_read_stat(r->pgids[i], &pi) == 0 &&
		    pi.start != r->starts[i])
			continue;
		ids[n] = r->pgids[i];
		min[n] = r->starts[i];
		n++;
	}
	if (r->cgroup[0] && cgroup_ok(r->cgroup)) {
		char procs[4300], one[32];
		FILE *f;
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", r->cgroup);
		f = fopen(procs, "re");
		while (f && fgets(one, sizeof(one), f))
			found++;
		if (f)
			fclose(f);
		if (cgroup_kill(r->cgroup, 1, 5000) != 0)
			log_warn("cannot empty cgroup %s of an earlier agent",
				 r->cgroup);
	}
	/* then what left the cgroup's reach, or all of it without one;
	 * kill until none is found: one may be forking while we look */
	for (int pass = 0; pass < 50; pass++) {
		int k = proc_kill_sessions(ids, min, n);
		if (pass == 0)
			found += k; /* later passes see the dying again */
		if (k == 0)
			break;
		usleep(2000);
	}
out:
	free(ids);
	free(min);
	return found;
}

/* record_name_of_job: name is JOB.DIGITS.rec */
static int record_name_of_job(const char *name, const char *job)
{
	size_t jl = strlen(job);
	const char *p;
	if (strncmp(name, job, jl) != 0 || name[jl] != '.')
		return 0;
	p = name + jl + 1;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return strcmp(p, ".rec") == 0;
}

void record_end_predecessors(const char *dir, const char *job,
			     const char *boot_id)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[4300];
		struct record r;
		int found;
		if (!record_name_of_job(de->d_name, job))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (record_read(path, &r) != 0 || strcmp(r.job, job) != 0) {
			log_warn("ignoring unreadable record %s", path);
			continue;
		}
		if (strcmp(r.boot_id, boot_id) != 0) {
			/* an earlier boot: nothing of it can be running */
			unlink(path);
			record_release(&r);
			continue;
		}
		if (alive_as(r.agent, r.agent_start)) {
			record_release(&r);
			continue; /* another agent of the job, running */
		}
		found = end_record(&r);
		if (found > 0)
			log_warn(
			    "ended %d process(es) left by an earlier agent "
			    "of job %s (pid %ld)",
			    found, job, (long)r.agent);
		else
			log_debug("earlier agent %ld of job %s left nothing "
				  "in its groups",
				  (long)r.agent, job);
		unlink(path);
		record_release(&r);
	}
	closedir(d);
}
