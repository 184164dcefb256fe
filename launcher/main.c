/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - dlaunch: parse the command line, pick the mode, run the agent.
 *
 * --standalone embeds the rendezvous server (rdzv_server.h) on 127.0.0.1
 * at a free port in the same event loop as the agent; --rdzv-endpoint
 * talks to a dlaunch-rdzv; otherwise static mode. Only this file decides
 * the exit status: 0 job succeeded, 1 failed, 2 usage error, 128+N signal.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "dlaunch/fsutil.h"
#include "launcher.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "dlaunch/rdzv_server.h"
#include "dlaunch/spawn.h"

extern char **environ;

static int usage_error(const char *msg)
{
	fprintf(stderr, "dlaunch: error: %s\n", msg);
	return 2;
}

/* resolve_nproc turns --nproc-per-node gpu|cpu|auto into cfg.nproc (a
 * number is there already). */
static int resolve_nproc(struct launcher_options *o, char *err, size_t es)
{
	int kind = o->nproc_kind;
	if (kind == LAUNCHER_NPROC_GPU || kind == LAUNCHER_NPROC_AUTO) {
		int g = launcher_count_gpus();
		if (g > 0) {
			o->cfg.nproc = g;
			return 0;
		}
		if (kind == LAUNCHER_NPROC_GPU) {
			snprintf(err, es,
				 "--nproc-per-node gpu: no NVIDIA GPU this job "
				 "may use on this node (none found, or none in "
				 "CUDA_VISIBLE_DEVICES); --nproc-per-node auto "
				 "runs one worker per CPU then");
			return DL_ENOTFOUND;
		}
	}
	if (kind == LAUNCHER_NPROC_CPU || kind == LAUNCHER_NPROC_AUTO)
		o->cfg.nproc = launcher_count_cpus();
	return 0;
}

/* check_program finds the program (and the script of a *.py) before any
 * node joins, so a typo is a usage error, not a failed job. */
static int check_program(struct launcher_options *o, char **wargv, char *err,
			 size_t es)
{
	char path[4096];
	if (spawn_resolve(wargv[0], path, sizeof(path), err, es) != 0)
		return DL_ENOTFOUND;
	if (!o->no_python && !o->module && wargv[0] != o->program[0] &&
	    access(o->program[0], R_OK) != 0) {
		snprintf(err, es, "cannot run '%s': %s", o->program[0],
			 strerror(errno));
		return DL_ENOTFOUND;
	}
	return 0;
}

/* default_node_id: DLAUNCH_NODE_ID (held to the server's name rule, so a
 * bad one is a usage error, not a refused join), else HOST-PID. */
static int default_node_id(char *out, size_t size, char *err, size_t es)
{
	char host[256];
	const char *env = getenv("DLAUNCH_NODE_ID");
	if (env && *env) {
		if (!parse_name_valid(env, size - 1)) {
			snprintf(err, es,
				 "DLAUNCH_NODE_ID '%.200s' must be 1-%zu "
				 "of " PARSE_NAME_RULE,
				 env, size - 1);
			return DL_EINVAL;
		}
		snprintf(out, size, "%s", env);
		return 0;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "node");
	host[sizeof(host) - 1] = '\0';
	snprintf(out, size, "%.100s-%ld", host, (long)getpid());
	parse_name_sanitize(out);
	return 0;
}

/* start_embedded runs a rendezvous server on 127.0.0.1 at a free port in
 * base's loop (--standalone) and points cfg at it: endpoint and run_id
 * are the caller's buffers cfg keeps pointing to. A job id not given gets
 * a random one, so two standalone jobs never share one. */
static int start_embedded(struct event_base *base, struct agent_config *cfg,
			  struct rdzv_server **srv, char *endpoint,
			  size_t endpoint_size, char *run_id,
			  size_t run_id_size)
{
	struct rdzv_server_config scfg;
	unsigned char rnd[6];
	char err[1024];
	rdzv_server_config_init(&scfg);
	scfg.listen = "127.0.0.1:0";
	if (rdzv_server_new(base, &scfg, srv, err, sizeof(err)) != 0) {
		log_error("cannot start the embedded rendezvous: %s", err);
		return -1;
	}
	snprintf(endpoint, endpoint_size, "127.0.0.1:%u",
		 (unsigned)rdzv_server_port(*srv));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	snprintf(run_id, run_id_size, "standalone-%02x%02x%02x%02x%02x%02x",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
	if (strcmp(cfg->run_id, "none") != 0)
		snprintf(run_id, run_id_size, "%s", cfg->run_id);
	cfg->mode = AGENT_MODE_RDZV;
	cfg->endpoint = endpoint;
	cfg->run_id = run_id;
	if (!cfg->local_addr)
		cfg->local_addr = "127.0.0.1";
	cfg->last_call_timeout_ms = 0;
	return 0;
}

/* resolve_local_addr settles the address this node announces when one is
 * forced (--local-addr, PET_LOCAL_ADDR, else DLAUNCH_ADDR): a name is
 * resolved here, once, to a numeric address (the rendezvous takes only
 * addresses), preferring one that is not loopback. */
static int resolve_local_addr(struct agent_config *cfg, char *buf, size_t size,
			      char *err, size_t es)
{
	struct addrinfo hints, *res = NULL;
	const char *from = "--local-addr";
	unsigned char tmp[sizeof(struct in6_addr)];
	int gai;
	if (!cfg->local_addr) {
		const char *env = getenv("DLAUNCH_ADDR");
		if (!env || !*env)
			return 0;
		cfg->local_addr = env;
		from = "DLAUNCH_ADDR";
	}
	if (inet_pton(AF_INET, cfg->local_addr, tmp) == 1 ||
	    inet_pton(AF_INET6, cfg->local_addr, tmp) == 1) {
		log_info("announcing address %s (from %s)", cfg->local_addr,
			 from);
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	gai = getaddrinfo(cfg->local_addr, NULL, &hints, &res);
	if (gai != 0 || !res) {
		snprintf(err, es, "cannot resolve %s '%s': %s", from,
			 cfg->local_addr,
			 gai ? gai_strerror(gai) : "no address");
		return DL_EINVAL;
	}
	buf[0] = '\0';
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		char h[NI_MAXHOST];
		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, h, sizeof(h), NULL,
				0, NI_NUMERICHOST) != 0)
			continue;
		if (!buf[0] ||
		    (agent_addr_is_loopback(buf) && !agent_addr_is_loopback(h)))
			snprintf(buf, size, "%s", h);
	}
	freeaddrinfo(res);
	if (!buf[0]) {
		snprintf(err, es, "cannot resolve %s '%s'", from,
			 cfg->local_addr);
		return DL_EINVAL;
	}
	log_info("announcing address %s (from %s %s)", buf, from,
		 cfg->local_addr);
	cfg->local_addr = buf;
	return 0;
}

int main(int argc, char **argv)
{
	struct launcher_options o;
	struct agent_config *cfg;
	struct event_base *base = NULL;
	struct agent *agent = NULL;
	struct rdzv_server *srv = NULL;
	char err[1024], endpoint[300], run_id[64], local_addr[NI_MAXHOST];
	char **wargv = NULL;
	char *token = NULL;
	int status = 1;

	log_init("dlaunch");
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "status") == 0)
		return status_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "dump") == 0)
		return dump_main(argc - 1, argv + 1);
	if (launcher_parse_options(argc, argv, environ, &o, err, sizeof(err)) !=
	    0)
		return usage_error(err);
	if (o.help) {
		launcher_usage(stdout);
		return 0;
	}
	if (resolve_nproc(&o, err, sizeof(err)) != 0)
		return usage_error(err);
	wargv = launcher_worker_argv(&o, getenv("PYTHON_EXEC"));
	if (!wargv)
		return usage_error("out of memory");
	if (check_program(&o, wargv, err, sizeof(err)) != 0) {
		free(wargv);
		return usage_error(err);
	}
	if (o.token_file &&
	    fs_read_token(o.token_file, &token, err, sizeof(err)) != 0) {
		free(wargv);
		return usage_error(err);
	}
	if (!o.node_id[0] &&
	    default_node_id(o.node_id, sizeof(o.node_id), err, sizeof(err))) {
		free(wargv);
		free(token);
		return usage_error(err);
	}

	cfg = &o.cfg;
	if (resolve_local_addr(cfg, local_addr, sizeof(local_addr), err,
			       sizeof(err)) != 0) {
		free(wargv);
		free(token);
		return usage_error(err);
	}
	cfg->argv = wargv;
	cfg->token = token;

	base = event_base_new();
	if (!base) {
		log_error("cannot create the event loop");
		goto out;
	}
	if (o.standalone &&
	    start_embedded(base, cfg, &srv, endpoint, sizeof(endpoint), run_id,
			   sizeof(run_id)) != 0)
		goto out;
	if (agent_new(base, cfg, &agent, err, sizeof(err)) != 0 ||
	    agent_start(agent, err, sizeof(err)) != 0) {
		log_error("%s", err);
		goto out;
	}
	event_base_dispatch(base);
	status = agent_exit_status(agent);
out:
	agent_free(agent);
	rdzv_server_free(srv);
	if (base)
		event_base_free(base);
	free(wargv);
	free(token);
	return status;
}
