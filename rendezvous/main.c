/*
 * main.c - dlaunch-rdzv, the rendezvous server's command line: options,
 * the event loop, signals. Everything else is librdzv (rdzv_server.h).
 * The options are a table on the shared engine (dlaunch/opt.h), parsed
 * straight into struct rdzv_server_config; --help shows the defaults of
 * rdzv_server_config_init.
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

struct rdzv_options {
	struct rdzv_server_config cfg; /* parsed straight into */
	int help;
	const char *token_file;
	int log_level; /* enum log_level; -1: DLAUNCH_LOG_LEVEL or info */
};

#define RO(f) OPT_FIELD(struct rdzv_options, f)

static int set_log_level(const struct opt_spec *s, void *base, const char *v,
			 char *err, size_t es)
{
	enum log_level level;
	if (log_level_parse(v, &level) != 0)
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' is not error, warn, info or debug",
				 s->name, v);
	((struct rdzv_options *)base)->log_level = (int)level;
	return 0;
}

static const struct opt_spec rdzv_specs[] = {
    {.name = "listen",
     .type = OPT_STRING,
     RO(cfg.listen),
     .min = 1,
     .max = 300,
     .metavar = "HOST:PORT",
     .help = "address to serve; port 0 picks a free port; the bound address "
	     "is printed as 'listening on HOST:PORT'"},
    {.name = "token-file",
     .type = OPT_STRING,
     RO(token_file),
     .metavar = "FILE",
     .unset = "$DLAUNCH_TOKEN, else no token",
     .help = "require 'Authorization: Bearer <token>' on every endpoint but "
	     "/healthz (the file's first line)"},
    {.name = "tls-cert",
     .type = OPT_STRING,
     RO(cfg.tls_cert_file),
     .metavar = "FILE",
     .help = "PEM certificate chain: serve HTTPS only"},
    {.name = "tls-key",
     .type = OPT_STRING,
     RO(cfg.tls_key_file),
     .metavar = "FILE",
     .help = "PEM private key for --tls-cert"},
    {.name = "state-dir",
     .type = OPT_STRING,
     RO(cfg.state_dir),
     .metavar = "DIR",
     .unset = "none: state in memory only",
     .help = "journal every state change there (fsync) and recover the "
	     "jobs from it on start"},
    {.name = "max-body",
     .type = OPT_SIZE,
     RO(cfg.max_body_bytes),
     .min = 1024,
     .max = 1ULL << 30,
     .metavar = "SIZE",
     .help = "largest request body (413 beyond)"},
    {.name = "max-header",
     .type = OPT_SIZE,
     RO(cfg.max_header_bytes),
     .min = 1024,
     .max = 1ULL << 20,
     .metavar = "SIZE",
     .help = "largest request header block"},
    {.name = "max-jobs",
     .type = OPT_UINT,
     RO(cfg.max_jobs),
     .min = 1,
     .max = 1000000,
     .metavar = "N",
     .help = "most jobs kept (ended jobs are forgotten first)"},
    {.name = "max-nodes",
     .type = OPT_UINT,
     RO(cfg.max_nodes_per_job),
     .min = 1,
     .max = 1000000,
     .metavar = "N",
     .help = "most nodes per job"},
    {.name = "idle-timeout",
     .type = OPT_DURATION,
     RO(cfg.idle_timeout_ms),
     .min = 100,
     .max = 3600000,
     .metavar = "DURATION",
     .help = "close idle or slow connections"},
    {.name = "log-level",
     .type = OPT_CALLBACK,
     RO(log_level),
     .set = set_log_level,
     .metavar = "LEVEL",
     .unset = "$DLAUNCH_LOG_LEVEL, else info",
     .help = "error, warn, info or debug"},
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     RO(help),
     .help = "show this help and exit"},
    {.name = NULL},
};

static const struct opt_table rdzv_table = {
    .prog = "dlaunch-rdzv",
    .usage = "usage: dlaunch-rdzv [options]\n"
	     "\n"
	     "The dlaunch rendezvous server: jobs, rounds, membership, ranks,\n"
	     "heartbeats, failure reports and a small key-value store over "
	     "HTTP(S)\n(API: docs/http-api.md).\n"
	     "\n",
    .footer = "SIGTERM or SIGINT: answer pending long polls, stop, exit 0.\n",
    .specs = rdzv_specs,
    .flags = OPT_ABBREV,
};

static void rdzv_options_init(struct rdzv_options *o)
{
	memset(o, 0, sizeof(*o));
	rdzv_server_config_init(&o->cfg);
	o->log_level = -1;
}

/* parse_options reads the command line into o and the token into *token;
 * returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct rdzv_options *o,
			 char **token)
{
	const char *env_token = getenv("DLAUNCH_TOKEN");
	char err[512];
	int next;

	rdzv_options_init(o);
	if (opt_parse(&rdzv_table, o, argc, argv, NULL, &next, err,
		      sizeof(err)) != 0) {
		fprintf(stderr, "dlaunch-rdzv: %s\n", err);
		return 2;
	}
	if (o->help) {
		struct rdzv_options defaults;
		rdzv_options_init(&defaults);
		opt_usage(&rdzv_table, &defaults, stdout);
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
