/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist.c - the public face of the collective library: configuration,
 * group lifetime, argument checks and the bookkeeping of asynchronous
 * requests. dist_init picks the backend's table of operations (struct
 * dist_ops, dist_priv.h) once; every operation then goes through it:
 * dist_tcp_backend.c for host buffers over TCP, dist_nccl.c for CUDA
 * buffers over NCCL (in builds without CUDA, dist_nccl_nocuda.c says why
 * there is none).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dist_sock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/parse.h"

#define DIST_DEFAULT_TIMEOUT_MS 300000

static int env_int(const char *name, int min, int max, int *out, char *err,
		   size_t err_size)
{
	const char *s = getenv(name);
	if (s == NULL)
		return DL_ENOTFOUND;
	int rc = parse_int(s, min, max, out);
	if (rc != 0)
		set_err(err, err_size, "%s='%s' is not an integer in [%d, %d]",
			name, s, min, max);
	return rc;
}

/* env_rank_world: RANK and WORLD_SIZE, both or neither (a world of one) */
static int env_rank_world(struct dist_config *c, char *err, size_t err_size)
{
	int rc_rank, rc_world;
	rc_rank =
	    env_int("RANK", 0, DIST_MAX_WORLD - 1, &c->rank, err, err_size);
	if (rc_rank != 0 && rc_rank != DL_ENOTFOUND)
		return rc_rank;
	rc_world = env_int("WORLD_SIZE", 1, DIST_MAX_WORLD, &c->world_size, err,
			   err_size);
	if (rc_world != 0 && rc_world != DL_ENOTFOUND)
		return rc_world;
	if ((rc_rank == 0) != (rc_world == 0)) {
		set_err(err, err_size, "%s is set but %s is not",
			rc_rank == 0 ? "RANK" : "WORLD_SIZE",
			rc_rank == 0 ? "WORLD_SIZE" : "RANK");
		return DL_EINVAL;
	}
	if (c->rank >= c->world_size) {
		set_err(err, err_size, "RANK=%d is not below WORLD_SIZE=%d",
			c->rank, c->world_size);
		return DL_ERANGE;
	}
	return 0;
}

/* env_master: MASTER_PORT and MASTER_ADDR, needed beyond a world of one
 * (127.0.0.1 otherwise) */
static int env_master(struct dist_config *c, char *err, size_t err_size)
{
	const char *addr = getenv("MASTER_ADDR");
	int port = 0;
	int rc = env_int("MASTER_PORT", 1, 65535, &port, err, err_size);
	if (rc != 0 && rc != DL_ENOTFOUND)
		return rc;
	if (c->world_size > 1 && rc == DL_ENOTFOUND) {
		set_err(err, err_size,
			"MASTER_PORT is not set (needed for WORLD_SIZE=%d)",
			c->world_size);
		return DL_EINVAL;
	}
	c->master_port = (uint16_t)port;
	if (addr == NULL && c->world_size > 1) {
		set_err(err, err_size,
			"MASTER_ADDR is not set (needed for WORLD_SIZE=%d)",
			c->world_size);
		return DL_EINVAL;
	}
	if (addr == NULL)
		addr = "127.0.0.1";
	if (addr[0] == 0 || strlen(addr) >= sizeof(c->master_addr)) {
		set_err(err, err_size,
			"MASTER_ADDR must be a host name or address of 1 to "
			"%zu characters",
			sizeof(c->master_addr) - 1);
		return DL_EINVAL;
	}
	memcpy(c->master_addr, addr, strlen(addr) + 1);
	return 0;
}

int dist_config_from_env(struct dist_config *cfg, char *err, size_t err_size)
{
	struct dist_config c;
	const char *timeout = getenv("DLAUNCH_DIST_TIMEOUT");
	int rc;

	memset(&c, 0, sizeof(c));
	c.world_size = 1;
	c.backend = DIST_BACKEND_TCP;
	c.timeout_ms = DIST_DEFAULT_TIMEOUT_MS;
	rc = env_rank_world(&c, err, err_size);
	if (rc != 0)
		return rc;
	rc = env_int("LOCAL_RANK", 0, 1 << 20, &c.cuda_device, err, err_size);
	if (rc != 0 && rc != DL_ENOTFOUND)
		return rc;
	rc = env_master(&c, err, err_size);
	if (rc != 0)
		return rc;
	if (timeout != NULL &&
	    parse_duration_ms(timeout, 1000, 1, UINT64_C(1) << 40,
			      &c.timeout_ms) != 0) {
		set_err(err, err_size,
			"DLAUNCH_DIST_TIMEOUT='%s' is not a duration such as "
			"300, 30s or 500ms",
			timeout);
		return DL_EINVAL;
	}
	*cfg = c;
	return 0;
}

const char *dist_backend_name(enum dist_backend backend)
{
	switch (backend) {
	case DIST_BACKEND_TCP: return "tcp";
	case DIST_BACKEND_NCCL: return "nccl";
	}
	return "unknown";
}

size_t dist_dtype_size(enum dist_dtype dtype)
{
	switch (dtype) {
	case DIST_FLOAT32: return 4;
	case DIST_FLOAT64: return 8;
	case DIST_INT32: return 4;
	case DIST_INT64: return 8;
	case DIST_UINT8: return 1;
	}
	return 0;
}

int dist_rank(const struct dist *d)
{
	return d->rank;
}

int dist_world_size(const struct dist *d)
{
	return d->world;
}

enum dist_backend dist_get_backend(const struct dist *d)
{
	return d->backend;
}

static int check_config(const struct dist_config *cfg, char *err,
			size_t err_size)
{
	if (cfg->world_size < 1 || cfg->world_size > DIST_MAX_WORLD) {
		set_err(err, err_size, "world size %d is not in [1, %d]",
			cfg->world_size, DIST_MAX_WORLD);
		return DL_ERANGE;
	}
	if (cfg->rank < 0 || cfg->rank >= cfg->world_size) {
		set_err(err, err_size, "rank %d is not in [0, %d)", cfg->rank,
			cfg->world_size);
		return DL_ERANGE;
	}
	if (cfg->backend != DIST_BACKEND_TCP &&
	    cfg->backend != DIST_BACKEND_NCCL) {
		set_err(err, err_size, "unknown backend %d", (int)cfg->backend);
		return DL_EINVAL;
	}
	if (cfg->world_size > 1 &&
	    (memchr(cfg->master_addr, 0, sizeof(cfg->master_addr)) == NULL ||
	     cfg->master_addr[0] == 0)) {
		set_err(err, err_size,
			"the master address is empty or not "
			"terminated");
		return DL_EINVAL;
	}
	if (cfg->world_size > 1 && cfg->master_port == 0) {
		set_err(err, err_size, "the master port is 0");
		return DL_EINVAL;
	}
	return 0;
}

/* pick_ops: the table of the backend cfg asks for (checked by
 * check_config), or why this build has none. */
static int pick_ops(enum dist_backend backend, const struct dist_ops **out,
		    char *err, size_t err_size)
{
	if (backend == DIST_BACKEND_NCCL)
		return dist_nccl_ops(out, err, err_size);
	*out = &dist_tcp_ops;
	return 0;
}

/* group_new: a group with its configuration and no connections yet */
static struct dist *group_new(const struct dist_config *cfg,
			      const struct dist_ops *ops)
{
	struct dist *d = calloc(1, sizeof(*d));
	if (d == NULL)
		return NULL;
	d->cfg = *cfg;
	d->rank = cfg->rank;
	d->world = cfg->world_size;
	d->backend = cfg->backend;
	d->ops = ops;
	d->timeout_ms =
	    cfg->timeout_ms ? cfg->timeout_ms : DIST_DEFAULT_TIMEOUT_MS;
	d->wake_fds[0] = d->wake_fds[1] = -1;
	d->flight = cfg->flight;
	dist_fault_config(d);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	return d;
}

int dist_init_listener(const struct dist_config *cfg, int listen_fd,
		       struct dist **out, char *err, size_t err_size)
{
	const struct dist_ops *ops = NULL;
	struct dist *d = NULL;
	int rc;

	if (err && err_size)
		err[0] = 0;
	*out = NULL;
	rc = check_config(cfg, err, err_size);
	if (rc == 0)
		rc = pick_ops(cfg->backend, &ops, err, err_size);
	if (rc != 0)
		goto fail;
	d = group_new(cfg, ops);
	if (d == NULL) {
		rc = DL_ENOMEM;
		set_err(err, err_size, "out of memory");
		goto fail;
	}
	rc = ops->prepare(d, err, err_size);
	if (rc != 0)
		goto fail;
	if (d->world > 1) {
		dist_sock_set_cancel(cfg->cancel, cfg->stop, cfg->stop_arg);
		rc = dist_net_connect(d, listen_fd, err, err_size);
		listen_fd = -1; /* owned by dist_net_connect */
		if (rc != 0 && dist_sock_cancelled()) {
			rc = DL_ECLOSED;
			set_err(err, err_size,
				"rank %d: forming the group was cancelled",
				cfg->rank);
		}
		dist_sock_set_cancel(NULL, NULL, NULL);
		if (rc != 0)
			goto fail;
	}
	rc = ops->init(d, err, err_size);
	if (rc != 0)
		goto fail;
	dist_flight_begin_group(d->flight, d->rank);
	log_debug("dist: rank %d of %d joined the group (%s backend)", d->rank,
		  d->world, dist_backend_name(d->backend));
	*out = d;
	return 0;
fail:
	if (listen_fd >= 0)
		close(listen_fd);
	dist_free(d);
	return rc;
}

void dist_abort(struct dist *d)
{
	if (d == NULL || atomic_exchange(&d->aborted, 1))
		return;
	/* shutdown, not close: the descriptors stay valid (no reuse race
	 * with the thread inside the operation), and every poll on them
	 * wakes with an end of stream at once */
	if (d->fds != NULL)
		for (int p = 0; p < d->world; p++)
			if (d->fds[p] >= 0)
				shutdown(d->fds[p], SHUT_RDWR);
}

int dist_aborted(const struct dist *d)
{
	return d != NULL && atomic_load(&d->aborted);
}

int dist_init(const struct dist_config *cfg, struct dist **out, char *err,
	      size_t err_size)
{
	return dist_init_listener(cfg, -1, out, err, err_size);
}

void dist_free(struct dist *d)
{
	if (d == NULL)
		return;
	if (d->all != NULL)
		log_warn("dist: rank %d: freeing the group with requests not "
			 "waited for",
			 d->rank);
	d->ops->release(d);
	while (d->all != NULL) {
		struct dist_req *req = d->all;
		d->all = req->next_all;
		free(req);
	}
	dist_net_close(d);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

void dist_set_stream(struct dist *d, void *cuda_stream)
{
	d->ops->set_stream(d, cuda_stream);
}

/* Argument checks shared by every operation. */
static int check_buf(const struct dist *d, const char *what, const void *buf,
		     size_t count, enum dist_dtype dtype)
{
	size_t es = dist_dtype_size(dtype);
	if (es == 0) {
		log_error("dist: %s: unknown dtype %d", what, (int)dtype);
		return DL_EINVAL;
	}
	if (count > SIZE_MAX / es / (size_t)d->world) {
		log_error("dist: %s: count %zu is too large", what, count);
		return DL_ERANGE;
	}
	if (buf == NULL && count > 0) {
		log_error("dist: %s: NULL buffer for %zu elements", what,
			  count);
		return DL_EINVAL;
	}
	return 0;
}

static int check_peer(const struct dist *d, const char *what, int peer)
{
	if (peer < 0 || peer >= d->world || peer == d->rank) {
		log_error("dist: rank %d: %s: peer %d is not another rank of "
			  "the world of %d",
			  d->rank, what, peer, d->world);
		return DL_EINVAL;
	}
	return 0;
}

static int check_root(const struct dist *d, const char *what, int root)
{
	if (root < 0 || root >= d->world) {
		log_error("dist: %s: root %d is not in [0, %d)", what, root,
			  d->world);
		return DL_EINVAL;
	}
	return 0;
}

static int check_op(const char *what, enum dist_op op)
{
	if (op != DIST_SUM && op != DIST_AVG && op != DIST_MAX &&
	    op != DIST_MIN) {
		log_error("dist: %s: unknown op %d", what, (int)op);
		return DL_EINVAL;
	}
	return 0;
}

/* ---- asynchronous requests ---- */

static struct dist_req *req_new(struct dist *d, enum dist_req_kind kind,
				void *buf, size_t count, enum dist_dtype dtype,
				int peer)
{
	struct dist_req *req = calloc(1, sizeof(*req));
	if (req == NULL)
		return NULL;
	req->d = d;
	req->kind = kind;
	req->buf = buf;
	req->count = count;
	req->dtype = dtype;
	req->peer = peer;
	pthread_mutex_lock(&d->mu);
	req->next_all = d->all;
	if (d->all)
		d->all->prev_all = req;
	d->all = req;
	pthread_mutex_unlock(&d->mu);
	return req;
}

/* req_unlink_free: under d->mu. */
static void req_unlink_free(struct dist_req *req)
{
	struct dist *d = req->d;
	if (req->prev_all)
		req->prev_all->next_all = req->next_all;
	else
		d->all = req->next_all;
	if (req->next_all)
		req->next_all->prev_all = req->prev_all;
	free(req);
}

/* submit: starts req on the backend (which may complete it at once);
 * on failure req is freed and *out stays NULL. */
static int submit(struct dist *d, struct dist_req *req, struct dist_req **out)
{
	int rc = d->ops->submit(d, req);
	if (rc != 0) {
		pthread_mutex_lock(&d->mu);
		req_unlink_free(req);
		pthread_mutex_unlock(&d->mu);
		return rc;
	}
	*out = req;
	return 0;
}

int dist_wait(struct dist_req *req)
{
	if (req == NULL)
		return DL_EINVAL;
	struct dist *d = req->d;
	int status = d->ops->wait(req);
	if (status == 0) /* NCCL: done now; TCP: its thread finished it */
		dist_flight_finish(d->flight, req->flight);
	pthread_mutex_lock(&d->mu);
	req_unlink_free(req);
	pthread_mutex_unlock(&d->mu);
	return status;
}

int dist_isend(struct dist *d, const void *buf, size_t count,
	       enum dist_dtype dtype, int peer, struct dist_req **req)
{
	int rc = check_buf(d, "isend", buf, count, dtype);
	if (rc == 0)
		rc = check_peer(d, "isend", peer);
	if (rc != 0)
		return rc;
	*req = NULL;
	/* the request keeps a non-const pointer; send never writes it */
	struct dist_req *r = req_new(d, DIST_REQ_SEND, (void *)(uintptr_t)buf,
				     count, dtype, peer);
	if (r == NULL)
		return DL_ENOMEM;
	return submit(d, r, req);
}

int dist_irecv(struct dist *d, void *buf, size_t count, enum dist_dtype dtype,
	       int peer, struct dist_req **req)
{
	int rc = check_buf(d, "irecv", buf, count, dtype);
	if (rc == 0)
		rc = check_peer(d, "irecv", peer);
	if (rc != 0)
		return rc;
	*req = NULL;
	struct dist_req *r = req_new(d, DIST_REQ_RECV, buf, count, dtype, peer);
	if (r == NULL)
		return DL_ENOMEM;
	return submit(d, r, req);
}

int dist_iall_reduce(struct dist *d, void *buf, size_t count,
		     enum dist_dtype dtype, enum dist_op op,
		     struct dist_req **req)
{
	int rc = check_buf(d, "iall_reduce", buf, count, dtype);
	if (rc == 0)
		rc = check_op("iall_reduce", op);
	if (rc != 0)
		return rc;
	*req = NULL;
	dist_fault_before_all_reduce(d);
	struct dist_req *r =
	    req_new(d, DIST_REQ_ALL_REDUCE, buf, count, dtype, -1);
	if (r == NULL)
		return DL_ENOMEM;
	r->op = op;
	r->flight = dist_flight_enter(d->flight, DIST_FLIGHT_ALL_REDUCE,
				      count * dist_dtype_size(dtype));
	return submit(d, r, req);
}

/* ---- blocking operations ---- */

/* recorded: a blocking collective of flight handle fl returned rc; a
 * failed one stays "entered" in the flight recorder */
static int recorded(struct dist *d, uint64_t fl, int rc)
{
	if (rc == 0)
		dist_flight_finish(d->flight, fl);
	return rc;
}

int dist_send(struct dist *d, const void *buf, size_t count,
	      enum dist_dtype dtype, int peer)
{
	int rc = check_buf(d, "send", buf, count, dtype);
	if (rc == 0)
		rc = check_peer(d, "send", peer);
	if (rc != 0)
		return rc;
	return d->ops->send(d, buf, count, dtype, peer);
}

int dist_recv(struct dist *d, void *buf, size_t count, enum dist_dtype dtype,
	      int peer)
{
	int rc = check_buf(d, "recv", buf, count, dtype);
	if (rc == 0)
		rc = check_peer(d, "recv", peer);
	if (rc != 0)
		return rc;
	return d->ops->recv(d, buf, count, dtype, peer);
}

int dist_broadcast(struct dist *d, void *buf, size_t count,
		   enum dist_dtype dtype, int root)
{
	int rc = check_buf(d, "broadcast", buf, count, dtype);
	if (rc == 0)
		rc = check_root(d, "broadcast", root);
	if (rc != 0)
		return rc;
	uint64_t fl = dist_flight_enter(d->flight, DIST_FLIGHT_BROADCAST,
					count * dist_dtype_size(dtype));
	rc = d->ops->broadcast(d, buf, count, dtype, root);
	return recorded(d, fl, rc);
}

int dist_reduce(struct dist *d, const void *send, void *recv, size_t count,
		enum dist_dtype dtype, enum dist_op op, int root)
{
	int rc = check_buf(d, "reduce", send, count, dtype);
	if (rc == 0)
		rc = check_root(d, "reduce", root);
	if (rc == 0 && d->rank == root)
		rc = check_buf(d, "reduce", recv, count, dtype);
	if (rc == 0)
		rc = check_op("reduce", op);
	if (rc != 0)
		return rc;
	uint64_t fl = dist_flight_enter(d->flight, DIST_FLIGHT_REDUCE,
					count * dist_dtype_size(dtype));
	rc = d->ops->reduce(d, send, recv, count, dtype, op, root);
	return recorded(d, fl, rc);
}

int dist_all_reduce(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype, enum dist_op op)
{
	int rc = check_buf(d, "all_reduce", send, count, dtype);
	if (rc == 0)
		rc = check_buf(d, "all_reduce", recv, count, dtype);
	if (rc == 0)
		rc = check_op("all_reduce", op);
	if (rc != 0)
		return rc;
	dist_fault_before_all_reduce(d);
	uint64_t fl = dist_flight_enter(d->flight, DIST_FLIGHT_ALL_REDUCE,
					count * dist_dtype_size(dtype));
	rc = d->ops->all_reduce(d, send, recv, count, dtype, op);
	return recorded(d, fl, rc);
}

int dist_all_gather(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype)
{
	int rc = check_buf(d, "all_gather", send, count, dtype);
	if (rc == 0)
		rc = check_buf(d, "all_gather", recv, count, dtype);
	if (rc != 0)
		return rc;
	uint64_t fl = dist_flight_enter(d->flight, DIST_FLIGHT_ALL_GATHER,
					count * dist_dtype_size(dtype));
	rc = d->ops->all_gather(d, send, recv, count, dtype);
	return recorded(d, fl, rc);
}

int dist_barrier(struct dist *d)
{
	uint64_t fl = dist_flight_enter(d->flight, DIST_FLIGHT_BARRIER, 0);
	return recorded(d, fl, d->ops->barrier(d));
}
