/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_conf.c - the value of dlaunch's --rdzv-conf (rdzv_conf.h):
 * KEY=VALUE pairs separated by commas. The rendezvous durations are one
 * table of keys, fields and least values; node_id is a name; the etcd
 * backend's keys go to etcd_options.c. A key nobody knows is refused with
 * the list of the known ones.
 */
#include "rdzv_conf.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "etcd_options.h"

/* The --rdzv-conf durations: key, field, least value (ms). */
static const struct rdzv_conf_key {
	const char *key;
	size_t offset;
	uint64_t min_ms;
} rdzv_conf_keys[] = {
    {"join_timeout", offsetof(struct launcher_options, cfg.join_timeout_ms), 1},
    {"last_call_timeout",
     offsetof(struct launcher_options, cfg.last_call_timeout_ms), 0},
    {"heartbeat_interval",
     offsetof(struct launcher_options, cfg.heartbeat_interval_ms), 10},
    {"heartbeat_timeout",
     offsetof(struct launcher_options, cfg.heartbeat_timeout_ms), 10},
    {"read_timeout", offsetof(struct launcher_options, cfg.read_timeout_ms),
     10},
    {"progress_timeout",
     offsetof(struct launcher_options, cfg.progress_timeout_ms), 0},
};
#define N_CONF_KEYS (sizeof(rdzv_conf_keys) / sizeof(rdzv_conf_keys[0]))

/* unknown_conf_key names every key --rdzv-conf knows. */
static int unknown_conf_key(const char *key, char *err, size_t es)
{
	char known[512], etcd[256];
	size_t n = 0;
	for (size_t i = 0; i < N_CONF_KEYS; i++)
		n += (size_t)snprintf(known + n, sizeof(known) - n, "%s, ",
				      rdzv_conf_keys[i].key);
	launcher_etcd_conf_keys(etcd, sizeof(etcd));
	snprintf(known + n, sizeof(known) - n,
		 "node_id; with --rdzv-backend etcd: %s", etcd);
	return dl_errorf(err, es, DL_EINVAL,
			 "--rdzv-conf key '%s' is not supported (known: %s)",
			 key, known);
}

/* set_conf_pair applies one KEY=VALUE of --rdzv-conf (tok is modified). */
static int set_conf_pair(struct launcher_options *o, char *tok, char *err,
			 size_t es)
{
	char *eq = strchr(tok, '=');
	const char *val;
	size_t i;
	int rc;
	if (!eq)
		return dl_errorf(err, es, DL_EINVAL,
				 "--rdzv-conf '%s' is not KEY=VALUE", tok);
	*eq = '\0';
	val = eq + 1;
	for (i = 0; i < N_CONF_KEYS; i++) {
		const struct rdzv_conf_key *k = &rdzv_conf_keys[i];
		if (strcmp(tok, k->key) != 0)
			continue;
		if (parse_duration_ms(val, 1000, k->min_ms,
				      LAUNCHER_DURATION_MAX_MS,
				      (uint64_t *)((char *)o + k->offset)))
			return dl_errorf(err, es, DL_EINVAL,
					 "--rdzv-conf %s='%s' is not a "
					 "duration (seconds, or with a "
					 "unit such as 500ms)",
					 tok, val);
		return 0;
	}
	rc = launcher_etcd_conf_set(o, tok, val, err, es);
	if (rc != DL_ENOTFOUND)
		return rc;
	if (strcmp(tok, "node_id") != 0)
		return unknown_conf_key(tok, err, es);
	if (!parse_name_valid(val, PARSE_NAME_MAX))
		return dl_errorf(
		    err, es, DL_EINVAL,
		    "--rdzv-conf node_id='%s' must be 1-%d of " PARSE_NAME_RULE,
		    val, PARSE_NAME_MAX);
	snprintf(o->node_id, sizeof(o->node_id), "%s", val);
	return 0;
}

int launcher_rdzv_conf_apply(struct launcher_options *o, const char *v,
			     char *err, size_t es)
{
	char copy[LAUNCHER_CONF_MAX], *save = NULL, *tok;
	int rc = 0;
	if (strlen(v) >= sizeof(copy))
		return dl_errorf(err, es, DL_EINVAL, "--rdzv-conf is too long");
	snprintf(copy, sizeof(copy), "%s", v);
	for (tok = strtok_r(copy, ",", &save); tok && rc == 0;
	     tok = strtok_r(NULL, ",", &save))
		rc = set_conf_pair(o, tok, err, es);
	return rc;
}

void launcher_rdzv_conf_format(const struct launcher_options *o, char *out,
			       size_t size)
{
	const void *base = o;
	size_t k = 0;
	out[0] = '\0';
	for (size_t i = 0; i + 1 < N_CONF_KEYS && k < size; i++) {
		char d[32];
		const struct rdzv_conf_key *c = &rdzv_conf_keys[i];
		opt_format_duration(
		    *(const uint64_t *)((const char *)base + c->offset), d,
		    sizeof(d));
		k += (size_t)snprintf(out + k, size - k, "%s%s=%s",
				      i ? "," : "", c->key, d);
	}
}
