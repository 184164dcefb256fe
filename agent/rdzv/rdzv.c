/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rdzv.c - what every rendezvous backend shares (see rdzv.h): posting
 * answers to the loop it was given, reading an answer's action, and what
 * a node announces when it joins (its address, a free port for the
 * master).
 */
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "dlaunch/agent.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"
#include "rdzv.h"

/* parse_round reads an assignment (the answer of a join) into out, and
 * the heartbeat interval it asks for into *hb. */
static int parse_round(json_t *j, int nproc, struct agent_round *out,
		       uint64_t *hb, char *err, size_t es)
{
	uint64_t round, node_rank, nnodes, world, offset, port, rc = 0;
	const char *maddr = NULL;
	if (jsonh_get_u64(j, "round", 1, 0, UINT64_MAX, &round, err, es) ||
	    jsonh_get_u64(j, "node_rank", 1, 0, 1 << 20, &node_rank, err, es) ||
	    jsonh_get_u64(j, "nnodes", 1, 1, 1 << 20, &nnodes, err, es) ||
	    jsonh_get_u64(j, "world_size", 1, 1, 1 << 30, &world, err, es) ||
	    jsonh_get_u64(j, "rank_offset", 1, 0, 1 << 30, &offset, err, es) ||
	    jsonh_get_str(j, "master_addr", 1, 255, &maddr, err, es) ||
	    jsonh_get_u64(j, "master_port", 1, 1, 65535, &port, err, es) ||
	    jsonh_get_u64(j, "restart_count", 0, 0, 1000000, &rc, err, es) ||
	    jsonh_get_u64(j, "heartbeat_interval_ms", 0, 10, 3600000, hb, err,
			  es))
		return DL_EPROTO;
	if (offset + (uint64_t)nproc > world || node_rank >= nnodes ||
	    !agent_rdzv_safe_addr(maddr)) {
		snprintf(err, es, "inconsistent round assignment");
		return DL_EPROTO;
	}
	memset(out, 0, sizeof(*out));
	out->round = round;
	out->node_rank = (int)node_rank;
	out->nnodes = (int)nnodes;
	out->world_size = (int)world;
	out->rank_offset = (int)offset;
	out->restart_count = (int)rc;
	snprintf(out->master_addr, sizeof(out->master_addr), "%s", maddr);
	out->master_port = (unsigned)port;
	return 0;
}

void agent_rdzv_post(struct agent_rdzv *r, struct agent_event *ev)
{
	r->loop.post(r->loop.ctx, ev);
}

void agent_rdzv_post_kind(struct agent_rdzv *r, enum agent_event_kind kind,
			  uint64_t round)
{
	struct agent_event ev;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.round = round;
	agent_rdzv_post(r, &ev);
}

int agent_rdzv_post_joined(struct agent_rdzv *r, json_t *assignment, int nproc,
			   uint64_t *heartbeat_interval_ms)
{
	struct agent_event ev;
	char err[256];
	const char *mnode = NULL;
	uint64_t hb = *heartbeat_interval_ms;
	memset(&ev, 0, sizeof(ev));
	if (parse_round(assignment, nproc, &ev.assign, &hb, err, sizeof(err)) !=
	    0) {
		log_error("bad join answer from rendezvous: %s", err);
		return DL_EPROTO;
	}
	*heartbeat_interval_ms = hb;
	/* which node the master address is, for whoever cannot reach it */
	if (jsonh_get_str(assignment, "master_node", 0, 255, &mnode, NULL, 0) ||
	    (mnode && !agent_rdzv_safe_addr(mnode)))
		mnode = NULL;
	log_info("round %llu: node rank %d of %d, ranks %d-%d of %d, master "
		 "%s:%u%s%s%s, restart %d",
		 (unsigned long long)ev.assign.round, ev.assign.node_rank,
		 ev.assign.nnodes, ev.assign.rank_offset,
		 ev.assign.rank_offset + nproc - 1, ev.assign.world_size,
		 ev.assign.master_addr, ev.assign.master_port,
		 mnode ? " (node " : "", mnode ? mnode : "", mnode ? ")" : "",
		 ev.assign.restart_count);
	ev.kind = AGENT_EV_JOINED;
	agent_rdzv_post(r, &ev);
	return 0;
}

int agent_rdzv_post_action(struct agent_rdzv *r, uint64_t round,
			   const char *action, const char *job_state)
{
	struct agent_event ev;
	if (!action)
		return 0;
	memset(&ev, 0, sizeof(ev));
	if (strcmp(action, "restart") == 0)
		ev.kind = AGENT_EV_RESTART;
	else if (strcmp(action, "stop") == 0)
		ev.kind = AGENT_EV_STOP;
	else
		return 0;
	ev.round = round;
	snprintf(ev.job_state, sizeof(ev.job_state), "%s",
		 job_state ? job_state : "");
	agent_rdzv_post(r, &ev);
	return 1;
}

int agent_rdzv_post_preempt(struct agent_rdzv *r, uint64_t round,
			    json_t *answer)
{
	struct agent_event ev;
	uint64_t step = 0;
	if (!json_is_object(answer) ||
	    jsonh_get_u64(answer, "preempt_step", 0, 1, UINT64_MAX / 2, &step,
			  NULL, 0) != 0 ||
	    step == 0)
		return 0;
	memset(&ev, 0, sizeof(ev));
	ev.kind = AGENT_EV_PREEMPT;
	ev.round = round;
	ev.step = step;
	agent_rdzv_post(r, &ev);
	return 1;
}

/* agent_rdzv_free_port binds port 0 and gives the port the kernel chose. */
unsigned agent_rdzv_free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	unsigned port = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

int agent_rdzv_safe_addr(const char *s)
{
	if (!*s || strlen(s) > 255)
		return 0;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || strchr(".:-_%[]", *s)))
			return 0;
	return 1;
}

/* agent_rdzv_route_addr finds the source address this host uses to reach
 * endpoint (the UDP connect trick: nothing is sent); "" when unknown. */
void agent_rdzv_route_addr(const char *endpoint, uint16_t default_port,
			   char *out, size_t size)
{
	char host[256];
	uint16_t port;
	struct addrinfo hints, *res = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const char *ep = endpoint;
	int fd;
	out[0] = '\0';
	if (strncmp(ep, "http://", 7) == 0)
		ep += 7;
	else if (strncmp(ep, "https://", 8) == 0)
		ep += 8;
	{
		char tmp[512];
		snprintf(tmp, sizeof(tmp), "%s", ep);
		char *slash = strchr(tmp, '/');
		if (slash)
			*slash = '\0';
		if (parse_host_port(tmp, default_port, 0, host, sizeof(host),
				    &port) != 0)
			return;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, "9", &hints, &res) != 0 || !res)
		return;
	fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)size,
			    NULL, 0, NI_NUMERICHOST);
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
}

/* agent_rdzv_local_addr: the route to the server unless it is loopback
 * (a head that reaches the server by its own name, which /etc/hosts maps
 * to 127.0.1.1), then an interface address (agent_addr_pick). Says in
 * the log what it announces and why. Runs before the loop starts. */
void agent_rdzv_local_addr(const char *endpoint, uint16_t default_port,
			   char *out, size_t size)
{
	char route[AGENT_ADDR_MAX], dflt[AGENT_ADDR_MAX];
	char ifs[16][AGENT_ADDR_MAX];
	const char *cands[17];
	size_t n = 0, nc = 0;
	enum agent_addr_from from;
	agent_rdzv_route_addr(endpoint, default_port, route, sizeof(route));
	if (agent_addr_is_loopback(route)) {
		/* the default route's source first (no packet is sent: the
		 * address only picks a route), so a host with a bridge such
		 * as docker0 still announces the address the others reach */
		agent_rdzv_route_addr("192.0.2.1", 9, dflt, sizeof(dflt));
		if (dflt[0])
			cands[nc++] = dflt;
		n = agent_addr_interfaces(ifs, 16);
	}
	for (size_t i = 0; i < n; i++)
		cands[nc++] = ifs[i];
	from = agent_addr_pick(route, cands, nc, out, size);
	log_info("announcing address %s (from %s)", out[0] ? out : "-",
		 agent_addr_from_name(from));
}
