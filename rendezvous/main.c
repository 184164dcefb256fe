/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - dlaunch-rdzv: its command line (the table is options.c), the
 * event loop, signals. Everything else is librdzv (rdzv_server.h).
 */
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "dlaunch/rdzv_server.h"
#include "options.h"

/* parse_options reads the command line into o and the token into *token;
 * returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct rdzv_options *o,
			 char **token)
{
	const char *env_token = getenv("DLAUNCH_TOKEN");
	char err[512];
	int next;

	rdzv_options_init(o);
	if (opt_parse(rdzv_option_table(), o, argc, argv, NULL, &next, err,
		      sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch-rdzv: %s\n", err);
		return 2;
	}
	if (o->help) {
		struct rdzv_options defaults;
		rdzv_options_init(&defaults);
		opt_usage(rdzv_option_table(), &defaults, stdout);
		return 0;
	}
	if (next < argc) {
		fprintf(stderr, "dlaunch-rdzv: unexpected argument '%s'\n",
			argv[next]);
		return 2;
	}
	if (o->log_level >= 0)
		log_set_level((enum log_level)o->log_level);
	if (o->token_file) {
		if (fs_read_token(o->token_file, token, err, sizeof(err))) {
			fprintf(stderr, "dlaunch-rdzv: %s\n", err);
			return 2;
		}
	} else if (env_token && *env_token) {
		*token = strdup(env_token);
	}
	o->cfg.token = *token;
	return -1;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct rdzv_server *srv = ((void **)arg)[0];
	struct event_base *base = ((void **)arg)[1];
	struct timeval flush = {0, 300000};
	(void)what;
	log_info("event=shutdown signal=%d", (int)sig);
	rdzv_server_drain(srv);
	/* give the 503 answers a moment to leave, then stop */
	event_base_loopexit(base, &flush);
}

int main(int argc, char **argv)
{
	struct rdzv_options o;
	struct rdzv_server *srv = NULL;
	struct event_base *base = NULL;
	struct event *sigterm = NULL, *sigint = NULL;
	char *token = NULL, err[512] = "";
	void *sig_args[2];
	int status;

	log_init("dlaunch-rdzv");
	status = parse_options(argc, argv, &o, &token);
	if (status >= 0)
		return status;
	status = 1;
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "dlaunch-rdzv: cannot create the event loop\n");
		goto out;
	}
	if (rdzv_server_new(base, &o.cfg, &srv, err, sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch-rdzv: %s\n", err);
		goto out;
	}
	sig_args[0] = srv;
	sig_args[1] = base;
	sigterm = evsignal_new(base, SIGTERM, on_signal, sig_args);
	sigint = evsignal_new(base, SIGINT, on_signal, sig_args);
	if (!sigterm || !sigint || evsignal_add(sigterm, NULL) ||
	    evsignal_add(sigint, NULL)) {
		fprintf(stderr, "dlaunch-rdzv: cannot handle signals\n");
		goto out;
	}
	if (strchr(rdzv_server_host(srv), ':'))
		printf("listening on [%s]:%u\n", rdzv_server_host(srv),
		       (unsigned)rdzv_server_port(srv));
	else
		printf("listening on %s:%u\n", rdzv_server_host(srv),
		       (unsigned)rdzv_server_port(srv));
	fflush(stdout);
	if (event_base_dispatch(base) < 0) {
		fprintf(stderr, "dlaunch-rdzv: the event loop failed\n");
		goto out;
	}
	status = 0;
out:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	rdzv_server_free(srv);
	if (base)
		event_base_free(base);
	free(token);
	return status;
}
