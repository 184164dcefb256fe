/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_answer_int.h - the field readers the parsers of etcd's answers
 * share (etcd_answer_field.c), used by etcd_answer.c. Each returns 0 or
 * DL_EPROTO (DL_ENOMEM, DL_ELIMIT where said) with a message naming the
 * field in err. Private to those two files.
 */
#ifndef DLAUNCH_AGENT_ETCD_ANSWER_INT_H
#define DLAUNCH_AGENT_ETCD_ANSWER_INT_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlaunch/error.h"
#include "etcd_proto.h"

/* proto: fail with DL_EPROTO and a message naming the answer's field */
#define proto(err, err_size, ...)                                              \
	dl_errorf(err, err_size, DL_EPROTO, __VA_ARGS__)

/* etcd_ans_int reads obj[name], a decimal string (the gateway's int64/uint64),
 * into [min, max]; absent is 0 (a zero value). */
int etcd_ans_int(json_t *obj, const char *name, int is_signed, int64_t min,
		 uint64_t max, void *out, char *err, size_t err_size);
/* etcd_ans_i64: etcd_ans_int of a revision, an id, a count (>= 0) */
int etcd_ans_i64(json_t *obj, const char *name, int64_t *out, char *err,
		 size_t err_size);
/* etcd_ans_bool: obj[name] true or false (absent: false) */
int etcd_ans_bool(json_t *obj, const char *name, int *out, char *err,
		  size_t err_size);
/* etcd_ans_object: obj[name] as an object, NULL when absent; *rc set when it
 * is there with another type */
json_t *etcd_ans_object(json_t *obj, const char *name, int *rc, char *err,
			size_t err_size);
/* etcd_ans_array: obj[name] as an array of at most max (absent: NULL) */
int etcd_ans_array(json_t *obj, const char *name, size_t max, json_t **out,
		   char *err, size_t err_size);
/* etcd_ans_message keeps at most size - 1 bytes of s, control bytes as '?' (an
 * error's text goes to the log) */
void etcd_ans_message(char *dst, size_t size, const char *s);
/* etcd_ans_header reads obj["header"] (absent: an error when required) */
int etcd_ans_header(json_t *obj, int required, struct etcd_header *h, char *err,
		    size_t err_size);
/* etcd_ans_kv reads one key-value (released with etcd_kv_release) */
int etcd_ans_kv(json_t *v, struct etcd_kv *kv, char *err, size_t err_size);
/* etcd_ans_kvs_free releases n kvs and the array */
void etcd_ans_kvs_free(struct etcd_kv *kvs, size_t n);
/* etcd_ans_kvs reads obj[name], an array of kvs (absent: none) */
int etcd_ans_kvs(json_t *obj, const char *name, struct etcd_kv **out,
		 size_t *n_out, char *err, size_t err_size);
/* etcd_ans_error reads an error answer's code and message; 1 when root is
 * one, 0 when not, negative on a malformed one. Unary errors are
 * {"error": "...", "message": "...", "code": N} (3.4) or {"code": N,
 * "message": "..."} (3.5+); a stream's are {"error": {"grpc_code": N,
 * "message": "..."}}. An answer with a header or a result is no error (a
 * lease grant has an "error" string of its own). */
int etcd_ans_error(json_t *root, struct etcd_error *e, char *err,
		   size_t err_size);
/* etcd_ans_load parses an answer and turns an etcd error into its code, with
 * "etcd: MESSAGE (code N)" in err. *root: a new reference on success. */
int etcd_ans_load(const char *data, size_t len, json_t **root, char *err,
		  size_t err_size);

#endif
