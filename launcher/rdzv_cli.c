/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_cli.c - the rendezvous options `dlaunch status` and `dlaunch dump`
 * share (rdzv_cli.h).
 */
#include "rdzv_cli.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/agent_client.h"
#include "dlaunch/fsutil.h"
#include "etcd_options.h"
#include "launcher.h"
#include "rdzv_conf.h"

const char *const rdzv_cli_backends[] = {
    "dlaunch", "c10d", "etcd", "etcd-v1", "etcd-v2", "etcd-v3", NULL};
#define FIRST_ETCD 2

int rdzv_cli_is_etcd(const struct rdzv_cli *o, const char *cmd)
{
	if (!o->backend)
		return 0;
	for (int i = 0; rdzv_cli_backends[i]; i++)
		if (strcmp(o->backend, rdzv_cli_backends[i]) == 0)
			return i >= FIRST_ETCD;
	fprintf(stderr,
		"dlaunch: error: %s: --rdzv-backend %s is not one of dlaunch, "
		"c10d, etcd, etcd-v1, etcd-v2, etcd-v3\n",
		cmd, o->backend);
	return -1;
}

int rdzv_cli_etcd_config(const struct rdzv_cli *o, struct launcher_options *lo,
			 char *err, size_t es)
{
	int rc;
	launcher_options_init(lo);
	lo->rdzv_backend = LAUNCHER_BACKEND_ETCD;
	lo->cfg.mode = AGENT_MODE_ETCD;
	lo->cfg.endpoint = o->endpoint;
	rc = o->conf ? launcher_rdzv_conf_apply(lo, o->conf, err, es) : 0;
	return rc ? rc : launcher_etcd_check(lo, err, es);
}

int rdzv_cli_client(const struct rdzv_cli *o, struct event_base **base,
		    struct client **c)
{
	char err[512], *token = NULL;
	int rc = 1;
	*base = NULL;
	*c = NULL;
	if (o->token_file &&
	    fs_read_token(o->token_file, &token, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch: error: %s\n", err);
		return 2;
	}
	*base = event_base_new();
	if (!*base)
		fprintf(stderr, "dlaunch: error: cannot create event loop\n");
	else if (client_new(*base, o->endpoint, token, o->ca_file, c, err,
			    sizeof(err)) != 0)
		fprintf(stderr, "dlaunch: error: %s\n", err);
	else
		rc = 0;
	free(token);
	return rc;
}

void rdzv_cli_client_free(struct event_base *base, struct client *c)
{
	client_free(c);
	if (base)
		event_base_free(base);
}
