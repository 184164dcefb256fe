/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_load_counters.c - etcd's own counters: every member's /metrics
 * read (over curl) into named values, and the difference of two reads as
 * JSON, what a phase cost etcd.
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

/* ======================================================= etcd's counters */

struct body {
	char *data;
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *d = realloc(b->data, b->len + size * n + 1);
	if (!d)
		return 0;
	memcpy(d + b->len, p, size * n);
	b->len += size * n;
	d[b->len] = '\0';
	b->data = d;
	return size * n;
}

static void count(struct counters *c, const char *name, double v, int max)
{
	size_t i;
	for (i = 0; i < c->n; i++)
		if (strcmp(c->name[i], name) == 0)
			break;
	if (i == c->n) {
		if (c->n == MAX_COUNTERS)
			return;
		snprintf(c->name[c->n], sizeof(c->name[0]), "%s", name);
		c->value[c->n++] = 0;
	}
	if (max)
		c->value[i] = v > c->value[i] ? v : c->value[i];
	else
		c->value[i] += v;
}

/* the method of a grpc_* line, or NULL */
static const char *grpc_method(const char *line, char *out, size_t size)
{
	const char *m = strstr(line, "grpc_method=\""), *e;
	if (!m)
		return NULL;
	m += strlen("grpc_method=\"");
	e = strchr(m, '"');
	if (!e || (size_t)(e - m) >= size)
		return NULL;
	memcpy(out, m, (size_t)(e - m));
	out[e - m] = '\0';
	return out;
}

/* take_line adds what one line of /metrics says to c: gRPC calls started
 * (the JSON gateway turns each HTTP request into one) and stream messages
 * received, by method, summed over the members; etcd's storage
 * operations (summed: a read counts on the member that served it, a
 * write on every member); the raft proposals committed (the most any
 * member has seen). */
static void take_line(struct counters *c, const char *line)
{
	static const char *const storage[] = {
	    "etcd_debugging_mvcc_put_total",
	    "etcd_debugging_mvcc_txn_total",
	    "etcd_debugging_mvcc_range_total",
	    "etcd_debugging_mvcc_delete_total",
	};
	char method[48], name[96];
	const char *sp = strrchr(line, ' ');
	double v;
	if (!sp || line[0] == '#')
		return;
	v = strtod(sp + 1, NULL);
	if (strncmp(line, "grpc_server_started_total{", 26) == 0 &&
	    grpc_method(line, method, sizeof(method))) {
		snprintf(name, sizeof(name), "started.%s", method);
		if (v > 0)
			count(c, name, v, 0);
		return;
	}
	if (strncmp(line, "grpc_server_msg_received_total{", 31) == 0 &&
	    grpc_method(line, method, sizeof(method)) &&
	    (strcmp(method, "LeaseKeepAlive") == 0 ||
	     strcmp(method, "Watch") == 0)) {
		snprintf(name, sizeof(name), "msg_received.%s", method);
		count(c, name, v, 0);
		return;
	}
	for (size_t i = 0; i < sizeof(storage) / sizeof(storage[0]); i++)
		if (strncmp(line, storage[i], strlen(storage[i])) == 0 &&
		    line[strlen(storage[i])] == ' ') {
			count(c, storage[i] + strlen("etcd_debugging_"), v, 0);
			return;
		}
	if (strncmp(line, "etcd_server_proposals_committed_total ", 38) == 0)
		count(c, "proposals_committed", v, 1);
}

/* scrape reads every member's /metrics (blocking: between phases, while
 * the nodes' loops run in their own processes) */
int scrape(const struct opts *o, struct counters *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < o->eps.n; i++) {
		CURL *e = curl_easy_init();
		struct body b = {NULL, 0};
		char url[AGENT_ETCD_URL_MAX + 16];
		long status = 0;
		CURLcode rc;
		if (!e)
			return -1;
		snprintf(url, sizeof(url), "%s/metrics", o->eps.url[i]);
		curl_easy_setopt(e, CURLOPT_URL, url);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		rc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(e);
		if (rc != CURLE_OK || status != 200 || !b.data) {
			free(b.data);
			return -1;
		}
		for (char *save = NULL, *line = strtok_r(b.data, "\n", &save);
		     line; line = strtok_r(NULL, "\n", &save))
			take_line(c, line);
		free(b.data);
	}
	return 0;
}

json_t *counters_delta(const struct counters *a, const struct counters *b)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < b->n; i++) {
		double was = 0;
		for (size_t j = 0; j < a->n; j++)
			if (strcmp(a->name[j], b->name[i]) == 0)
				was = a->value[j];
		if (b->value[i] - was != 0)
			json_object_set_new(o, b->name[i],
					    json_real(b->value[i] - was));
	}
	return o;
}
