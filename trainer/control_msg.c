/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control_msg.c - the messages of the worker control channel, read and
 * written by dlaunch-train without a JSON library (DESIGN.md: the trainer
 * links libc, libdlcommon, BLAS and CUDA only).
 *
 * The reader is strict about syntax (RFC 8259: one object, no trailing
 * bytes but whitespace, no control characters in strings, valid escapes)
 * and about the members it knows (type and range), and lenient only where
 * the protocol asks: unknown members and unknown types are skipped. It
 * works on a length-delimited buffer and never reads past it.
 *
 * It is not common/jsonflat.c on purpose, though both read one JSON
 * object without allocating: jsonflat reads only the plainest documents
 * (strings without escapes, small integers, nothing nested) and refuses
 * the rest to a jansson fallback; the trainer has no jansson to fall back
 * on, so this reader takes every valid line the agent may send (escapes
 * and UTF-8 in a reason, nested or unknown members to skip) and says why
 * it refuses one.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "dlaunch/error.h"

#define MAX_DEPTH 16

struct cursor {
	const char *p, *end;
	char *err;
	size_t err_size;
};

static int fail(struct cursor *c, int rc, const char *what)
{
	(void)dl_errorf(c->err, c->err_size, 0, "%s", what);
	return rc;
}

static void skip_ws(struct cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' ||
				 *c->p == '\n' || *c->p == '\r'))
		c->p++;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int read_hex4(struct cursor *c, unsigned *out)
{
	unsigned v = 0;

	if (c->end - c->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = hexval(c->p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | (unsigned)h;
	}
	c->p += 4;
	*out = v;
	return 0;
}

/* put: appends one byte to out (NULL: only validating); *n counts them.
 * A full out is an error, or (cut) the rest is dropped, never splitting
 * a UTF-8 sequence: a cut string stays valid UTF-8. */
static int put(char *out, size_t size, size_t *n, unsigned char b, int cut,
	       int *full)
{
	if (out != NULL && !*full) {
		if (*n + 1 >= size) {
			if (!cut)
				return -1;
			*full = 1;
			while (*n > 0 &&
			       ((unsigned char)out[*n - 1] & 0xc0) == 0x80)
				(*n)--; /* continuation bytes */
			if (*n > 0 && ((unsigned char)out[*n - 1] & 0x80))
				(*n)--; /* their lead byte */
			return 0;
		}
		out[(*n)++] = (char)b;
	}
	return 0;
}

/* parse_string: a JSON string at c->p (the opening quote) decoded as
 * UTF-8 into out (size bytes, NUL-terminated; NULL: skip); a value too
 * long is an error, or cut to fit when cut is set. \u0000 is refused
 * when stored (the value is a C string). */
static int parse_string_cut(struct cursor *c, char *out, size_t size, int cut)
{
	size_t n = 0;
	int full = 0;

	if (c->p >= c->end || *c->p != '"')
		return fail(c, DL_EINVAL, "expected a string");
	c->p++;
	for (;;) {
		unsigned char ch;

		if (c->p >= c->end)
			return fail(c, DL_EINVAL, "unterminated string");
		ch = (unsigned char)*c->p++;
		if (ch == '"')
			break;
		if (ch < 0x20)
			return fail(c, DL_EINVAL,
				    "control character in a string");
		if (ch != '\\') {
			if (put(out, size, &n, ch, cut, &full) != 0)
				return fail(c, DL_ELIMIT, "string too long");
			continue;
		}
		if (c->p >= c->end)
			return fail(c, DL_EINVAL, "unterminated escape");
		ch = (unsigned char)*c->p++;
		unsigned cp;
		switch (ch) {
		case '"':
		case '\\':
		case '/': cp = ch; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			if (read_hex4(c, &cp) != 0)
				return fail(c, DL_EINVAL, "bad \\u escape");
			if (cp >= 0xd800 && cp < 0xdc00) {
				unsigned lo;
				if (c->end - c->p < 2 || c->p[0] != '\\' ||
				    c->p[1] != 'u')
					return fail(c, DL_EINVAL,
						    "lone surrogate");
				c->p += 2;
				if (read_hex4(c, &lo) != 0 || lo < 0xdc00 ||
				    lo > 0xdfff)
					return fail(c, DL_EINVAL,
						    "bad surrogate pair");
				cp = 0x10000 + ((cp - 0xd800) << 10) +
				     (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				return fail(c, DL_EINVAL, "lone surrogate");
			}
			if (cp == 0 && out != NULL)
				return fail(c, DL_EINVAL,
					    "\\u0000 in a string");
			break;
		default: return fail(c, DL_EINVAL, "bad escape");
		}
		unsigned char b[4];
		int k;
		if (cp < 0x80) {
			b[0] = (unsigned char)cp;
			k = 1;
		} else if (cp < 0x800) {
			b[0] = (unsigned char)(0xc0 | cp >> 6);
			b[1] = (unsigned char)(0x80 | (cp & 0x3f));
			k = 2;
		} else if (cp < 0x10000) {
			b[0] = (unsigned char)(0xe0 | cp >> 12);
			b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
			b[2] = (unsigned char)(0x80 | (cp & 0x3f));
			k = 3;
		} else {
			b[0] = (unsigned char)(0xf0 | cp >> 18);
			b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
			b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
			b[3] = (unsigned char)(0x80 | (cp & 0x3f));
			k = 4;
		}
		for (int i = 0; i < k; i++)
			if (put(out, size, &n, b[i], cut, &full) != 0)
				return fail(c, DL_ELIMIT, "string too long");
	}
	if (out != NULL)
		out[n] = '\0';
	return 0;
}

static int parse_string(struct cursor *c, char *out, size_t size)
{
	return parse_string_cut(c, out, size, 0);
}

/* parse_number: a JSON number; when it is a non-negative integer that
 * fits, *is_uint is 1 and its value in *v. */
static int parse_number(struct cursor *c, int *is_uint, uint64_t *v)
{
	int neg = 0, frac = 0, overflow = 0;
	uint64_t acc = 0;

	if (c->p < c->end && *c->p == '-') {
		neg = 1;
		c->p++;
	}
	if (c->p >= c->end || *c->p < '0' || *c->p > '9')
		return fail(c, DL_EINVAL, "bad number");
	if (*c->p == '0') {
		c->p++;
	} else {
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
			unsigned d = (unsigned)(*c->p++ - '0');
			if (acc > (UINT64_MAX - d) / 10)
				overflow = 1;
			else
				acc = acc * 10 + d;
		}
	}
	if (c->p < c->end && *c->p == '.') {
		frac = 1;
		c->p++;
		if (c->p >= c->end || *c->p < '0' || *c->p > '9')
			return fail(c, DL_EINVAL, "bad number");
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
			c->p++;
	}
	if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
		frac = 1;
		c->p++;
		if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
			c->p++;
		if (c->p >= c->end || *c->p < '0' || *c->p > '9')
			return fail(c, DL_EINVAL, "bad number");
		while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
			c->p++;
	}
	*is_uint = !neg && !frac && !overflow;
	*v = acc;
	return 0;
}

static int skip_literal(struct cursor *c, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
		return fail(c, DL_EINVAL, "bad literal");
	c->p += n;
	return 0;
}

/* skip_value: any JSON value, checked and discarded */
static int skip_value(struct cursor *c, int depth)
{
	int is_uint, rc;
	uint64_t v;

	skip_ws(c);
	if (c->p >= c->end)
		return fail(c, DL_EINVAL, "expected a value");
	if (depth > MAX_DEPTH)
		return fail(c, DL_ELIMIT, "nested too deep");
	switch (*c->p) {
	case '"': return parse_string(c, NULL, 0);
	case 't': return skip_literal(c, "true");
	case 'f': return skip_literal(c, "false");
	case 'n': return skip_literal(c, "null");
	case '[':
	case '{': {
		char close = *c->p == '[' ? ']' : '}';
		int object = close == '}';
		c->p++;
		skip_ws(c);
		if (c->p < c->end && *c->p == close) {
			c->p++;
			return 0;
		}
		for (;;) {
			if (object) {
				skip_ws(c);
				rc = parse_string(c, NULL, 0);
				if (rc != 0)
					return rc;
				skip_ws(c);
				if (c->p >= c->end || *c->p != ':')
					return fail(c, DL_EINVAL,
						    "expected ':'");
				c->p++;
			}
			rc = skip_value(c, depth + 1);
			if (rc != 0)
				return rc;
			skip_ws(c);
			if (c->p < c->end && *c->p == ',') {
				c->p++;
				continue;
			}
			if (c->p < c->end && *c->p == close) {
				c->p++;
				return 0;
			}
			return fail(c, DL_EINVAL, "expected ',' or a close");
		}
	}
	default: return parse_number(c, &is_uint, &v);
	}
}

/* The members this worker knows, by message type: a table, so that what
 * each message must carry is written down once. */
enum member_kind { M_UINT, M_STRING };
struct member {
	const char *name;
	enum member_kind kind;
	uint64_t max;  /* M_UINT: the largest value allowed */
	size_t offset; /* in struct control_msg */
	size_t size;   /* M_UINT: 8, 4 or 2 bytes; M_STRING: buffer bytes */
	int required;
	int truncate; /* M_STRING: a longer value is cut, not refused */
};

#define MSG_U64(field, mx)                                                     \
	M_UINT, (mx), offsetof(struct control_msg, field), sizeof(uint64_t)
#define MSG_INT(field, mx)                                                     \
	M_UINT, (mx), offsetof(struct control_msg, field), sizeof(int)
#define MSG_STR(field)                                                         \
	M_STRING, 0, offsetof(struct control_msg, field),                      \
	    sizeof(((struct control_msg *)0)->field)

static const struct member welcome_members[] = {
    {"version", MSG_U64(version, UINT32_MAX), 1, 0},
    {"reform_timeout_ms", MSG_U64(reform_timeout_ms, UINT32_MAX), 0, 0},
    {"rejoin_timeout_ms", MSG_U64(rejoin_timeout_ms, UINT32_MAX), 0, 0},
    {"preempt_grace_ms", MSG_U64(preempt_grace_ms, UINT32_MAX), 0, 0},
    {NULL, M_UINT, 0, 0, 0, 0, 0},
};
static const struct member abort_members[] = {
    {"round", MSG_U64(round, INT64_MAX), 1, 0},
    {"reason", MSG_STR(reason), 0, 1},
    {NULL, M_UINT, 0, 0, 0, 0, 0},
};
static const struct member membership_members[] = {
    {"round", MSG_U64(round, INT64_MAX), 1, 0},
    {"rank", MSG_INT(m.rank, 65535), 1, 0},
    {"world_size", MSG_INT(m.world_size, 65536), 1, 0},
    {"local_rank", MSG_INT(m.local_rank, 65535), 1, 0},
    {"local_world_size", MSG_INT(m.local_world_size, 65536), 1, 0},
    {"node_rank", MSG_INT(m.node_rank, 65535), 1, 0},
    {"nnodes", MSG_INT(m.nnodes, 65536), 1, 0},
    {"master_addr", MSG_STR(m.master_addr), 1, 0},
    {"master_port", M_UINT, 65535, offsetof(struct control_msg, m.master_port),
     sizeof(uint16_t), 1, 0},
    {"restart_count", MSG_INT(m.restart_count, INT32_MAX), 1, 0},
    {"store_prefix", MSG_STR(m.store_prefix), 1, 0},
    {NULL, M_UINT, 0, 0, 0, 0, 0},
};
static const struct member dump_members[] = {
    {"id", MSG_STR(dump_id), 1, 0},
    {"path", MSG_STR(dump_path), 1, 0},
    {NULL, M_UINT, 0, 0, 0, 0, 0},
};
static const struct member preempt_members[] = {
    {"step", MSG_U64(step, INT64_MAX), 1, 0},
    {NULL, M_UINT, 0, 0, 0, 0, 0},
};

static const struct {
	const char *name;
	enum control_type type;
	const struct member *members;
} types[] = {
    {"welcome", CONTROL_WELCOME, welcome_members},
    {"abort", CONTROL_ABORT, abort_members},
    {"membership", CONTROL_MEMBERSHIP, membership_members},
    {"preempt", CONTROL_PREEMPT, preempt_members},
    {"dump", CONTROL_DUMP, dump_members},
};

#define MAX_MEMBERS 16

/* store_member: the value at c->p into member m of out */
static int store_member(struct cursor *c, const struct member *m,
			struct control_msg *out)
{
	char *field = (char *)out + m->offset;
	int is_uint, rc;
	uint64_t v;

	if (m->kind == M_STRING) {
		if (c->p >= c->end || *c->p != '"')
			return fail(c, DL_EINVAL, "expected a string");
		/* a log text (truncate) keeps what fits */
		return parse_string_cut(c, field, m->size, m->truncate);
	}
	if (c->p >= c->end || (*c->p != '-' && (*c->p < '0' || *c->p > '9')))
		return fail(c, DL_EINVAL, "expected a number");
	rc = parse_number(c, &is_uint, &v);
	if (rc != 0)
		return rc;
	if (!is_uint || v > m->max)
		return fail(c, DL_EINVAL, "number out of range");
	if (m->size == sizeof(uint64_t))
		memcpy(field, &v, sizeof(v));
	else if (m->size == sizeof(int)) {
		int iv = (int)v;
		memcpy(field, &iv, sizeof(iv));
	} else {
		uint16_t sv = (uint16_t)v;
		memcpy(field, &sv, sizeof(sv));
	}
	return 0;
}

/* The object's members are read in one pass: "type" may come anywhere, so
 * each member's value is remembered by position and read once the type
 * is known. */
struct seen {
	const char *name_at; /* the key's opening quote */
	const char *value_at;
};

int control_parse(const char *line, size_t len, struct control_msg *out,
		  char *err, size_t err_size)
{
	struct cursor c = {line, line + len, err, err_size};
	struct seen seen[MAX_MEMBERS];
	const struct member *members = NULL;
	char type[32] = "", key[64];
	int n_seen = 0, have_type = 0, rc;

	memset(out, 0, sizeof(*out));
	if (len >= CONTROL_MAX_LINE_BYTES)
		return fail(&c, DL_ELIMIT, "line too long");
	skip_ws(&c);
	if (c.p >= c.end || *c.p != '{')
		return fail(&c, DL_EINVAL, "not a JSON object");
	c.p++;
	skip_ws(&c);
	if (c.p < c.end && *c.p == '}') {
		c.p++;
	} else {
		for (;;) {
			const char *name_at;
			skip_ws(&c);
			name_at = c.p;
			rc = parse_string(&c, key, sizeof(key));
			if (rc == DL_ELIMIT) {
				/* a long key is no member we know */
				c.p = name_at;
				rc = parse_string(&c, NULL, 0);
				key[0] = '\0';
			}
			if (rc != 0)
				return rc;
			skip_ws(&c);
			if (c.p >= c.end || *c.p != ':')
				return fail(&c, DL_EINVAL, "expected ':'");
			c.p++;
			skip_ws(&c);
			if (strcmp(key, "type") == 0) {
				if (have_type)
					return fail(&c, DL_EINVAL,
						    "duplicate member 'type'");
				if (c.p >= c.end || *c.p != '"')
					return fail(&c, DL_EINVAL,
						    "'type' is not a string");
				{
					const char *value_at = c.p;
					rc = parse_string(&c, type,
							  sizeof(type));
					if (rc == DL_ELIMIT) {
						/* no type we know is this
						 * long: an unknown one */
						c.p = value_at;
						rc = parse_string(&c, NULL, 0);
						type[0] = '\0';
					}
				}
				if (rc != 0)
					return rc;
				have_type = 1;
			} else {
				if (n_seen < MAX_MEMBERS && key[0])
					seen[n_seen++] =
					    (struct seen){name_at, c.p};
				rc = skip_value(&c, 1);
				if (rc != 0)
					return rc;
			}
			skip_ws(&c);
			if (c.p < c.end && *c.p == ',') {
				c.p++;
				continue;
			}
			if (c.p < c.end && *c.p == '}') {
				c.p++;
				break;
			}
			return fail(&c, DL_EINVAL, "expected ',' or '}'");
		}
	}
	skip_ws(&c);
	if (c.p != c.end)
		return fail(&c, DL_EINVAL, "bytes after the object");
	if (!have_type)
		return fail(&c, DL_EINVAL, "no member 'type'");
	out->type = CONTROL_UNKNOWN;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(type, types[i].name) == 0) {
			out->type = types[i].type;
			members = types[i].members;
		}
	if (members == NULL)
		return 0;
	for (const struct member *m = members; m->name; m++) {
		int found = 0;
		for (int i = 0; i < n_seen; i++) {
			struct cursor k = {seen[i].name_at, c.end, err,
					   err_size};
			if (parse_string(&k, key, sizeof(key)) != 0 ||
			    strcmp(key, m->name) != 0)
				continue;
			if (found)
				return dl_errorf(err, err_size, DL_EINVAL,
						 "duplicate member '%s'",
						 m->name);
			found = 1;
			k.p = seen[i].value_at;
			rc = store_member(&k, m, out);
			if (rc != 0)
				return dl_errorf(err, err_size, rc,
						 "%s: member '%s' is not valid",
						 type, m->name);
		}
		if (!found && m->required)
			return dl_errorf(err, err_size, DL_EINVAL,
					 "%s: member '%s' is missing", type,
					 m->name);
	}
	if (out->type == CONTROL_MEMBERSHIP) {
		const struct control_membership *mm = &out->m;
		if (mm->world_size < 1 || mm->rank >= mm->world_size ||
		    mm->local_world_size < 1 ||
		    mm->local_rank >= mm->local_world_size || mm->nnodes < 1 ||
		    mm->node_rank >= mm->nnodes || mm->master_port == 0 ||
		    mm->master_addr[0] == '\0')
			return dl_errorf(err, err_size, DL_EINVAL,
					 "membership: inconsistent members "
					 "(rank %d of %d, local rank %d of %d, "
					 "node %d of %d, port %u)",
					 mm->rank, mm->world_size,
					 mm->local_rank, mm->local_world_size,
					 mm->node_rank, mm->nnodes,
					 mm->master_port);
		out->m.round = out->round;
	}
	if (out->type == CONTROL_DUMP &&
	    (out->dump_id[0] == '\0' || out->dump_path[0] == '\0'))
		return dl_errorf(err, err_size, DL_EINVAL,
				 "dump: an empty id or path");
	return 0;
}

static int fmt(size_t size, int n)
{
	return n < 0 || (size_t)n >= size ? -1 : n;
}

int control_format_hello(char *buf, size_t size)
{
	return fmt(size, snprintf(buf, size,
				  "{\"type\":\"hello\",\"version\":%d,"
				  "\"handles\":[\"abort\",\"membership\","
				  "\"preempt\",\"dump\"]}\n",
				  CONTROL_VERSION));
}

int control_format_step(char *buf, size_t size, uint64_t step)
{
	return fmt(size,
		   snprintf(buf, size, "{\"type\":\"step\",\"step\":%llu}\n",
			    (unsigned long long)step));
}

/* format_round_step: {"type":TYPE,"round":R,"step":S} and a newline */
static int format_round_step(char *buf, size_t size, const char *type,
			     uint64_t round, uint64_t step)
{
	return fmt(size, snprintf(buf, size,
				  "{\"type\":\"%s\",\"round\":%llu,"
				  "\"step\":%llu}\n",
				  type, (unsigned long long)round,
				  (unsigned long long)step));
}

int control_format_aborted(char *buf, size_t size, uint64_t round,
			   uint64_t step)
{
	return format_round_step(buf, size, "aborted", round, step);
}

int control_format_reformed(char *buf, size_t size, uint64_t round,
			    uint64_t step)
{
	return format_round_step(buf, size, "reformed", round, step);
}
