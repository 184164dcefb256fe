/*
 * dist_net.c - the bootstrap and the TCP mesh of the collective library.
 *
 * Rank 0 listens on MASTER_PORT. Every other rank connects to it
 * (retrying with backoff until the deadline: rank 0 may start later),
 * opens a listener of its own for its peers and sends a hello naming its
 * rank, the world size, the backend and that listener. When all have
 * joined, rank 0 answers each with the table of listeners, a session nonce
 * and NCCL's unique id. Each rank r > 0 then connects to ranks 1..r-1 and
 * accepts ranks r+1..N-1, so every pair holds one connection; the
 * bootstrap connections themselves are the ones to rank 0. A last
 * ready/go exchange through rank 0 makes dist_init fail on every rank when
 * it fails on one. Every received field is validated; a stranger on the
 * bootstrap port is dropped without disturbing the group.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define NET_MAGIC	   0x444c4449u /* "DLDI" */
#define NET_VERSION	   1u
#define NET_KIND_BOOTSTRAP 1u
#define NET_KIND_MESH	   2u
#define HELLO_BYTES	   56
#define REPLY_HEADER_BYTES 28
#define ENTRY_BYTES	   20
#define MAX_REJECT_MSG	   255
#define MAX_PENDING	   64 /* unidentified connections held at once */

struct hello {
	uint32_t magic, version, kind, rank, world, backend, target;
	uint64_t nonce;
	uint16_t port;
	uint8_t family; /* 4, 6, or 0: "the address you reached me at" */
	uint8_t addr[16];
};

static void put_u16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}

static uint16_t get_u16(const unsigned char *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get_u32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t get_u64(const unsigned char *p)
{
	return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);
}

static void hello_encode(const struct hello *h, unsigned char *p)
{
	memset(p, 0, HELLO_BYTES);
	put_u32(p, h->magic);
	put_u32(p + 4, h->version);
	put_u32(p + 8, h->kind);
	put_u32(p + 12, h->rank);
	put_u32(p + 16, h->world);
	put_u32(p + 20, h->backend);
	put_u32(p + 24, h->target);
	put_u64(p + 28, h->nonce);
	put_u16(p + 36, h->port);
	p[38] = h->family;
	memcpy(p + 40, h->addr, 16);
}

static void hello_decode(const unsigned char *p, struct hello *h)
{
	h->magic = get_u32(p);
	h->version = get_u32(p + 4);
	h->kind = get_u32(p + 8);
	h->rank = get_u32(p + 12);
	h->world = get_u32(p + 16);
	h->backend = get_u32(p + 20);
	h->target = get_u32(p + 24);
	h->nonce = get_u64(p + 28);
	h->port = get_u16(p + 36);
	h->family = p[38];
	memcpy(h->addr, p + 40, 16);
}

static int remaining_ms(uint64_t deadline_ms)
{
	uint64_t now = clock_now_ms();
	if (now >= deadline_ms)
		return 0;
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
static int sockaddr_pack(const struct sockaddr_storage *ss, uint8_t *family,
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

static int sockaddr_unpack(uint8_t family, const uint8_t addr[16],
			   uint16_t port, struct sockaddr_storage *ss,
			   socklen_t *len)
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

static void sockaddr_text(const struct sockaddr_storage *ss, char *out,
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

/* tune_data_socket: the options every mesh connection gets. The buffer
 * sizes are left to the kernel's autotuning (up to tcp_wmem/tcp_rmem):
 * fixed SO_SNDBUF/SO_RCVBUF of 1-4 MiB measured no faster on loopback and
 * would switch autotuning off. */
static void tune_data_socket(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* wait_ready waits until fd is ready for events or the deadline passes:
 * 0 (also on EINTR: the caller retries), DL_ETIMEDOUT or DL_ESYS. */
static int wait_ready(int fd, short events, uint64_t deadline_ms)
{
	struct pollfd pfd = {fd, events, 0};
	int left = remaining_ms(deadline_ms), rc;
	if (left == 0)
		return DL_ETIMEDOUT;
	rc = poll(&pfd, 1, left);
	if (rc == 0)
		return DL_ETIMEDOUT;
	if (rc < 0 && errno != EINTR)
		return DL_ESYS;
	return 0;
}

/* write_full/read_full: bootstrap I/O on a non-blocking socket, bounded
 * by an absolute deadline. 0, DL_ETIMEDOUT, DL_ECLOSED or DL_ESYS. */
static int write_full(int fd, const void *data, size_t len,
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

static int read_full(int fd, void *data, size_t len, uint64_t deadline_ms)
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

/* connect_once: one non-blocking connect bounded by the deadline. Returns
 * 0 with *out set, DL_EAGAIN when the peer is not (yet) there, or
 * DL_ETIMEDOUT / DL_ESYS. */
static int connect_once(const struct sockaddr *sa, socklen_t len,
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
		rc = poll(&pfd, 1, remaining_ms(deadline_ms));
	} while (rc < 0 && errno == EINTR);
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

/* connect_master: rank r > 0 reaches rank 0, retrying with backoff (10 ms
 * doubling to 500 ms) until the deadline, since rank 0 may start last. */
static int connect_master(const struct dist *d, uint64_t deadline_ms, int *out,
			  char *err, size_t err_size)
{
	char port[8];
	int backoff_ms = 10;
	const char *why = "no attempt";
	snprintf(port, sizeof(port), "%u", d->cfg.master_port);
	for (;;) {
		struct addrinfo hints = {0}, *res = NULL;
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		int gai = getaddrinfo(d->cfg.master_addr, port, &hints, &res);
		if (gai != 0) {
			why = gai_strerror(gai);
		} else {
			for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
				int rc =
				    connect_once(ai->ai_addr, ai->ai_addrlen,
						 deadline_ms, out);
				if (rc == 0) {
					freeaddrinfo(res);
					return 0;
				}
				why = rc == DL_ETIMEDOUT ? "connect timed out"
							 : strerror(errno);
			}
			freeaddrinfo(res);
		}
		int left = remaining_ms(deadline_ms);
		if (left == 0)
			break;
		sleep_ms(backoff_ms < left ? backoff_ms : left);
		backoff_ms = backoff_ms * 2 > 500 ? 500 : backoff_ms * 2;
	}
	set_err(err, err_size,
		"rank %d: cannot reach the master (rank 0) at %s:%u within "
		"%llu ms: %s (is rank 0 running with the same "
		"MASTER_ADDR/MASTER_PORT?)",
		d->rank, d->cfg.master_addr, d->cfg.master_port,
		(unsigned long long)d->timeout_ms, why);
	return DL_ETIMEDOUT;
}

/* listen_master: rank 0's bootstrap listener on MASTER_ADDR:MASTER_PORT
 * (the wildcard address when MASTER_ADDR is not one of this host's). */
static int listen_master(const struct dist *d, int *out, char *err,
			 size_t err_size)
{
	char port[8];
	struct addrinfo hints = {0}, *res = NULL;
	int fd = -1, one = 1, rc = DL_ESYS;
	snprintf(port, sizeof(port), "%u", d->cfg.master_port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	int gai = getaddrinfo(d->cfg.master_addr, port, &hints, &res);
	if (gai != 0) {
		set_err(err, err_size, "cannot resolve MASTER_ADDR '%s': %s",
			d->cfg.master_addr, gai_strerror(gai));
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
		sockaddr_unpack(res->ai_family == AF_INET6 ? 6 : 4, zero,
				d->cfg.master_port, &any, &len);
		if (bind(fd, (struct sockaddr *)&any, len) != 0)
			goto fail;
	}
	if (listen(fd, SOMAXCONN) != 0)
		goto fail;
	freeaddrinfo(res);
	*out = fd;
	return 0;
fail:
	set_err(err, err_size, "rank 0: cannot listen on %s:%u: %s%s",
		d->cfg.master_addr, d->cfg.master_port, strerror(errno),
		errno == EADDRINUSE ? " (is another job using MASTER_PORT?)"
				    : "");
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

/* listen_local: a listener for peers on the address this rank reached
 * rank 0 from, on a port the kernel picks. */
static int listen_local(int master_fd, int *out, struct sockaddr_storage *ss)
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

struct pending {
	int fd;
	size_t got;
	unsigned char buf[HELLO_BYTES];
	struct sockaddr_storage from;
};

/* send_reject: tells a refused bootstrap peer why, best effort. */
static void send_reject(int fd, int code, const char *msg)
{
	unsigned char out[REPLY_HEADER_BYTES + MAX_REJECT_MSG];
	size_t len = strlen(msg);
	if (len > MAX_REJECT_MSG)
		len = MAX_REJECT_MSG;
	memset(out, 0, REPLY_HEADER_BYTES);
	put_u32(out, NET_MAGIC);
	put_u32(out + 4, NET_VERSION);
	put_u32(out + 8, (uint32_t)code);
	put_u32(out + 24, (uint32_t)len);
	memcpy(out + REPLY_HEADER_BYTES, msg, len);
	(void)!send(fd, out, REPLY_HEADER_BYTES + len,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* check_hello: 0 when h is an acceptable peer for this accept loop; else
 * a code and a reason in why. */
static int check_hello(const struct dist *d, const struct hello *h,
		       uint32_t kind, uint64_t nonce, int first, int *fds,
		       char *why, size_t why_size)
{
	if (h->magic != NET_MAGIC || h->kind != kind) {
		snprintf(why, why_size, "not a dlaunch-train peer");
		return DL_EPROTO;
	}
	if (h->version != NET_VERSION) {
		snprintf(why, why_size,
			 "rank %u speaks protocol version %u, rank 0 speaks %u "
			 "(mixed dlaunch-train builds?)",
			 h->rank, h->version, NET_VERSION);
		return DL_ENOTSUP;
	}
	if (h->world != (uint32_t)d->world) {
		snprintf(why, why_size,
			 "rank %u says WORLD_SIZE=%u but rank 0 has %d",
			 h->rank, h->world, d->world);
		return DL_ECONFLICT;
	}
	if (h->backend != (uint32_t)d->backend) {
		snprintf(why, why_size,
			 "rank %u uses the %s backend but rank 0 uses %s",
			 h->rank,
			 dist_backend_name((enum dist_backend)(h->backend & 1)),
			 dist_backend_name(d->backend));
		return DL_ECONFLICT;
	}
	if (h->rank == 0 && kind == NET_KIND_BOOTSTRAP) {
		snprintf(why, why_size,
			 "a second rank 0 (RANK must differ per process)");
		return DL_ECONFLICT;
	}
	if (h->rank < (uint32_t)first || h->rank >= (uint32_t)d->world) {
		snprintf(why, why_size, "rank %u is out of range [%d, %d)",
			 h->rank, first, d->world);
		return DL_ERANGE;
	}
	if (kind == NET_KIND_MESH &&
	    (h->nonce != nonce || h->target != (uint32_t)d->rank)) {
		snprintf(why, why_size, "a connection from another group");
		return DL_EPROTO;
	}
	if (fds[h->rank] >= 0) {
		snprintf(why, why_size, "rank %u has already joined", h->rank);
		return DL_ECONFLICT;
	}
	return 0;
}

/* accept_peers: accepts connections on lfd until ranks first..world-1
 * (all but this one) have each sent a valid hello of the given kind;
 * fds[rank] and hellos[rank] receive them. Strangers, duplicates and
 * silent connections are dropped without stopping the loop. */
static int accept_peers(struct dist *d, int lfd, uint32_t kind, uint64_t nonce,
			int first, int *fds, struct hello *hellos,
			uint64_t deadline_ms, char *err, size_t err_size)
{
	struct pending pend[MAX_PENDING];
	struct pollfd pfds[MAX_PENDING + 1];
	int npend = 0, need = 0, rc = 0;
	for (int r = first; r < d->world; r++)
		if (r != d->rank)
			need++;
	while (need > 0) {
		pfds[0] = (struct pollfd){lfd, POLLIN, 0};
		for (int i = 0; i < npend; i++)
			pfds[i + 1] = (struct pollfd){pend[i].fd, POLLIN, 0};
		int left = remaining_ms(deadline_ms);
		int n = left > 0 ? poll(pfds, (nfds_t)npend + 1, left) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			set_err(err, err_size, "rank %d: poll: %s", d->rank,
				strerror(errno));
			rc = DL_ESYS;
			goto out;
		}
		if (n == 0) {
			char missing[128] = "";
			size_t used = 0;
			for (int r = first; r < d->world && used < 100; r++)
				if (r != d->rank && fds[r] < 0)
					used += (size_t)snprintf(
					    missing + used,
					    sizeof(missing) - used, "%s%d",
					    used ? ", " : "", r);
			set_err(err, err_size,
				"rank %d: timed out after %llu ms waiting for "
				"rank%s %s to %s (are all WORLD_SIZE=%d ranks "
				"started with the same MASTER_ADDR/"
				"MASTER_PORT?)",
				d->rank, (unsigned long long)d->timeout_ms,
				need > 1 ? "s" : "", missing,
				kind == NET_KIND_BOOTSTRAP ? "join" : "connect",
				d->world);
			rc = DL_ETIMEDOUT;
			goto out;
		}
		/* pending connections first: the listener may refill */
		for (int i = npend - 1; i >= 0; i--) {
			if (!pfds[i + 1].revents)
				continue;
			struct pending *p = &pend[i];
			ssize_t got = recv(p->fd, p->buf + p->got,
					   HELLO_BYTES - p->got, MSG_DONTWAIT);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			char from[80], why[160];
			sockaddr_text(&p->from, from, sizeof(from));
			int keep = 0;
			if (got <= 0) {
				log_debug("dist: rank %d: connection from %s "
					  "closed before its hello",
					  d->rank, from);
			} else if ((p->got += (size_t)got) < HELLO_BYTES) {
				keep = 1;
			} else {
				struct hello h;
				hello_decode(p->buf, &h);
				int bad = check_hello(d, &h, kind, nonce, first,
						      fds, why, sizeof(why));
				if (bad == 0) {
					fds[h.rank] = p->fd;
					hellos[h.rank] = h;
					p->fd = -1;
					need--;
				} else {
					log_warn("dist: rank %d: rejected a "
						 "connection from %s: %s",
						 d->rank, from, why);
					if (bad != DL_EPROTO &&
					    kind == NET_KIND_BOOTSTRAP)
						send_reject(p->fd, bad, why);
				}
			}
			if (!keep) {
				if (p->fd >= 0)
					close(p->fd);
				pend[i] = pend[--npend];
			}
		}
		if (pfds[0].revents & POLLIN) {
			struct sockaddr_storage from;
			socklen_t len = sizeof(from);
			int fd = accept4(lfd, (struct sockaddr *)&from, &len,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			if (npend == MAX_PENDING) {
				/* a flood of strangers: drop the oldest */
				close(pend[0].fd);
				pend[0] = pend[--npend];
			}
			pend[npend].fd = fd;
			pend[npend].got = 0;
			pend[npend].from = from;
			npend++;
		}
	}
out:
	for (int i = 0; i < npend; i++)
		close(pend[i].fd);
	return rc;
}

/* master_serve: rank 0's side of the bootstrap. */
static int master_serve(struct dist *d, int lfd, uint64_t deadline_ms,
			char *err, size_t err_size)
{
	struct hello *hellos = calloc((size_t)d->world, sizeof(*hellos));
	size_t table_bytes = (size_t)d->world * ENTRY_BYTES;
	size_t reply_bytes =
	    REPLY_HEADER_BYTES + DIST_NCCL_ID_BYTES + table_bytes;
	unsigned char *reply = malloc(reply_bytes);
	uint64_t nonce;
	int rc;
	if (hellos == NULL || reply == NULL) {
		rc = DL_ENOMEM;
		set_err(err, err_size, "rank 0: out of memory");
		goto out;
	}
	rc = accept_peers(d, lfd, NET_KIND_BOOTSTRAP, 0, 1, d->fds, hellos,
			  deadline_ms, err, err_size);
	if (rc != 0)
		goto out;
	nonce = clock_now_ns() ^ ((uint64_t)getpid() << 32) ^
		(uint64_t)(uintptr_t)reply;
	memset(reply, 0, reply_bytes);
	put_u32(reply, NET_MAGIC);
	put_u32(reply + 4, NET_VERSION);
	put_u32(reply + 12, (uint32_t)d->world);
	put_u64(reply + 16, nonce);
	memcpy(reply + REPLY_HEADER_BYTES, d->nccl_id, DIST_NCCL_ID_BYTES);
	for (int r = 1; r < d->world; r++) {
		unsigned char *e = reply + REPLY_HEADER_BYTES +
				   DIST_NCCL_ID_BYTES + (size_t)r * ENTRY_BYTES;
		put_u16(e, hellos[r].port);
		e[2] = hellos[r].family;
		memcpy(e + 4, hellos[r].addr, 16);
	}
	for (int r = 1; r < d->world; r++) {
		rc = write_full(d->fds[r], reply, reply_bytes, deadline_ms);
		if (rc != 0) {
			set_err(err, err_size,
				"rank 0: cannot send the group table to rank "
				"%d: %s",
				r, dl_strerror(rc));
			goto out;
		}
	}
out:
	free(hellos);
	free(reply);
	return rc;
}

/* join_master: the bootstrap as seen from rank r > 0. On success
 * d->fds[0] is the connection to rank 0, *table (world entries) the
 * listeners, *nonce the session, *listen_fd this rank's listener. */
static int join_master(struct dist *d, uint64_t deadline_ms,
		       unsigned char **table, uint64_t *nonce, int *listen_fd,
		       char *err, size_t err_size)
{
	struct sockaddr_storage local;
	unsigned char buf[REPLY_HEADER_BYTES + MAX_REJECT_MSG + 1];
	struct hello h = {0};
	int fd = -1, rc;
	rc = connect_master(d, deadline_ms, &fd, err, err_size);
	if (rc != 0)
		return rc;
	d->fds[0] = fd;
	rc = listen_local(fd, listen_fd, &local);
	if (rc != 0) {
		set_err(err, err_size, "rank %d: cannot open a listener: %s",
			d->rank, strerror(errno));
		return rc;
	}
	h.magic = NET_MAGIC;
	h.version = NET_VERSION;
	h.kind = NET_KIND_BOOTSTRAP;
	h.rank = (uint32_t)d->rank;
	h.world = (uint32_t)d->world;
	h.backend = (uint32_t)d->backend;
	sockaddr_pack(&local, &h.family, h.addr, &h.port);
	hello_encode(&h, buf);
	rc = write_full(fd, buf, HELLO_BYTES, deadline_ms);
	if (rc == 0)
		rc = read_full(fd, buf, REPLY_HEADER_BYTES, deadline_ms);
	if (rc != 0) {
		set_err(err, err_size,
			"rank %d: bootstrap with rank 0 at %s:%u failed: %s%s",
			d->rank, d->cfg.master_addr, d->cfg.master_port,
			dl_strerror(rc),
			rc == DL_ETIMEDOUT ? " (waiting for the other ranks)"
			: rc == DL_ECLOSED
			    ? " (rank 0 gave up before the group formed; "
			      "see its log)"
			    : "");
		return rc;
	}
	if (get_u32(buf) != NET_MAGIC || get_u32(buf + 4) != NET_VERSION) {
		set_err(err, err_size,
			"rank %d: %s:%u is not a dlaunch-train rank 0 (bad "
			"magic or version in its reply)",
			d->rank, d->cfg.master_addr, d->cfg.master_port);
		return DL_EPROTO;
	}
	int32_t status = (int32_t)get_u32(buf + 8);
	if (status != 0) {
		uint32_t len = get_u32(buf + 24);
		if (len > MAX_REJECT_MSG)
			len = MAX_REJECT_MSG;
		if (read_full(fd, buf, len, deadline_ms) != 0)
			len = 0;
		buf[len] = 0;
		for (uint32_t i = 0; i < len; i++)
			if (buf[i] < 0x20 || buf[i] > 0x7e)
				buf[i] = '?';
		set_err(err, err_size, "rank %d: rank 0 refused this rank: %s",
			d->rank, len ? (char *)buf : "no reason given");
		return status < 0 && status >= DL_ENOTSUP ? status : DL_EPROTO;
	}
	if (get_u32(buf + 12) != (uint32_t)d->world) {
		set_err(err, err_size,
			"rank %d: rank 0 answered for world size %u, not %d",
			d->rank, get_u32(buf + 12), d->world);
		return DL_EPROTO;
	}
	*nonce = get_u64(buf + 16);
	size_t rest = DIST_NCCL_ID_BYTES + (size_t)d->world * ENTRY_BYTES;
	*table = malloc(rest);
	if (*table == NULL) {
		set_err(err, err_size, "rank %d: out of memory", d->rank);
		return DL_ENOMEM;
	}
	rc = read_full(fd, *table, rest, deadline_ms);
	if (rc != 0) {
		set_err(err, err_size,
			"rank %d: reading the group table from rank 0: %s",
			d->rank, dl_strerror(rc));
		return rc;
	}
	memcpy(d->nccl_id, *table, DIST_NCCL_ID_BYTES);
	return 0;
}

/* mesh_connect: rank r > 0 connects to ranks 1..r-1 from the table. */
static int mesh_connect(struct dist *d, const unsigned char *table,
			uint64_t nonce, uint64_t deadline_ms, char *err,
			size_t err_size)
{
	for (int peer = 1; peer < d->rank; peer++) {
		const unsigned char *e =
		    table + DIST_NCCL_ID_BYTES + (size_t)peer * ENTRY_BYTES;
		struct sockaddr_storage ss;
		socklen_t len;
		unsigned char buf[HELLO_BYTES];
		struct hello h = {0};
		char where[80] = "?";
		int fd = -1, rc;
		rc = sockaddr_unpack(e[2], e + 4, get_u16(e), &ss, &len);
		if (rc == 0) {
			sockaddr_text(&ss, where, sizeof(where));
			rc = connect_once((struct sockaddr *)&ss, len,
					  deadline_ms, &fd);
		}
		if (rc != 0) {
			set_err(err, err_size,
				"rank %d: cannot connect to rank %d at %s: %s",
				d->rank, peer, where,
				rc == DL_EINVAL ? "bad address in the table"
				: rc == DL_ETIMEDOUT ? "timed out"
						     : strerror(errno));
			return rc == DL_EAGAIN ? DL_ECLOSED : rc;
		}
		d->fds[peer] = fd;
		h.magic = NET_MAGIC;
		h.version = NET_VERSION;
		h.kind = NET_KIND_MESH;
		h.rank = (uint32_t)d->rank;
		h.world = (uint32_t)d->world;
		h.backend = (uint32_t)d->backend;
		h.target = (uint32_t)peer;
		h.nonce = nonce;
		hello_encode(&h, buf);
		rc = write_full(fd, buf, HELLO_BYTES, deadline_ms);
		if (rc != 0) {
			set_err(err, err_size,
				"rank %d: cannot greet rank %d at %s: %s",
				d->rank, peer, where, dl_strerror(rc));
			return rc;
		}
	}
	return 0;
}

/* ready_go: every rank reports its mesh to rank 0, which answers once all
 * have: a failure anywhere closes connections and fails everyone. */
static int ready_go(struct dist *d, uint64_t deadline_ms, char *err,
		    size_t err_size)
{
	unsigned char token;
	int rc = 0;
	if (d->rank == 0) {
		for (int r = 1; r < d->world && rc == 0; r++) {
			rc = read_full(d->fds[r], &token, 1, deadline_ms);
			if (rc == 0 && token != 'R')
				rc = DL_EPROTO;
			if (rc != 0)
				set_err(err, err_size,
					"rank 0: rank %d did not finish "
					"connecting: %s",
					r, dl_strerror(rc));
		}
		token = 'G';
		for (int r = 1; r < d->world && rc == 0; r++)
			rc = write_full(d->fds[r], &token, 1, deadline_ms);
		if (rc != 0 && err && !err[0])
			set_err(err, err_size, "rank 0: starting the group: %s",
				dl_strerror(rc));
		return rc;
	}
	token = 'R';
	rc = write_full(d->fds[0], &token, 1, deadline_ms);
	if (rc == 0)
		rc = read_full(d->fds[0], &token, 1, deadline_ms);
	if (rc == 0 && token != 'G')
		rc = DL_EPROTO;
	if (rc != 0)
		set_err(err, err_size,
			"rank %d: the group did not start: %s (another rank "
			"failed to connect; see its log)",
			d->rank, dl_strerror(rc));
	return rc;
}

int dist_net_connect(struct dist *d, int listen_fd, char *err, size_t err_size)
{
	uint64_t deadline_ms = clock_now_ms() + d->timeout_ms;
	unsigned char *table = NULL;
	struct hello *hellos = NULL;
	uint64_t nonce = 0;
	int own_listener = -1, rc;

	d->fds = malloc((size_t)d->world * sizeof(*d->fds));
	if (d->fds == NULL) {
		set_err(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	for (int r = 0; r < d->world; r++)
		d->fds[r] = -1;
	if (d->rank == 0) {
		if (listen_fd < 0) {
			rc = listen_master(d, &listen_fd, err, err_size);
			if (rc != 0)
				goto out;
		}
		rc = master_serve(d, listen_fd, deadline_ms, err, err_size);
		close(listen_fd);
		if (rc != 0)
			goto out;
	} else {
		if (listen_fd >= 0)
			close(listen_fd);
		rc = join_master(d, deadline_ms, &table, &nonce, &own_listener,
				 err, err_size);
		if (rc != 0)
			goto out;
		rc = mesh_connect(d, table, nonce, deadline_ms, err, err_size);
		if (rc != 0)
			goto out;
		hellos = calloc((size_t)d->world, sizeof(*hellos));
		if (hellos == NULL) {
			rc = DL_ENOMEM;
			set_err(err, err_size, "out of memory");
			goto out;
		}
		rc = accept_peers(d, own_listener, NET_KIND_MESH, nonce,
				  d->rank + 1, d->fds, hellos, deadline_ms, err,
				  err_size);
		if (rc != 0)
			goto out;
	}
	rc = ready_go(d, deadline_ms, err, err_size);
	if (rc != 0)
		goto out;
	for (int r = 0; r < d->world; r++)
		if (d->fds[r] >= 0)
			tune_data_socket(d->fds[r]);
out:
	if (own_listener >= 0)
		close(own_listener);
	free(table);
	free(hellos);
	if (rc != 0)
		dist_net_close(d);
	return rc;
}

void dist_net_close(struct dist *d)
{
	if (d->fds == NULL)
		return;
	for (int r = 0; r < d->world; r++)
		if (d->fds[r] >= 0)
			close(d->fds[r]);
	free(d->fds);
	d->fds = NULL;
}
