/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang_proc.c - what a hang report reads from /proc, and the report's text
 * helpers: UTF-8 cleaning, the 32 KiB cut of a text field and the 512 KiB
 * bound of a whole node report (docs/hangs.md). Pure but for the two
 * small /proc reads (through dlaunch/procfs.h); tests/unit/test_hang_agent.c
 * covers it.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/parse.h"
#include "dlaunch/procfs.h"
#include "hang.h"

int hang_proc_read(pid_t pid, struct hang_proc *p)
{
	struct procfs_stat st;
	char path[64], wchan[64];
	ssize_t n;
	if (procfs_read_stat(pid, &st) != 0)
		return -1;
	memset(p, 0, sizeof(*p));
	p->state = st.state;
	p->cpu_ticks = st.utime + st.stime;
	p->threads = st.threads > 1000000 ? 1000000 : (int)st.threads;
	snprintf(path, sizeof(path), "/proc/%ld/wchan", (long)pid);
	n = procfs_read_small(path, wchan, sizeof(wchan));
	/* "0" is the kernel's "not waiting" */
	if (n > 0 && strcmp(wchan, "0") != 0) {
		size_t k = 0;
		for (ssize_t i = 0; i < n && k + 1 < sizeof(p->wchan); i++)
			if (wchan[i] > ' ' && wchan[i] < 127)
				p->wchan[k++] = wchan[i];
		p->wchan[k] = '\0';
	}
	return 0;
}

pid_t hang_proc_tracer(pid_t pid, char *comm, size_t comm_size)
{
	char path[64], status[4096], *at, *end;
	long tracer;
	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	if (comm_size)
		comm[0] = '\0';
	if (procfs_read_small(path, status, sizeof(status)) <= 0 ||
	    !(at = strstr(status, "\nTracerPid:")))
		return 0;
	tracer = strtol(at + 11, &end, 10);
	if (end == at + 11 || tracer <= 0 || tracer > INT32_MAX)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/comm", tracer);
	if (comm_size && procfs_read_small(path, comm, comm_size) > 0)
		comm[strcspn(comm, "\n")] = '\0';
	return (pid_t)tracer;
}

int hang_proc_threads(pid_t pid, char *out, size_t size, pid_t *live_tid)
{
	char path[64];
	struct dirent *e;
	size_t len = 0;
	int live = 0;
	DIR *d;
	*live_tid = 0;
	if (size)
		out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char tpath[96], stat[1024], wchan[64] = "";
		struct procfs_stat p;
		int64_t tid;
		if (parse_i64(e->d_name, 1, INT32_MAX, &tid) != 0 || tid == pid)
			continue;
		snprintf(tpath, sizeof(tpath), "/proc/%ld/task/%ld/stat",
			 (long)pid, (long)tid);
		if (procfs_read_small(tpath, stat, sizeof(stat)) <= 0 ||
		    procfs_parse_stat(stat, &p) != 0 || p.state == 'Z' ||
		    p.state == 'X')
			continue;
		snprintf(tpath, sizeof(tpath), "/proc/%ld/task/%ld/wchan",
			 (long)pid, (long)tid);
		if (procfs_read_small(tpath, wchan, sizeof(wchan)) <= 0 ||
		    !strcmp(wchan, "0"))
			wchan[0] = '\0';
		if (!live)
			*live_tid = (pid_t)tid;
		live++;
		if (len < size)
			len += (size_t)snprintf(
			    out + len, size - len, "%stid %ld %s (%c)%s%s",
			    live > 1 ? ", " : "", (long)tid,
			    hang_state_name(p.state), p.state,
			    wchan[0] ? " in " : "", wchan);
	}
	closedir(d);
	return live;
}

const char *hang_state_name(char letter)
{
	switch (letter) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "disk-sleep";
	case 'T': return "stopped";
	case 't': return "tracing-stop";
	case 'Z': return "zombie";
	case 'X':
	case 'x': return "dead";
	default: return "sleeping"; /* I (idle), W, P, K: not running */
	}
}

/* utf8_len: the length of the valid UTF-8 sequence at s (n bytes left),
 * or 0 when the byte there does not start one */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned min;
	unsigned cp;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

json_t *hang_text(const char *s, size_t len, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t mark = sizeof(HANG_CUT_MARK) - 1, k = 0, keep;
	char *out;
	json_t *j;
	if (max < mark + 1)
		max = mark + 1;
	out = malloc((len < max ? len : max) + mark + 1);
	if (!out)
		return NULL;
	keep = len <= max ? max : max - mark;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(u + i, len - i);
		if (u[i] == 0) {
			i++;
			continue;
		}
		if (k + (n ? n : 1) > keep) {
			memcpy(out + k, HANG_CUT_MARK, mark);
			k += mark;
			break;
		}
		if (n == 0) {
			out[k++] = '?';
			i++;
		} else {
			memcpy(out + k, s + i, n);
			k += n;
			i += n;
		}
	}
	out[k] = '\0';
	j = json_stringn(out, k);
	free(out);
	return j;
}

static size_t encoded_size(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);
	size_t n = s ? strlen(s) : (size_t)-1;
	free(s);
	return n;
}

/* halve_text: the worker's text key keeps half of itself */
static int halve_text(json_t *w, const char *key)
{
	json_t *t = json_object_get(w, key);
	size_t len = json_string_length(t);
	json_t *cut;
	if (len < 64)
		return -1;
	cut = hang_text(json_string_value(t), len, len / 2);
	if (!cut)
		return -1;
	json_object_set_new(w, key, cut);
	return 0;
}

/* largest: the worker whose key is the longest text (at least 64 bytes) */
static json_t *largest(json_t *workers, const char *key)
{
	json_t *best = NULL, *w;
	size_t best_len = 63, i;
	json_array_foreach(workers, i, w)
	{
		size_t n = json_string_length(json_object_get(w, key));
		if (n > best_len) {
			best = w;
			best_len = n;
		}
	}
	return best;
}

/* drop_flight: the longest flight array loses its older half */
static int drop_flight(json_t *workers)
{
	json_t *best = NULL, *w;
	size_t best_n = 0, i;
	json_array_foreach(workers, i, w)
	{
		size_t n = json_array_size(json_object_get(w, "flight"));
		if (n > best_n) {
			best = w;
			best_n = n;
		}
	}
	if (!best)
		return -1;
	if (best_n == 1) {
		json_object_del(best, "flight");
		return 0;
	}
	{
		json_t *f = json_object_get(best, "flight");
		json_t *keep = json_array();
		for (size_t k = best_n / 2; k < best_n; k++)
			json_array_append(keep, json_array_get(f, k));
		json_object_set_new(best, "flight", keep);
	}
	return 0;
}

int hang_report_bound(json_t *report, size_t max)
{
	json_t *workers = json_object_get(report, "workers");
	for (int tries = 0; tries < 4096; tries++) {
		json_t *w;
		if (encoded_size(report) <= max)
			return 0;
		if (!json_is_array(workers))
			return -1;
		/* stacks first, native before Python: the Python stack says
		 * more of where a training script is */
		if ((w = largest(workers, "native")) &&
		    halve_text(w, "native") == 0)
			continue;
		if ((w = largest(workers, "python")) &&
		    halve_text(w, "python") == 0)
			continue;
		if (drop_flight(workers) == 0)
			continue;
		return -1;
	}
	return -1;
}
