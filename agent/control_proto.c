/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_proto.c - the worker control channel's lines: split, parsed and
 * written (control_proto.h). Pure: no descriptor, no clock, no log.
 */
#include <stdio.h>
#include <string.h>

#include "control_proto.h"
#include "dlaunch/error.h"
#include "dlaunch/jsonh.h"

static const struct {
	const char *name;
	enum control_msg_type type;
} msg_types[] = {
    {"hello", CONTROL_MSG_HELLO},     {"step", CONTROL_MSG_STEP},
    {"aborted", CONTROL_MSG_ABORTED}, {"reformed", CONTROL_MSG_REFORMED},
    {"dumped", CONTROL_MSG_DUMPED},
};

static const struct {
	const char *name;
	unsigned bit;
} handle_names[] = {
    {"abort", CONTROL_HANDLES_ABORT},
    {"membership", CONTROL_HANDLES_MEMBERSHIP},
    {"preempt", CONTROL_HANDLES_PREEMPT},
    {"dump", CONTROL_HANDLES_DUMP},
};

const char *control_msg_name(enum control_msg_type t)
{
	for (size_t i = 0; i < sizeof(msg_types) / sizeof(msg_types[0]); i++)
		if (msg_types[i].type == t)
			return msg_types[i].name;
	return "unknown";
}

/* read_handles: hello's "handles", an array of strings; names this
 * version does not know are skipped (a newer worker may list more) */
static int read_handles(json_t *obj, unsigned *out, char *err, size_t err_size)
{
	json_t *arr = json_object_get(obj, "handles"), *v;
	size_t i;
	*out = 0;
	if (!arr)
		return dl_errorf(err, err_size, DL_EPROTO,
				 "hello without \"handles\"");
	if (!json_is_array(arr))
		return dl_errorf(err, err_size, DL_EPROTO,
				 "\"handles\" is not an array");
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return dl_errorf(err, err_size, DL_EPROTO,
					 "\"handles\" holds a non-string");
		for (size_t k = 0;
		     k < sizeof(handle_names) / sizeof(handle_names[0]); k++)
			if (strcmp(json_string_value(v),
				   handle_names[k].name) == 0)
				*out |= handle_names[k].bit;
	}
	return 0;
}

static int read_members(json_t *obj, struct control_msg *m, char *err,
			size_t err_size)
{
	const char *id = NULL;
	int rc = 0;
	switch (m->type) {
	case CONTROL_MSG_HELLO:
		rc = jsonh_get_u64(obj, "version", 1, 0, UINT32_MAX,
				   &m->version, err, err_size);
		if (rc == 0)
			rc = read_handles(obj, &m->handles, err, err_size);
		break;
	case CONTROL_MSG_STEP:
		rc = jsonh_get_u64(obj, "step", 1, 0, INT64_MAX, &m->step, err,
				   err_size);
		break;
	case CONTROL_MSG_ABORTED:
	case CONTROL_MSG_REFORMED:
		rc = jsonh_get_u64(obj, "round", 1, 0, INT64_MAX, &m->round,
				   err, err_size);
		if (rc == 0)
			rc = jsonh_get_u64(obj, "step", 1, 0, INT64_MAX,
					   &m->step, err, err_size);
		break;
	case CONTROL_MSG_DUMPED:
		rc = jsonh_get_str(obj, "id", 1, CONTROL_ID_MAX, &id, err,
				   err_size);
		if (rc == 0)
			snprintf(m->id, sizeof(m->id), "%s", id);
		break;
	case CONTROL_MSG_UNKNOWN: break;
	}
	return rc ? DL_EPROTO : 0;
}

int control_parse_line(const char *line, size_t len, struct control_msg *m,
		       char *err, size_t err_size)
{
	json_t *obj = NULL;
	const char *type = NULL;
	int rc;
	memset(m, 0, sizeof(*m));
	if (len >= CONTROL_LINE_MAX)
		return dl_errorf(err, err_size, DL_ELIMIT,
				 "line longer than %d bytes", CONTROL_LINE_MAX);
	if (memchr(line, '\0', len))
		return dl_errorf(err, err_size, DL_EPROTO,
				 "line holds a NUL byte");
	rc = jsonh_parse(line, len, CONTROL_DEPTH_MAX, &obj, err, err_size);
	if (rc != 0)
		return rc == DL_ELIMIT ? rc : DL_EPROTO;
	rc = jsonh_get_str(obj, "type", 1, 64, &type, err, err_size);
	if (rc != 0) {
		rc = DL_EPROTO;
		goto out;
	}
	m->type = CONTROL_MSG_UNKNOWN;
	for (size_t i = 0; i < sizeof(msg_types) / sizeof(msg_types[0]); i++)
		if (strcmp(type, msg_types[i].name) == 0)
			m->type = msg_types[i].type;
	rc = read_members(obj, m, err, err_size);
out:
	json_decref(obj);
	return rc;
}

/* ------------------------------------------------------------ reader */

void control_reader_init(struct control_reader *r)
{
	r->len = 0;
	r->start = 0;
}

char *control_reader_space(struct control_reader *r, size_t *avail)
{
	/* what the lines taken left behind goes: the rest moves down */
	if (r->start > 0) {
		memmove(r->data, r->data + r->start, r->len - r->start);
		r->len -= r->start;
		r->start = 0;
	}
	*avail = sizeof(r->data) - r->len;
	return r->data + r->len;
}

void control_reader_commit(struct control_reader *r, size_t n)
{
	if (n > sizeof(r->data) - r->len)
		n = sizeof(r->data) - r->len;
	r->len += n;
}

int control_reader_next(struct control_reader *r, const char **line,
			size_t *len)
{
	const char *begin = r->data + r->start;
	size_t held = r->len - r->start;
	const char *nl = memchr(begin, '\n', held);
	if (!nl) {
		/* a full buffer with no newline: the line is too long */
		if (r->start == 0 && r->len == sizeof(r->data))
			return DL_ELIMIT;
		return 0;
	}
	*line = begin;
	*len = (size_t)(nl - begin);
	r->start += *len + 1;
	return 1;
}

/* ------------------------------------------------------------ writers */

/* put appends obj (taken) to b as one line */
static int put(struct buf *b, json_t *obj)
{
	size_t before = b->len;
	int rc;
	if (!obj)
		return DL_ENOMEM;
	rc = jsonh_dump(obj, b);
	if (rc == 0)
		rc = buf_append(b, "\n", 1);
	if (rc != 0 && b->data) {
		b->len = before;
		b->data[before] = '\0';
	}
	json_decref(obj);
	return rc;
}

int control_write_welcome(struct buf *b, unsigned version,
			  uint64_t reform_timeout_ms,
			  uint64_t rejoin_timeout_ms, uint64_t preempt_grace_ms)
{
	json_t *obj =
	    json_pack("{s:s,s:i}", "type", "welcome", "version", (int)version);

	if (obj && reform_timeout_ms &&
	    json_object_set_new(obj, "reform_timeout_ms",
				json_integer((json_int_t)reform_timeout_ms)) !=
		0) {
		json_decref(obj);
		obj = NULL;
	}
	if (obj && rejoin_timeout_ms &&
	    json_object_set_new(obj, "rejoin_timeout_ms",
				json_integer((json_int_t)rejoin_timeout_ms)) !=
		0) {
		json_decref(obj);
		obj = NULL;
	}
	if (obj && preempt_grace_ms &&
	    json_object_set_new(obj, "preempt_grace_ms",
				json_integer((json_int_t)preempt_grace_ms)) !=
		0) {
		json_decref(obj);
		obj = NULL;
	}
	return put(b, obj);
}

int control_write_preempt(struct buf *b, uint64_t step)
{
	return put(b, json_pack("{s:s,s:I}", "type", "preempt", "step",
				(json_int_t)step));
}

int control_write_abort(struct buf *b, uint64_t round, const char *reason)
{
	return put(b, json_pack("{s:s,s:I,s:s}", "type", "abort", "round",
				(json_int_t)round, "reason",
				reason ? reason : ""));
}

int control_write_membership(struct buf *b, const struct control_membership *m)
{
	return put(
	    b,
	    json_pack("{s:s,s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:i,s:i,"
		      "s:s}",
		      "type", "membership", "round", (json_int_t)m->round,
		      "rank", m->rank, "world_size", m->world_size,
		      "local_rank", m->local_rank, "local_world_size",
		      m->local_world_size, "node_rank", m->node_rank, "nnodes",
		      m->nnodes, "master_addr",
		      m->master_addr ? m->master_addr : "", "master_port",
		      (int)m->master_port, "restart_count", m->restart_count,
		      "store_prefix", m->store_prefix ? m->store_prefix : ""));
}

int control_write_dump(struct buf *b, const char *id, const char *path)
{
	return put(b, json_pack("{s:s,s:s,s:s}", "type", "dump", "id",
				id ? id : "", "path", path ? path : ""));
}
