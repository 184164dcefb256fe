/* SPDX-License-Identifier: Apache-2.0 */
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
 * bootstrap port is dropped without disturbing the group. The sockets
 * underneath (deadline-bounded connects, reads and writes) are in
 * dist_sock.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dist_sock.h"
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

/* report_missing: the message for an accept loop that timed out, naming
 * the ranks that never arrived. */
static void report_missing(const struct dist *d, uint32_t kind, int first,
			   const int *fds, int need, char *err, size_t err_size)
{
	char missing[128] = "";
	size_t used = 0;
	for (int r = first; r < d->world && used < 100; r++)
		if (r != d->rank && fds[r] < 0)
			used += (size_t)snprintf(missing + used,
						 sizeof(missing) - used, "%s%d",
						 used ? ", " : "", r);
	set_err(err, err_size,
		"rank %d: timed out after %llu ms waiting for rank%s %s to %s "
		"(are all WORLD_SIZE=%d ranks started with the same "
		"MASTER_ADDR/MASTER_PORT?)",
		d->rank, (unsigned long long)d->timeout_ms, need > 1 ? "s" : "",
		missing, kind == NET_KIND_BOOTSTRAP ? "join" : "connect",
		d->world);
}

enum pending_state { PENDING_KEEP, PENDING_JOINED, PENDING_DROPPED };

/* pending_read: reads what p's connection has sent of its hello; once it
 * is complete, either the peer joins (fds[rank] takes over p->fd, which
 * becomes -1; hellos[rank] is its hello) or it is dropped (rejected with
 * the reason where it may be one of ours). The caller closes p->fd
 * unless the answer is PENDING_KEEP. */
static enum pending_state pending_read(const struct dist *d, struct pending *p,
				       uint32_t kind, uint64_t nonce, int first,
				       int *fds, struct hello *hellos)
{
	char from[80], why[160];
	struct hello h;
	ssize_t got =
	    recv(p->fd, p->buf + p->got, HELLO_BYTES - p->got, MSG_DONTWAIT);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return PENDING_KEEP;
	dist_sock_addr_text(&p->from, from, sizeof(from));
	if (got <= 0) {
		log_debug("dist: rank %d: connection from %s closed before "
			  "its hello",
			  d->rank, from);
		return PENDING_DROPPED;
	}
	if ((p->got += (size_t)got) < HELLO_BYTES)
		return PENDING_KEEP;
	hello_decode(p->buf, &h);
	int bad = check_hello(d, &h, kind, nonce, first, fds, why, sizeof(why));
	if (bad != 0) {
		log_warn("dist: rank %d: rejected a connection from %s: %s",
			 d->rank, from, why);
		if (bad != DL_EPROTO && kind == NET_KIND_BOOTSTRAP)
			send_reject(p->fd, bad, why);
		return PENDING_DROPPED;
	}
	fds[h.rank] = p->fd;
	hellos[h.rank] = h;
	p->fd = -1;
	return PENDING_JOINED;
}

/* pending_accept: takes one connection from lfd into pend (a flood of
 * strangers pushes the oldest out). */
static void pending_accept(int lfd, struct pending *pend, int *npend)
{
	struct sockaddr_storage from;
	socklen_t len = sizeof(from);
	int fd = accept4(lfd, (struct sockaddr *)&from, &len,
			 SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (*npend == MAX_PENDING) {
		close(pend[0].fd);
		pend[0] = pend[--*npend];
	}
	pend[*npend].fd = fd;
	pend[*npend].got = 0;
	pend[*npend].from = from;
	(*npend)++;
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
		int left = dist_sock_remaining_ms(deadline_ms);
		int n = left > 0 ? poll(pfds, (nfds_t)npend + 1, left) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			set_err(err, err_size, "rank %d: poll: %s", d->rank,
				strerror(errno));
			rc = DL_ESYS;
			goto out;
		}
		if (n == 0 && dist_sock_remaining_ms(deadline_ms) > 0)
			continue; /* a slice of the wait, not its end */
		if (n == 0) {
			report_missing(d, kind, first, fds, need, err,
				       err_size);
			rc = DL_ETIMEDOUT;
			goto out;
		}
		/* pending connections first: the listener may refill */
		for (int i = npend - 1; i >= 0; i--) {
			if (!pfds[i + 1].revents)
				continue;
			enum pending_state st = pending_read(
			    d, &pend[i], kind, nonce, first, fds, hellos);
			if (st == PENDING_KEEP)
				continue;
			if (st == PENDING_JOINED)
				need--;
			if (pend[i].fd >= 0)
				close(pend[i].fd);
			pend[i] = pend[--npend];
		}
		if (pfds[0].revents & POLLIN)
			pending_accept(lfd, pend, &npend);
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
		rc = dist_sock_write_full(d->fds[r], reply, reply_bytes,
					  deadline_ms);
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

/* hello_of: this rank's hello of the given kind (no listener yet) */
static struct hello hello_of(const struct dist *d, uint32_t kind)
{
	struct hello h = {0};
	h.magic = NET_MAGIC;
	h.version = NET_VERSION;
	h.kind = kind;
	h.rank = (uint32_t)d->rank;
	h.world = (uint32_t)d->world;
	h.backend = (uint32_t)d->backend;
	return h;
}

/* check_reply: rank 0's reply header (REPLY_HEADER_BYTES in buf, which
 * has room for a refusal's reason) as rank r > 0 sees it: 0 when rank 0
 * accepted this rank; else the error, with rank 0's reason when it
 * refused (read from fd, sanitised for the terminal). */
static int check_reply(const struct dist *d, int fd, unsigned char *buf,
		       uint64_t deadline_ms, char *err, size_t err_size)
{
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
		if (dist_sock_read_full(fd, buf, len, deadline_ms) != 0)
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
	return 0;
}

/* master_of: where this group's bootstrap meets, for dist_sock.c */
static struct dist_sock_master master_of(const struct dist *d)
{
	struct dist_sock_master m = {
	    .addr = d->cfg.master_addr,
	    .port = d->cfg.master_port,
	    .rank = d->rank,
	    .timeout_ms = d->timeout_ms,
	};
	return m;
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
	struct hello h = hello_of(d, NET_KIND_BOOTSTRAP);
	int fd = -1, rc;
	struct dist_sock_master m = master_of(d);
	rc = dist_sock_connect_master(&m, deadline_ms, &fd, err, err_size);
	if (rc != 0)
		return rc;
	d->fds[0] = fd;
	rc = dist_sock_listen_local(fd, listen_fd, &local);
	if (rc != 0) {
		set_err(err, err_size, "rank %d: cannot open a listener: %s",
			d->rank, strerror(errno));
		return rc;
	}
	dist_sock_addr_pack(&local, &h.family, h.addr, &h.port);
	hello_encode(&h, buf);
	rc = dist_sock_write_full(fd, buf, HELLO_BYTES, deadline_ms);
	if (rc == 0)
		rc = dist_sock_read_full(fd, buf, REPLY_HEADER_BYTES,
					 deadline_ms);
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
	rc = check_reply(d, fd, buf, deadline_ms, err, err_size);
	if (rc != 0)
		return rc;
	*nonce = get_u64(buf + 16);
	size_t rest = DIST_NCCL_ID_BYTES + (size_t)d->world * ENTRY_BYTES;
	*table = malloc(rest);
	if (*table == NULL) {
		set_err(err, err_size, "rank %d: out of memory", d->rank);
		return DL_ENOMEM;
	}
	rc = dist_sock_read_full(fd, *table, rest, deadline_ms);
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
		struct hello h = hello_of(d, NET_KIND_MESH);
		char where[80] = "?";
		int fd = -1, rc;
		rc = dist_sock_addr_unpack(e[2], e + 4, get_u16(e), &ss, &len);
		if (rc == 0) {
			dist_sock_addr_text(&ss, where, sizeof(where));
			rc = dist_sock_connect_once((struct sockaddr *)&ss, len,
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
		h.target = (uint32_t)peer;
		h.nonce = nonce;
		hello_encode(&h, buf);
		rc = dist_sock_write_full(fd, buf, HELLO_BYTES, deadline_ms);
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
			rc = dist_sock_read_full(d->fds[r], &token, 1,
						 deadline_ms);
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
			rc = dist_sock_write_full(d->fds[r], &token, 1,
						  deadline_ms);
		if (rc != 0 && err && !err[0])
			set_err(err, err_size, "rank 0: starting the group: %s",
				dl_strerror(rc));
		return rc;
	}
	token = 'R';
	rc = dist_sock_write_full(d->fds[0], &token, 1, deadline_ms);
	if (rc == 0)
		rc = dist_sock_read_full(d->fds[0], &token, 1, deadline_ms);
	if (rc == 0 && token != 'G')
		rc = DL_EPROTO;
	if (rc != 0)
		set_err(err, err_size,
			"rank %d: the group did not start: %s (another rank "
			"failed to connect; see its log)",
			d->rank, dl_strerror(rc));
	return rc;
}

/* form_as_master: rank 0 serves the bootstrap on listen_fd (or on
 * MASTER_PORT when it is -1), which it closes. */
static int form_as_master(struct dist *d, int listen_fd, uint64_t deadline_ms,
			  char *err, size_t err_size)
{
	int rc = 0;
	if (listen_fd < 0) {
		struct dist_sock_master m = master_of(d);
		rc = dist_sock_listen_master(&m, &listen_fd, err, err_size);
	}
	if (rc != 0)
		return rc;
	rc = master_serve(d, listen_fd, deadline_ms, err, err_size);
	close(listen_fd);
	return rc;
}

/* form_as_peer: rank r > 0 joins through rank 0, connects to the ranks
 * below it and accepts those above it on a listener of its own. */
static int form_as_peer(struct dist *d, uint64_t deadline_ms, char *err,
			size_t err_size)
{
	unsigned char *table = NULL;
	struct hello *hellos = NULL;
	uint64_t nonce = 0;
	int own_listener = -1, rc;
	rc = join_master(d, deadline_ms, &table, &nonce, &own_listener, err,
			 err_size);
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
	rc = accept_peers(d, own_listener, NET_KIND_MESH, nonce, d->rank + 1,
			  d->fds, hellos, deadline_ms, err, err_size);
out:
	if (own_listener >= 0)
		close(own_listener);
	free(table);
	free(hellos);
	return rc;
}

int dist_net_connect(struct dist *d, int listen_fd, char *err, size_t err_size)
{
	uint64_t deadline_ms = clock_now_ms() + d->timeout_ms;
	int rc;

	d->fds = malloc((size_t)d->world * sizeof(*d->fds));
	if (d->fds == NULL) {
		if (listen_fd >= 0)
			close(listen_fd);
		set_err(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	for (int r = 0; r < d->world; r++)
		d->fds[r] = -1;
	if (d->rank == 0) {
		rc = form_as_master(d, listen_fd, deadline_ms, err, err_size);
	} else {
		if (listen_fd >= 0)
			close(listen_fd);
		rc = form_as_peer(d, deadline_ms, err, err_size);
	}
	if (rc == 0)
		rc = ready_go(d, deadline_ms, err, err_size);
	if (rc != 0) {
		dist_net_close(d);
		return rc;
	}
	for (int r = 0; r < d->world; r++)
		if (d->fds[r] >= 0)
			dist_sock_tune(d->fds[r]);
	return 0;
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
