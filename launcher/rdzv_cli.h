/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv_cli.h - what `dlaunch status` and `dlaunch dump` share to reach a
 * job (launcher/ only): the rendezvous options (the backend, its endpoint,
 * --rdzv-conf for etcd, a dlaunch-rdzv's token and CA) as entries of an
 * option table, the backend's check, the etcd configuration read as
 * dlaunch reads it, and the HTTP client to a dlaunch-rdzv.
 */
#ifndef DLAUNCH_LAUNCHER_RDZV_CLI_H
#define DLAUNCH_LAUNCHER_RDZV_CLI_H
#include <stddef.h>

#include "dlaunch/opt.h"

struct event_base;
struct client;
struct launcher_options;

/* the options, a member of the subcommand's option struct */
struct rdzv_cli {
	const char *backend; /* one of rdzv_cli_backends, NULL: dlaunch */
	const char *conf;
	const char *endpoint;
	const char *token_file;
	const char *ca_file;
};

/* --rdzv-backend's names (the words completion offers): a dlaunch-rdzv
 * server for the first two, etcd for the rest */
extern const char *const rdzv_cli_backends[];

/* RDZV_CLI_SPECS(T, M): the option table entries of struct rdzv_cli M in
 * the subcommand's options T; --rdzv-id is the subcommand's own */
#define RDZV_CLI_SPECS(T, M)                                                   \
	{.name = "rdzv-backend",                                               \
	 .type = OPT_STRING,                                                   \
	 OPT_FIELD(T, M.backend),                                              \
	 .choices = rdzv_cli_backends,                                         \
	 .env = "PET_RDZV_BACKEND",                                            \
	 .metavar = "NAME",                                                    \
	 .unset = "dlaunch",                                                   \
	 .help = "dlaunch (or c10d): a dlaunch-rdzv server; etcd (or "         \
		 "etcd-v1, etcd-v2, etcd-v3): the job's keys in etcd"},        \
	    {.name = "rdzv-endpoint",                                          \
	     .type = OPT_STRING,                                               \
	     .flags = OPT_EMPTY_UNSET,                                         \
	     OPT_FIELD(T, M.endpoint),                                         \
	     .env = "PET_RDZV_ENDPOINT",                                       \
	     .metavar = "HOST:PORT|URL",                                       \
	     .unset = "$PET_RDZV_ENDPOINT; required",                          \
	     .help = "the dlaunch-rdzv server, or the etcd members "           \
		     "(HOST[:PORT],...)"},                                     \
	    {.name = "rdzv-conf",                                              \
	     .type = OPT_STRING,                                               \
	     OPT_FIELD(T, M.conf),                                             \
	     .env = "PET_RDZV_CONF",                                           \
	     .metavar = "K=V,...",                                             \
	     .help = "with etcd: dlaunch's --rdzv-conf (protocol, cacert, "    \
		     "cert, key, username, password_file, key_prefix are "     \
		     "used)"},                                                 \
	    {.name = "rdzv-token-file",                                        \
	     .type = OPT_STRING,                                               \
	     OPT_FIELD(T, M.token_file),                                       \
	     .metavar = "FILE",                                                \
	     .help = "bearer token for a dlaunch-rdzv started with "           \
		     "--token-file"},                                          \
	{                                                                      \
		.name = "rdzv-ca", .type = OPT_STRING,                         \
		OPT_FIELD(T, M.ca_file), .metavar = "FILE",                    \
		.help = "CA certificate to verify a TLS dlaunch-rdzv "         \
			"(implies https)"                                      \
	}

/* rdzv_cli_is_etcd: 1 for an etcd backend, 0 for a dlaunch-rdzv, -1
 * (said on stderr, for the subcommand cmd) for a name that is neither */
int rdzv_cli_is_etcd(const struct rdzv_cli *o, const char *cmd);

/* rdzv_cli_etcd_config reads --rdzv-conf as dlaunch does (files checked,
 * the password read) into lo, which it initialises. 0, or an error in
 * err. */
int rdzv_cli_etcd_config(const struct rdzv_cli *o, struct launcher_options *lo,
			 char *err, size_t es);

/* rdzv_cli_client makes the event loop and the client to the dlaunch-rdzv
 * of o (its token read). 0; 2 for a token file that cannot be used, 1
 * otherwise (said on stderr). What was made is freed by
 * rdzv_cli_client_free, also after an error. */
int rdzv_cli_client(const struct rdzv_cli *o, struct event_base **base,
		    struct client **c);
void rdzv_cli_client_free(struct event_base *base, struct client *c);

#endif
