/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_sock.c - the sockets under the collective library's bootstrap:
 * addresses as the group table carries them, connects with retries,
 * listeners, and full reads and writes on non-blocking sockets, each
 * bounded by an absolute deadline so that a missing peer never hangs
 * dist_init. The contracts are in dist_sock.h.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "dist_sock.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

/* the bootstrap runs on the thread that called dist_init */
static _Thread_local const atomic_int *thread_cancel;
static _Thread_local int (*thread_stop)(void *arg);
static _Thread_local void *thread_stop_arg;

#define CANCEL_SLICE_MS 50

void dist_sock_set_cancel(const atomic_int *cancel, int (*stop)(void *arg),
			  void *stop_arg)
{
	thread_cancel = cancel;
	thread_stop = stop;
	thread_stop_arg = stop_arg;
}

int dist_sock_cancelled(void)
{
	return (thread_cancel != NULL && atomic_load(thread_cancel) != 0) ||
	       (thread_stop != NULL && thread_stop(thread_stop_arg));
}

int dist_sock_remaining_ms(uint64_t deadline_ms)
{
	uint64_t now = clock_now_ms();
	if (now >= deadline_ms || dist_sock_cancelled())
		return 0;
	if ((thread_cancel != NULL || thread_stop != NULL) &&
	    deadline_ms - now > CANCEL_SLICE_MS)
		return CANCEL_SLICE_MS;
	return deadline_ms - now > 1000000000 ? 1000000000
					      : (int)(deadline_ms - now);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Socket addresses as (family, 16 address bytes, port), the form the
 * table carries. */
int dist_sock_addr_pack(const struct sockaddr_storage *ss, uint8_t *family,
			uint8_t addr[16], uint16_t *port)
{
	memset(addr, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		*family = 4;
		memcpy(addr, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 0;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		*family = 6;
		memcpy(addr, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
		return 0;
	}
	return DL_EINVAL;
}

int dist_sock_addr_unpack(uint8_t family, const uint8_t addr[16], uint16_t port,
			  struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (family == 4) {
		struct sockaddr_in *in = (void *)ss;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, addr, 4);
		in->sin_port = htons(port);
		*len = sizeof(*in);
		return 0;
	}
	if (family == 6) {
		struct sockaddr_in6 *in6 = (void *)ss;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, addr, 16);
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return 0;
	}
	return DL_EINVAL;
}

void dist_sock_addr_text(const struct sockaddr_storage *ss, char *out,
			 size_t out_size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	uint16_t port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		snprintf(out, out_size, "%s:%u", host, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		snprintf(out, out_size, "[%s]:%u", host, port);
	} else {
		snprintf(out, out_size, "an unknown address");
	}
}

/* dist_sock_tune: the options every mesh connection gets. The buffer
 * sizes are left to the kernel's autotuning (up to tcp_wmem/tcp_rmem):
 * fixed SO_SNDBUF/SO_RCVBUF of 1-4 MiB measured no faster on loopback and
 * would switch autotuning off. */
void dist_sock_tune(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* wait_ready waits until fd is ready for events or the deadline passes:
 * 0 (also on EINTR: the caller retries), DL_ETIMEDOUT or DL_ESYS. */
static int wait_ready(int fd, short events, uint64_t deadline_ms)
{
	struct pollfd pfd = {fd, events, 0};
	int left = dist_sock_remaining_ms(deadline_ms), rc;
	if (left == 0)
		return DL_ETIMEDOUT;
	rc = poll(&pfd, 1, left);
	if (rc == 0) /* a slice (see dist_sock_remaining_ms) or the end */
		return dist_sock_remaining_ms(deadline_ms) ? 0 : DL_ETIMEDOUT;
	if (rc < 0 && errno != EINTR)
		return DL_ESYS;
	return 0;
}

/* dist_sock_write_full/dist_sock_read_full: bootstrap I/O on a non-blocking
 * socket, bounded by an absolute deadline. 0, DL_ETIMEDOUT, DL_ECLOSED or
 * DL_ESYS. */
int dist_sock_write_full(int fd, const void *data, size_t len,
			 uint64_t deadline_ms)
{
	const unsigned char *p = data;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == EPIPE || errno == ECONNRESET
				   ? DL_ECLOSED
				   : DL_ESYS;
		int rc = wait_ready(fd, POLLOUT, deadline_ms);
		if (rc != 0)
			return rc;
	}
	return 0;
}

int dist_sock_read_full(int fd, void *data, size_t len, uint64_t deadline_ms)
{
	unsigned char *p = data;
	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return DL_ECLOSED;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == ECONNRESET ? DL_ECLOSED : DL_ESYS;
		int rc = wait_ready(fd, POLLIN, deadline_ms);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* dist_sock_connect_once: one non-blocking connect bounded by the deadline.
 * Returns 0 with *out set, DL_EAGAIN when the peer is not (yet) there, or
 * DL_ETIMEDOUT / DL_ESYS. */
int dist_sock_connect_once(const struct sockaddr *sa, socklen_t len,
			   uint64_t deadline_ms, int *out)
{
	int fd = socket(sa->sa_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return DL_ESYS;
	if (connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		errno = e;
		return e == ECONNREFUSED || e == ENETUNREACH ||
			       e == EHOSTUNREACH || e == EAGAIN
			   ? DL_EAGAIN
			   : DL_ESYS;
	}
	struct pollfd pfd = {fd, POLLOUT, 0};
	int rc;
	do {
		rc = poll(&pfd, 1, dist_sock_remaining_ms(deadline_ms));
	} while ((rc < 0 && errno == EINTR) ||
		 (rc == 0 && dist_sock_remaining_ms(deadline_ms) > 0));
	if (rc <= 0) {
		close(fd);
		return rc == 0 ? DL_ETIMEDOUT : DL_ESYS;
	}
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 ||
	    soerr != 0) {
		close(fd);
		errno = soerr;
		return soerr == ECONNREFUSED || soerr == ENETUNREACH ||
			       soerr == EHOSTUNREACH || soerr == ETIMEDOUT
			   ? DL_EAGAIN
			   : DL_ESYS;
	}
	*out = fd;
	return 0;
}

/* master_origin says where MASTER_ADDR came from, for the lines that say
 * it cannot be reached: under dlaunch, node rank 0's announced address,
 * whose log says why it announced it. */
static void master_origin(char *out, size_t size)
{
	if (getenv("DLAUNCH_JOB_ID"))
		snprintf(
		    out, size,
		    "MASTER_ADDR is the address node rank 0 announced to "
		    "the rendezvous: its dlaunch log says why ('announcing "
		    "address'), every node's names the node ('round N: "
		    "... master'); --local-addr or DLAUNCH_ADDR there "
		    "force one");
	else
		snprintf(out, size,
			 "MASTER_ADDR/MASTER_PORT come from the "
			 "environment");
}

/* MASTER_WARN_MS: after this long without reaching rank 0, a rank says so
 * once (and keeps trying until its deadline), so that an address no one
 * can reach shows at once, not only when the bootstrap times out. */
#define MASTER_WARN_MS 10000

/* dist_sock_connect_master: rank r > 0 reaches rank 0, retrying with backoff
 * (10 ms doubling to 500 ms) until the deadline, since rank 0 may start last.
 */
int dist_sock_connect_master(const struct dist_sock_master *m,
			     uint64_t deadline_ms, int *out, char *err,
			     size_t err_size)
{
	char port[8], origin[320];
	int backoff_ms = 10, warned = 0;
	uint64_t warn_at_ms = clock_now_ms() + MASTER_WARN_MS;
	const char *why = "no attempt";
	snprintf(port, sizeof(port), "%u", m->port);
	for (;;) {
		struct addrinfo hints = {0}, *res = NULL;
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		int gai = getaddrinfo(m->addr, port, &hints, &res);
		if (gai != 0) {
			why = gai_strerror(gai);
		} else {
			for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
				int rc = dist_sock_connect_once(
				    ai->ai_addr, ai->ai_addrlen, deadline_ms,
				    out);
				if (rc == 0) {
					freeaddrinfo(res);
					return 0;
				}
				why = rc == DL_ETIMEDOUT ? "connect timed out"
							 : strerror(errno);
			}
			freeaddrinfo(res);
		}
		int left = dist_sock_remaining_ms(deadline_ms);
		if (left == 0)
			break;
		if (!warned && clock_now_ms() >= warn_at_ms) {
			warned = 1;
			master_origin(origin, sizeof(origin));
			log_warn("dist: rank %d: cannot reach the master (rank "
				 "0) at %s:%u for %d s: %s; trying for %d s "
				 "more. %s",
				 m->rank, m->addr, m->port,
				 MASTER_WARN_MS / 1000, why,
				 (int)((deadline_ms - clock_now_ms()) / 1000),
				 origin);
		}
		sleep_ms(backoff_ms < left ? backoff_ms : left);
		backoff_ms = backoff_ms * 2 > 500 ? 500 : backoff_ms * 2;
	}
	master_origin(origin, sizeof(origin));
	dl_errorf(err, err_size, 0,
		  "rank %d: cannot reach the master (rank 0) at %s:%u within "
		  "%llu ms: %s (is rank 0 running with the same "
		  "MASTER_ADDR/MASTER_PORT?); %s",
		  m->rank, m->addr, m->port, (unsigned long long)m->timeout_ms,
		  why, origin);
	return DL_ETIMEDOUT;
}

/* dist_sock_listen_master: rank 0's bootstrap listener on
 * MASTER_ADDR:MASTER_PORT (the wildcard address when MASTER_ADDR is not one of
 * this host's). */
int dist_sock_listen_master(const struct dist_sock_master *m, int *out,
			    char *err, size_t err_size)
{
	char port[8];
	struct addrinfo hints = {0}, *res = NULL;
	int fd = -1, one = 1, rc = DL_ESYS;
	snprintf(port, sizeof(port), "%u", m->port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	int gai = getaddrinfo(m->addr, port, &hints, &res);
	if (gai != 0) {
		dl_errorf(err, err_size, 0,
			  "cannot resolve MASTER_ADDR '%s': %s", m->addr,
			  gai_strerror(gai));
		return DL_EINVAL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) != 0) {
		if (errno != EADDRNOTAVAIL)
			goto fail;
		struct sockaddr_storage any = {0};
		socklen_t len;
		uint8_t zero[16] = {0};
		dist_sock_addr_unpack(res->ai_family == AF_INET6 ? 6 : 4, zero,
				      m->port, &any, &len);
		if (bind(fd, (struct sockaddr *)&any, len) != 0)
			goto fail;
	}
	if (listen(fd, SOMAXCONN) != 0)
		goto fail;
	freeaddrinfo(res);
	*out = fd;
	return 0;
fail:
	dl_errorf(err, err_size, 0, "rank 0: cannot listen on %s:%u: %s%s",
		  m->addr, m->port, strerror(errno),
		  errno == EADDRINUSE ? " (is another job using MASTER_PORT?)"
				      : "");
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

/* dist_sock_listen_local: a listener for peers on the address this rank reached
 * rank 0 from, on a port the kernel picks. */
int dist_sock_listen_local(int master_fd, int *out, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);
	if (getsockname(master_fd, (struct sockaddr *)ss, &len) != 0)
		return DL_ESYS;
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = 0;
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = 0;
	else
		return DL_EINVAL;
	int fd = socket(ss->ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return DL_ESYS;
	if (bind(fd, (struct sockaddr *)ss, len) != 0 ||
	    listen(fd, SOMAXCONN) != 0) {
		close(fd);
		return DL_ESYS;
	}
	len = sizeof(*ss);
	if (getsockname(fd, (struct sockaddr *)ss, &len) != 0) {
		close(fd);
		return DL_ESYS;
	}
	*out = fd;
	return 0;
}
