/* SPDX-License-Identifier: Apache-2.0 */
/*
 * addr.c - which address a node announces to the others (its MASTER_ADDR
 * when it is node rank 0).
 *
 * The source address toward the rendezvous is right on a cluster, but a
 * head that reaches the server by its own host name, which Debian's
 * /etc/hosts maps to 127.0.1.1, or by "localhost", gets a loopback
 * address that no other host can use. Then one of this host's interface
 * addresses is announced instead. agent_addr_pick is the pure rule (unit
 * tested); agent_addr_interfaces reads the candidates from the system.
 *
 * The same host name misleads PyTorch's transports (gloo, NCCL's socket
 * bootstrap), which bind the address their host name resolves to:
 * agent_addr_socket_ifname (pure) names the interface that holds the
 * announced address for GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME, and
 * agent_addr_interface_list / agent_addr_host_addrs read its inputs.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "dlaunch/agent.h"

int agent_addr_is_loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, addr, &a6) != 1)
		return 0;
	if (IN6_IS_ADDR_LOOPBACK(&a6))
		return 1;
	/* ::ffff:127.x.y.z */
	return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}

/* usable: an address other hosts may reach: not loopback, not link-local
 * (169.254/16, fe80::/10: valid on one link only, and without a scope
 * id in an IPv6 literal), not unspecified. family: AF_INET or AF_INET6
 * of the literal. */
static int usable(const char *addr, int *family)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (agent_addr_is_loopback(addr))
		return 0;
	if (inet_pton(AF_INET, addr, &a4) == 1) {
		uint32_t h = ntohl(a4.s_addr);
		*family = AF_INET;
		return h != 0 && (h >> 16) != 0xa9fe;
	}
	if (inet_pton(AF_INET6, addr, &a6) == 1) {
		*family = AF_INET6;
		return !IN6_IS_ADDR_LINKLOCAL(&a6) &&
		       !IN6_IS_ADDR_UNSPECIFIED(&a6);
	}
	return 0;
}

const char *agent_addr_from_name(enum agent_addr_from from)
{
	switch (from) {
	case AGENT_ADDR_ROUTE: return "the route to the rendezvous";
	case AGENT_ADDR_INTERFACE:
		return "an interface of this host, since the route to the "
		       "rendezvous is loopback";
	case AGENT_ADDR_LOOPBACK:
		return "loopback, since this host has no other address: a "
		       "job on this host only";
	case AGENT_ADDR_SERVER: return "the address the rendezvous sees";
	}
	return "?";
}

enum agent_addr_from agent_addr_pick(const char *route,
				     const char *const *candidates, size_t n,
				     char *out, size_t size)
{
	int family = 0;
	if (!route[0]) {
		/* no route to the server: it sees us better than a guess */
		if (size)
			out[0] = '\0';
		return AGENT_ADDR_SERVER;
	}
	if (usable(route, &family)) {
		snprintf(out, size, "%s", route);
		return AGENT_ADDR_ROUTE;
	}
	/* IPv4 first: what MASTER_ADDR users and most fabrics expect */
	for (int want = AF_INET; want; want = want == AF_INET ? AF_INET6 : 0)
		for (size_t i = 0; i < n; i++)
			if (usable(candidates[i], &family) && family == want) {
				snprintf(out, size, "%s", candidates[i]);
				return AGENT_ADDR_INTERFACE;
			}
	snprintf(out, size, "%s", route);
	return AGENT_ADDR_LOOPBACK;
}

size_t agent_addr_interfaces(char (*out)[AGENT_ADDR_MAX], size_t max)
{
	struct agent_addr_if ifs[64];
	size_t n = agent_addr_interface_list(ifs, 64), k = 0;
	for (size_t i = 0; i < n && k < max; i++)
		if (!agent_addr_is_loopback(ifs[i].addr))
			snprintf(out[k++], AGENT_ADDR_MAX, "%s", ifs[i].addr);
	return k;
}

/* same_addr: a and b are the same numeric address (IPv6 scope ignored) */
static int same_addr(const char *a, const char *b)
{
	char x[AGENT_ADDR_MAX], y[AGENT_ADDR_MAX];
	unsigned char bx[sizeof(struct in6_addr)], by[sizeof(struct in6_addr)];
	snprintf(x, sizeof(x), "%s", a);
	snprintf(y, sizeof(y), "%s", b);
	x[strcspn(x, "%")] = '\0';
	y[strcspn(y, "%")] = '\0';
	if (inet_pton(AF_INET, x, bx) == 1)
		return inet_pton(AF_INET, y, by) == 1 && !memcmp(bx, by, 4);
	if (inet_pton(AF_INET6, x, bx) == 1)
		return inet_pton(AF_INET6, y, by) == 1 &&
		       !memcmp(bx, by, sizeof(struct in6_addr));
	return 0;
}

const char *agent_addr_ifname(const char *addr, const struct agent_addr_if *ifs,
			      size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (same_addr(addr, ifs[i].addr))
			return ifs[i].name;
	return NULL;
}

int agent_addr_socket_ifname(const char *announced,
			     const char *const *host_addrs, size_t n_host,
			     const struct agent_addr_if *ifs, size_t n_ifs,
			     char *out, size_t size)
{
	const char *name;
	if (size)
		out[0] = '\0';
	for (size_t i = 0; i < n_host; i++)
		if (!agent_addr_is_loopback(host_addrs[i]))
			return 0; /* the host name is reachable: theirs */
	if (!announced || !announced[0] || agent_addr_is_loopback(announced))
		return 0;
	name = agent_addr_ifname(announced, ifs, n_ifs);
	if (!name || !name[0])
		return 0;
	snprintf(out, size, "%s", name);
	return 1;
}

size_t agent_addr_interface_list(struct agent_addr_if *out, size_t max)
{
	struct ifaddrs *ifs = NULL;
	size_t n = 0;
	if (getifaddrs(&ifs) != 0)
		return 0;
	for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next) {
		socklen_t len;
		if (!i->ifa_addr || !i->ifa_name || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			len = sizeof(struct sockaddr_in);
		else if (i->ifa_addr->sa_family == AF_INET6)
			len = sizeof(struct sockaddr_in6);
		else
			continue;
		if (getnameinfo(i->ifa_addr, len, out[n].addr,
				sizeof(out[n].addr), NULL, 0,
				NI_NUMERICHOST) != 0)
			continue;
		snprintf(out[n].name, sizeof(out[n].name), "%s", i->ifa_name);
		n++;
	}
	freeifaddrs(ifs);
	return n;
}

size_t agent_addr_host_addrs(char (*out)[AGENT_ADDR_MAX], size_t max,
			     char *host, size_t host_size)
{
	struct addrinfo hints, *res = NULL;
	size_t n = 0;
	char name[256];
	if (gethostname(name, sizeof(name)) != 0)
		return 0;
	name[sizeof(name) - 1] = '\0';
	snprintf(host, host_size, "%s", name);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(name, NULL, &hints, &res) != 0)
		return 0;
	for (struct addrinfo *r = res; r && n < max; r = r->ai_next)
		if (getnameinfo(r->ai_addr, r->ai_addrlen, out[n],
				AGENT_ADDR_MAX, NULL, 0, NI_NUMERICHOST) == 0)
			n++;
	freeaddrinfo(res);
	return n;
}
