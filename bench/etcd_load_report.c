/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load_report.c - etcd_load's result: the times, the checks, etcd's
 * counters and the processes' memory and descriptors, printed as one
 * JSON object on stdout.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/etcd/etcd_client.h"
#include "../agent/etcd/etcd_leader.h"
#include "../agent/etcd/rdzv_etcd.h"
#include "../agent/fsm.h"
#include "dlaunch/clock.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#include "etcd_load.h"

/* ------------------------------------------------------------- output */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double ms(uint64_t from, uint64_t to)
{
	return from && to ? (double)(to - from) / 1e6 : -1;
}

long proc_status(pid_t pid, const char *field)
{
	char path[64], line[256];
	FILE *f;
	long v = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0 &&
		    line[strlen(field)] == ':')
			v = strtol(line + strlen(field) + 1, NULL, 10) * 1024;
	fclose(f);
	return v;
}

int open_fds(pid_t pid)
{
	char path[64];
	DIR *dir;
	struct dirent *e;
	int n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)))
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

void print_result(struct driver *d)
{
	const struct opts *o = d->o;
	json_t *r = json_object(), *t, *procs = json_array();
	uint64_t *sorted = malloc(sizeof(*sorted) * (size_t)o->nodes);
	long hwm = 0;
	int fds = 0;
	struct rlimit rl;
	if (!r || !procs || !sorted)
		die("out of memory");
	json_t *failed = json_array();
	size_t nj = 0;
	if (!failed)
		die("out of memory");
	for (int i = 0; i < o->nodes; i++) {
		if (d->nodes[i].join_ns)
			sorted[nj++] = d->nodes[i].join_ns;
		if (d->nodes[i].failed_phase) {
			char id[32];
			snprintf(id, sizeof(id), "sim%05d", i);
			json_array_append_new(
			    failed,
			    json_pack("{s:s, s:s}", "node", id, "phase",
				      phase_name(d->nodes[i].failed_phase)));
		}
	}
	qsort(sorted, nj, sizeof(*sorted), cmp_u64);
	getrlimit(RLIMIT_NOFILE, &rl);
	json_object_set_new(r, "nodes", json_integer(o->nodes));
	json_object_set_new(r, "min_nodes", json_integer(o->min_nodes));
	json_object_set_new(r, "lease_ttl_s", json_integer(o->lease_ttl_s));
	json_object_set_new(r, "last_call_ms",
			    json_integer((json_int_t)o->last_call_ms));
	json_object_set_new(r, "endpoints", json_string(o->endpoints));
	json_object_set_new(r, "rotate", json_boolean(o->rotate));
	json_object_set_new(
	    r, "simulated_node",
	    json_string("real: agent_rdzv_etcd_new + the agent's round loop "
			"(fsm.c), one etcd client per node"));
	json_object_set_new(r, "processes", json_integer(d->nprocs));
	json_object_set_new(r, "round",
			    json_integer((json_int_t)d->first_round));
	json_object_set_new(r, "nodes_joined", json_integer((json_int_t)nj));
	json_object_set_new(r, "world", json_integer(d->world));
	json_object_set_new(r, "nodes_failed", failed);
	json_object_set_new(r, "join_ms",
			    json_real((double)sorted[nj - 1] / 1e6));
	json_object_set_new(r, "join_first_ms",
			    json_real((double)sorted[0] / 1e6));
	json_object_set_new(r, "join_p50_ms",
			    json_real((double)sorted[nj / 2] / 1e6));
	json_object_set_new(r, "join_p99_ms",
			    json_real((double)sorted[nj * 99 / 100] / 1e6));
	json_object_set_new(r, "ranks_ok", json_true());
	json_object_set_new(r, "etcd_delta",
			    counters_delta(&d->before, &d->after));
	/* CPU time the first round took, which other load on the machine
	 * changes little (the wall time it changes a lot) */
	if (o->n_etcd_pids)
		json_object_set_new(r, "join_etcd_cpu_s",
				    json_real(d->etcd_cpu[1] - d->etcd_cpu[0]));
	json_object_set_new(r, "join_load_cpu_s",
			    json_real(d->load_cpu[1] - d->load_cpu[0]));
	if (o->idle_ms) {
		double secs = (double)(d->idle_t1_ns - d->idle_t0_ns) / 1e9;
		t = json_object();
		json_object_set_new(t, "seconds", json_real(secs));
		json_object_set_new(t, "nodes_given_a_new_round",
				    json_integer(d->idle_rounds));
		json_object_set_new(
		    t, "etcd_delta",
		    counters_delta(&d->idle_before, &d->idle_after));
		if (o->n_etcd_pids)
			json_object_set_new(
			    t, "etcd_cpu_s",
			    json_real(d->etcd_cpu[2] - d->etcd_cpu[3]));
		json_object_set_new(t, "load_cpu_s",
				    json_real(d->load_cpu[2] - d->load_cpu[3]));
		json_object_set_new(r, "idle", t);
	}
	if (o->takeover) {
		char killed[32];
		snprintf(killed, sizeof(killed), "sim%05d", d->killed);
		t = json_object();
		json_object_set_new(t, "killed", json_string(killed));
		/* CLOCK_MONOTONIC, to line the run up with other records */
		json_object_set_new(t, "killed_at_monotonic_ns",
				    json_integer((json_int_t)d->t_kill_ns));
		json_object_set_new(t, "new_leader",
				    json_string(d->new_leader));
		json_object_set_new(t, "leader_key_gone_ms",
				    json_real(ms(d->t_kill_ns, d->t_gone_ns)));
		json_object_set_new(
		    t, "new_leader_ms",
		    json_real(ms(d->t_kill_ns, d->t_elected_ns)));
		json_object_set_new(
		    t, "reformed_ms",
		    json_real(ms(d->t_kill_ns, d->t_reformed_ns)));
		/* the waves between: the round over heard by every survivor,
		 * their rejoins until the new round closed, its inboxes */
		if (d->n_over) {
			json_object_set_new(
			    t, "round_over_first_ms",
			    json_real(ms(d->t_kill_ns, d->t_over_first_ns)));
			json_object_set_new(
			    t, "round_over_last_ms",
			    json_real(ms(d->t_kill_ns, d->t_over_last_ns)));
		}
		if (d->t_reformed_first_ns)
			json_object_set_new(
			    t, "reformed_first_ms",
			    json_real(
				ms(d->t_kill_ns, d->t_reformed_first_ns)));
		json_object_set_new(t, "round",
				    json_integer((json_int_t)d->new_round));
		json_object_set_new(t, "survivors", json_integer(survivors(d)));
		json_object_set_new(r, "takeover", t);
	}
	for (int k = 0; k < d->nprocs; k++) {
		hwm += d->procs[k].hwm_bytes;
		fds += d->procs[k].fds;
		json_array_append_new(
		    procs,
		    json_pack("{s:i, s:i, s:I, s:i}", "first", d->procs[k].lo,
			      "nodes", d->procs[k].hi - d->procs[k].lo,
			      "rss_hwm_bytes",
			      (json_int_t)d->procs[k].hwm_bytes, "fds",
			      d->procs[k].fds));
	}
	json_object_set_new(r, "per_process", procs);
	json_object_set_new(r, "rss_hwm_bytes", json_integer(hwm));
	json_object_set_new(r, "fds_open", json_integer(fds));
	json_object_set_new(r, "nofile_limit",
			    json_integer((json_int_t)rl.rlim_cur));
	json_dumpf(r, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
	fputc('\n', stdout);
	json_decref(r);
	free(sorted);
}
