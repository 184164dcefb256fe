/*
 * rdzv.c - what every rendezvous backend shares (see rdzv.h): reading an
 * answer's action, and what a node announces when it joins (its address,
 * a free port for the master).
 */
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlaunch/parse.h"
#include "rdzv.h"

int agent_rdzv_post_action(struct agent_fsm *fsm, uint64_t round,
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
	agent_fsm_post(fsm, &ev);
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

/* agent_rdzv_local_addr finds the source address this host uses to reach host
 * (the UDP connect trick: nothing is sent). "" when unknown: the server
 * then uses the address it sees. Runs before the loop starts. */
void agent_rdzv_local_addr(const char *endpoint, uint16_t default_port,
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
