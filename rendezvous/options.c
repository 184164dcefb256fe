/* SPDX-License-Identifier: Apache-2.0 */
/*
 * options.c - dlaunch-rdzv's options: one table on the shared engine, from
 * which parsing, --help (with the defaults of rdzv_server_config_init) and
 * validation come.
 */
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"
#include "options.h"

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

/* the levels --log-level takes (the words completion offers) */
static const char *const log_levels[] = {"error", "warn", "info", "debug",
					 NULL};

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
    {.name = "rerun-after",
     .type = OPT_DURATION,
     RO(cfg.rerun_after_ms),
     .min = 0,
     .max = UINT64_C(86400000) * 365,
     .metavar = "DURATION",
     .help = "a join this long after its job ended starts a new run of "
	     "that job id; sooner it is refused as late for the run that "
	     "ended; 0: never rerun (docs/http-api.md, Ended jobs)"},
    {.name = "log-level",
     .type = OPT_CALLBACK,
     RO(log_level),
     .set = set_log_level,
     .choices = log_levels,
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

void rdzv_options_init(struct rdzv_options *o)
{
	memset(o, 0, sizeof(*o));
	rdzv_server_config_init(&o->cfg);
	o->log_level = -1;
}

const struct opt_table *rdzv_option_table(void)
{
	return &rdzv_table;
}
