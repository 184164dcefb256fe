/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.h - strict reading of the rendezvous requests' fields (private
 * to rendezvous/, used by api.c). Every function returns 0 or DL_EINVAL
 * with a message for a 400 answer in err.
 */
#ifndef DLAUNCH_RDZV_REQUEST_H
#define DLAUNCH_RDZV_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "dlaunch/rdzv_state.h"

/* request_query_u64 reads the integer query parameter key in [min, max];
 * absent is fine (out untouched) unless required. Values are not
 * percent-decoded: every value we take is a name or a number. */
int request_query_u64(const char *query, const char *key, int required,
		      uint64_t min, uint64_t max, uint64_t *out, char *err,
		      size_t err_size);
/* request_query_name reads the name query parameter key (at most max_len
 * bytes) into out; "" when absent. */
int request_query_name(const char *query, const char *key, size_t max_len,
		       char *out, size_t out_size, char *err, size_t err_size);

/* request_body parses req's body as JSON (bounded depth); *out is a new
 * reference. */
int request_body(const struct rdzv_request *req, json_t **out, char *err,
		 size_t err_size);

/* request_wait reads wait_ms from the query, else (body non-NULL) from
 * the body, else dflt; at most RDZV_WAIT_MAX_MS. */
int request_wait(const struct rdzv_request *req, json_t *body, uint64_t dflt,
		 uint64_t *out, char *err, size_t err_size);

/* request_node_round reads node_id, incarnation and (round non-NULL)
 * round of a fenced request; node_id and incarnation hold
 * RDZV_NAME_MAX + 1 and RDZV_INCARNATION_MAX + 1 bytes. */
int request_node_round(json_t *body, char *node_id, char *incarnation,
		       uint64_t *round, char *err, size_t err_size);

/* request_join reads a join: the node, the job configuration it asks for
 * and how long to hold the request; the address defaults to the peer's. */
int request_join(const struct rdzv_request *req, json_t *body,
		 struct rdzv_node_info *node, struct rdzv_job_config *cfg,
		 uint64_t *wait_ms, char *err, size_t err_size);

/* request_failures validates a report's failures and copies the fields
 * kept: a new array, or NULL with err on a bad entry. */
json_t *request_failures(json_t *in, char *err, size_t err_size);

#endif
