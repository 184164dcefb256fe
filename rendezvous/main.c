/*
 * main.c - dlaunch-rdzv, the rendezvous server's command line: options,
 * the event loop, signals. Everything else is librdzv (rdzv_server.h).
 */
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/rdzv_server.h"

static const char usage[] =
    "usage: dlaunch-rdzv [options]\n"
    "\n"
    "The dlaunch rendezvous server: jobs, rounds, membership, ranks,\n"
    "heartbeats, failure reports and a small key-value store over HTTP(S)\n"
    "(API: docs/http-api.md).\n"
    "\n"
    "  --listen HOST:PORT     address to serve (default 127.0.0.1:29400);\n"
    "                         port 0 picks a free port; the bound address\n"
    "                         is printed as 'listening on HOST:PORT'\n"
    "  --token-file FILE      require 'Authorization: Bearer <token>' on\n"
    "                         every endpoint but /healthz (the file's first\n"
    "                         line); DLAUNCH_TOKEN sets it too\n"
    "  --tls-cert FILE        PEM certificate chain: serve HTTPS only\n"
    "  --tls-key FILE         PEM private key for --tls-cert\n"
    "  --state-dir DIR        journal every state change there (fsync) and\n"
    "                         recover the jobs from it on start\n"
    "  --max-body SIZE        largest request body (default 64KiB; 413)\n"
    "  --max-header SIZE      largest request header block (default 16KiB)\n"
    "  --max-jobs N           most jobs kept (default 1024; ended jobs are\n"
    "                         forgotten first)\n"
    "  --max-nodes N          most nodes per job (default 65536)\n"
    "  --idle-timeout DUR     close idle or slow connections (default 60s)\n"
    "  --log-level LEVEL      error, warn, info (default) or debug\n"
    "  -h, --help             this text\n"
    "\n"
    "SIGTERM or SIGINT: answer pending long polls, stop, exit 0.\n";

enum {
	OPT_LISTEN = 256,
	OPT_TOKEN_FILE,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_STATE_DIR,
	OPT_MAX_BODY,
	OPT_MAX_HEADER,
	OPT_MAX_JOBS,
	OPT_MAX_NODES,
	OPT_IDLE_TIMEOUT,
	OPT_LOG_LEVEL,
};

static const struct option options[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"max-header", required_argument, NULL, OPT_MAX_HEADER},
    {"max-jobs", required_argument, NULL, OPT_MAX_JOBS},
    {"max-nodes", required_argument, NULL, OPT_MAX_NODES},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int bad_value(const char *opt, const char *value, const char *want)
{
	fprintf(stderr, "dlaunch-rdzv: invalid %s '%s' (%s)\n", opt, value,
		want);
	return 2;
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
	struct rdzv_server_config cfg;
	struct rdzv_server *srv = NULL;
	struct event_base *base = NULL;
	struct event *sigterm = NULL, *sigint = NULL;
	char *token = NULL, err[512] = "";
	const char *env_token = getenv("DLAUNCH_TOKEN");
	void *sig_args[2];
	enum log_level level;
	uint64_t v;
	int c, status = 1;

	log_init("dlaunch-rdzv");
	rdzv_server_config_init(&cfg);
	while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		switch (c) {
		case OPT_LISTEN: cfg.listen = optarg; break;
		case OPT_TOKEN_FILE:
			free(token);
			if (fs_read_token(optarg, &token, err, sizeof(err))) {
				fprintf(stderr, "dlaunch-rdzv: %s\n", err);
				return 2;
			}
			break;
		case OPT_TLS_CERT: cfg.tls_cert_file = optarg; break;
		case OPT_TLS_KEY: cfg.tls_key_file = optarg; break;
		case OPT_STATE_DIR: cfg.state_dir = optarg; break;
		case OPT_MAX_BODY:
			if (parse_size_bytes(optarg, 1024, 1ull << 30, &v))
				return bad_value("--max-body", optarg,
						 "a size from 1KiB to 1GiB");
			cfg.max_body_bytes = (size_t)v;
			break;
		case OPT_MAX_HEADER:
			if (parse_size_bytes(optarg, 1024, 1u << 20, &v))
				return bad_value("--max-header", optarg,
						 "a size from 1KiB to 1MiB");
			cfg.max_header_bytes = (size_t)v;
			break;
		case OPT_MAX_JOBS:
			if (parse_u64(optarg, 1, 1000000, &v))
				return bad_value("--max-jobs", optarg,
						 "1 to 1000000");
			cfg.max_jobs = (unsigned)v;
			break;
		case OPT_MAX_NODES:
			if (parse_u64(optarg, 1, 1000000, &v))
				return bad_value("--max-nodes", optarg,
						 "1 to 1000000");
			cfg.max_nodes_per_job = (unsigned)v;
			break;
		case OPT_IDLE_TIMEOUT:
			if (parse_duration_ms(optarg, 1000, 100, 3600000, &v))
				return bad_value("--idle-timeout", optarg,
						 "a duration from 100ms to 1h");
			cfg.idle_timeout_ms = v;
			break;
		case OPT_LOG_LEVEL:
			if (log_level_parse(optarg, &level))
				return bad_value("--log-level", optarg,
						 "error, warn, info or debug");
			log_set_level(level);
			break;
		case 'h': fputs(usage, stdout); return 0;
		default:
			fputs("try 'dlaunch-rdzv --help'\n", stderr);
			free(token);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "dlaunch-rdzv: unexpected argument '%s'\n",
			argv[optind]);
		free(token);
		return 2;
	}
	if (!token && env_token && *env_token)
		token = strdup(env_token);
	cfg.token = token;
	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (!base) {
		fprintf(stderr, "dlaunch-rdzv: cannot create the event loop\n");
		goto out;
	}
	if (rdzv_server_new(base, &cfg, &srv, err, sizeof(err)) != 0) {
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
