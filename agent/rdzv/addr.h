/* SPDX-License-Identifier: Apache-2.0 */
/*
 * addr.h - the address a node announces (addr.c); private to agent/
 * but for agent_addr_is_loopback, which dlaunch/agent.h offers the
 * launcher.
 */
#ifndef DLAUNCH_AGENT_ADDR_H
#define DLAUNCH_AGENT_ADDR_H
#include <stddef.h>

#include "dlaunch/agent.h"

#define AGENT_ADDR_MAX 64 /* a numeric IPv4/IPv6 address, scope included */

/* Where an announced address came from (for the log and error lines). */
enum agent_addr_from {
	AGENT_ADDR_ROUTE,     /* the source address toward the rendezvous */
	AGENT_ADDR_INTERFACE, /* an interface: the route was loopback */
	AGENT_ADDR_LOOPBACK,  /* loopback, for want of anything else */
	AGENT_ADDR_SERVER,    /* none: the server uses the peer address */
};
const char *agent_addr_from_name(enum agent_addr_from from);

/* agent_addr_pick chooses what this node announces from route (its
 * numeric source address toward the rendezvous, "" when unknown) and
 * this host's interface addresses (numeric, in the system's order): the
 * route unless it is loopback (or link-local), else the first candidate
 * other hosts can reach (IPv4 first; the caller puts the default route's
 * source first), else the route as it is; no route: "" (the
 * server uses the address it sees). Writes out and says where it came
 * from. */
enum agent_addr_from agent_addr_pick(const char *route,
				     const char *const *candidates, size_t n,
				     char *out, size_t size);

/* agent_addr_interfaces lists the addresses of agent_addr_interface_list
 * that are not loopback (numeric: the candidates an agent may announce)
 * into out; returns how many (at most max). */
size_t agent_addr_interfaces(char (*out)[AGENT_ADDR_MAX], size_t max);

/* One address of an interface, as getifaddrs lists it. */
struct agent_addr_if {
	char name[32];
	char addr[AGENT_ADDR_MAX]; /* numeric */
};

/* agent_addr_ifname: the name of the interface in ifs that holds addr (a
 * numeric address; an IPv6 scope is ignored), or NULL. */
const char *agent_addr_ifname(const char *addr, const struct agent_addr_if *ifs,
			      size_t n);

/*
 * agent_addr_socket_ifname decides which interface PyTorch's transports
 * (gloo, NCCL's socket bootstrap) must use, since they take their address
 * from the host name: when the host name resolves to nothing but loopback
 * (host_addrs: its numeric addresses, n_host of them; none: it does not
 * resolve) and announced (what this node announced to the others) is a
 * non-loopback address held by an interface of ifs, that interface's name
 * goes to out and it returns 1; otherwise "" and 0 (the host name is
 * reachable, or nothing better is known).
 */
int agent_addr_socket_ifname(const char *announced,
			     const char *const *host_addrs, size_t n_host,
			     const struct agent_addr_if *ifs, size_t n_ifs,
			     char *out, size_t size);

/* agent_addr_interface_list lists this host's up interface addresses with
 * their interface names (loopback included) into out; returns how many. */
size_t agent_addr_interface_list(struct agent_addr_if *out, size_t max);

/* agent_addr_host_addrs resolves this host's name into out (numeric;
 * *host: the name); returns how many (0: it does not resolve). */
size_t agent_addr_host_addrs(char (*out)[AGENT_ADDR_MAX], size_t max,
			     char *host, size_t host_size);

#endif
