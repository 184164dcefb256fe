/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_sock.h - the sockets under the collective library's bootstrap
 * (dist_sock.c): addresses in the form the group table carries, connects
 * and listeners, and reads and writes bounded by an absolute deadline
 * (CLOCK_MONOTONIC milliseconds, clock_now_ms). dist_net.c speaks the
 * bootstrap protocol over them. Nothing here knows struct dist: what the
 * sockets need of the group comes in struct dist_sock_master.
 */
#ifndef DLAUNCH_DIST_SOCK_H
#define DLAUNCH_DIST_SOCK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* dist_sock_remaining_ms: milliseconds left until deadline_ms, 0 when
 * past, capped to fit poll's int. While a cancel flag or a stop question
 * is set for this thread (dist_sock_set_cancel), at most 50 ms, and 0
 * once the flag is raised or the question answered yes: every bootstrap
 * wait then ends as at its deadline. */
int dist_sock_remaining_ms(uint64_t deadline_ms);
/* dist_sock_set_cancel: the calling thread's cancel flag and stop
 * question (stop(stop_arg), asked on this thread; NULL: none). */
void dist_sock_set_cancel(const atomic_int *cancel, int (*stop)(void *arg),
			  void *stop_arg);
/* dist_sock_cancelled: the calling thread's flag is raised, or its stop
 * question says yes */
int dist_sock_cancelled(void);

/* dist_sock_addr_pack/unpack: a socket address as (family 4 or 6, 16
 * address bytes, port), the form the group table carries. DL_EINVAL for
 * another family. */
int dist_sock_addr_pack(const struct sockaddr_storage *ss, uint8_t *family,
			uint8_t addr[16], uint16_t *port);
int dist_sock_addr_unpack(uint8_t family, const uint8_t addr[16], uint16_t port,
			  struct sockaddr_storage *ss, socklen_t *len);
/* dist_sock_addr_text: "host:port" ("[host]:port" for IPv6) for logs. */
void dist_sock_addr_text(const struct sockaddr_storage *ss, char *out,
			 size_t out_size);

/* dist_sock_tune: the options every mesh connection gets. */
void dist_sock_tune(int fd);

/* dist_sock_write_full/read_full: bootstrap I/O on a non-blocking socket,
 * bounded by deadline_ms. 0, DL_ETIMEDOUT, DL_ECLOSED or DL_ESYS. */
int dist_sock_write_full(int fd, const void *data, size_t len,
			 uint64_t deadline_ms);
int dist_sock_read_full(int fd, void *data, size_t len, uint64_t deadline_ms);

/* dist_sock_connect_once: one non-blocking connect bounded by the
 * deadline. Returns 0 with *out set (a non-blocking socket the caller
 * owns), DL_EAGAIN when the peer is not (yet) there, or DL_ETIMEDOUT /
 * DL_ESYS (errno tells why). */
int dist_sock_connect_once(const struct sockaddr *sa, socklen_t len,
			   uint64_t deadline_ms, int *out);

/* The master (rank 0) the bootstrap goes through, as the group's
 * configuration names it; rank and timeout_ms only go into messages. */
struct dist_sock_master {
	const char *addr;    /* MASTER_ADDR (borrowed) */
	uint16_t port;	     /* MASTER_PORT */
	int rank;	     /* the calling rank */
	uint64_t timeout_ms; /* the bound on the bootstrap */
};

/* dist_sock_connect_master: rank r > 0 reaches rank 0 at
 * MASTER_ADDR:MASTER_PORT, retrying with backoff until the deadline,
 * since rank 0 may start last; the message in err says what to check. */
int dist_sock_connect_master(const struct dist_sock_master *m,
			     uint64_t deadline_ms, int *out, char *err,
			     size_t err_size);

/* dist_sock_listen_master: rank 0's bootstrap listener on
 * MASTER_ADDR:MASTER_PORT (the wildcard address when MASTER_ADDR is not
 * one of this host's); *out is owned by the caller. */
int dist_sock_listen_master(const struct dist_sock_master *m, int *out,
			    char *err, size_t err_size);

/* dist_sock_listen_local: a listener for peers on the address this rank
 * reached rank 0 from (master_fd), on a port the kernel picks; *ss gets
 * its address. */
int dist_sock_listen_local(int master_fd, int *out,
			   struct sockaddr_storage *ss);

#endif
