/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opt.c - the command-line engine (see dlaunch/opt.h): one table per
 * binary drives the environment, the command line, validation and --help.
 */
#include "dlaunch/opt.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/parse.h"
#include "opt_doc.h"

#define HELP_WIDTH  79
#define HELP_INDENT 6

static void *field(const struct opt_spec *s, void *base)
{
	return (char *)base + s->offset;
}

static const void *cfield(const struct opt_spec *s, const void *base)
{
	return (const char *)base + s->offset;
}

static void store_uint(const struct opt_spec *s, void *base, uint64_t v)
{
	void *p = field(s, base);
	if (s->size == sizeof(uint16_t))
		*(uint16_t *)p = (uint16_t)v;
	else if (s->size == sizeof(uint32_t))
		*(uint32_t *)p = (uint32_t)v;
	else
		*(uint64_t *)p = v;
}

static uint64_t load_uint(const struct opt_spec *s, const void *base)
{
	const void *p = cfield(s, base);
	if (s->size == sizeof(uint16_t))
		return *(const uint16_t *)p;
	if (s->size == sizeof(uint32_t))
		return *(const uint32_t *)p;
	return *(const uint64_t *)p;
}

int opt_takes_value(const struct opt_spec *s)
{
	if (s->type == OPT_FLAG)
		return 0;
	return !(s->flags & OPT_NO_VALUE);
}

void opt_format_duration(uint64_t ms, char *out, size_t size)
{
	if (ms == 0)
		snprintf(out, size, "0");
	else if (ms % 3600000 == 0)
		snprintf(out, size, "%" PRIu64 "h", ms / 3600000);
	else if (ms % 1000 == 0)
		snprintf(out, size, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(out, size, "%" PRIu64 "ms", ms);
}

void opt_format_size(uint64_t bytes, char *out, size_t size)
{
	static const char *const units[] = {"GiB", "MiB", "KiB"};
	for (int i = 0; i < 3; i++) {
		uint64_t unit = 1ULL << (10 * (3 - i));
		if (bytes >= unit && bytes % unit == 0) {
			snprintf(out, size, "%" PRIu64 "%s", bytes / unit,
				 units[i]);
			return;
		}
	}
	snprintf(out, size, "%" PRIu64, bytes);
}

static int bad_number(const struct opt_spec *s, const char *v, char *err,
		      size_t es)
{
	char lo[32], hi[32];
	switch (s->type) {
	case OPT_DOUBLE:
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' is not a number in %g..%g", s->name,
				 v, s->dmin, s->dmax);
	case OPT_DURATION:
		opt_format_duration(s->min, lo, sizeof(lo));
		opt_format_duration(s->max, hi, sizeof(hi));
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' is not a duration in %s..%s "
				 "(seconds, or with a unit such as 500ms)",
				 s->name, v, lo, hi);
	case OPT_SIZE:
		opt_format_size(s->min, lo, sizeof(lo));
		opt_format_size(s->max, hi, sizeof(hi));
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' is not a size in %s..%s", s->name,
				 v, lo, hi);
	default:
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' is not a whole number in "
				 "%" PRIu64 "..%" PRIu64,
				 s->name, v, s->min, s->max);
	}
}

static int set_choice(const struct opt_spec *s, void *base, const char *v,
		      char *err, size_t es)
{
	char list[256] = "";
	size_t n = 0, k = 0;
	for (n = 0; s->choices[n]; n++)
		if (strcmp(v, s->choices[n]) == 0) {
			*(int *)field(s, base) = (int)n;
			return 0;
		}
	for (size_t i = 0; i < n && k < sizeof(list); i++)
		k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s",
				      i == 0	   ? ""
				      : i == n - 1 ? " or "
						   : ", ",
				      s->choices[i]);
	return dl_errorf(err, es, DL_EINVAL, "--%s '%s' is not %s", s->name, v,
			 list);
}

static int set_string(const struct opt_spec *s, void *base, const char *v,
		      char *err, size_t es)
{
	size_t n = strlen(v);
	if ((s->flags & OPT_EMPTY_UNSET) && n == 0) {
		*(const char **)field(s, base) = NULL;
		return 0;
	}
	if (s->type == OPT_NAME && !parse_name_valid(v, s->max))
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s '%s' must be 1-%" PRIu64
				 " of " PARSE_NAME_RULE,
				 s->name, v, s->max);
	if (s->type == OPT_STRING && (n < s->min || (s->max && n > s->max)))
		return dl_errorf(err, es, DL_EINVAL,
				 "--%s must be %" PRIu64 "-%" PRIu64 " bytes",
				 s->name, s->min, s->max);
	*(const char **)field(s, base) = v;
	return 0;
}

int opt_set(const struct opt_spec *s, void *base, const char *v, char *err,
	    size_t es)
{
	uint64_t u;
	int i;
	double d;

	switch (s->type) {
	case OPT_FLAG: *(int *)field(s, base) = 1; return 0;
	case OPT_INT:
		if (parse_int(v, (int)s->min, (int)s->max, &i) != 0)
			return bad_number(s, v, err, es);
		*(int *)field(s, base) = i;
		return 0;
	case OPT_UINT:
		if (parse_u64(v, s->min, s->max, &u) != 0)
			return bad_number(s, v, err, es);
		store_uint(s, base, u);
		return 0;
	case OPT_DOUBLE:
		if (parse_double(v, s->dmin, s->dmax, &d) != 0)
			return bad_number(s, v, err, es);
		*(double *)field(s, base) = d;
		return 0;
	case OPT_DURATION:
		if (parse_duration_ms(v, 1000, s->min, s->max, &u) != 0)
			return bad_number(s, v, err, es);
		*(uint64_t *)field(s, base) = u;
		return 0;
	case OPT_SIZE:
		if (parse_size_bytes(v, s->min, s->max, &u) != 0)
			return bad_number(s, v, err, es);
		store_uint(s, base, u);
		return 0;
	case OPT_STRING:
	case OPT_NAME: return set_string(s, base, v, err, es);
	case OPT_CHOICE: return set_choice(s, base, v, err, es);
	case OPT_CALLBACK: return s->set(s, base, v, err, es);
	case OPT_REFUSED:
	case OPT_END: break;
	}
	return dl_errorf(err, es, DL_EINVAL, "option --%s is not supported",
			 s->name);
}

/* same_name compares a given long name (len bytes) with a table name,
 * taking '_' for '-'; with prefix, given may be the start of name. */
static int same_name(const char *given, size_t len, const char *name,
		     int prefix)
{
	size_t i, n = strlen(name);
	if (len > n || (!prefix && len != n))
		return 0;
	for (i = 0; i < len; i++)
		if ((given[i] == '_' ? '-' : given[i]) != name[i])
			return 0;
	return 1;
}

/* find_long finds a long name (len bytes of name) in t: exact, or with
 * OPT_ABBREV a unique prefix. Returns 0, DL_ENOTFOUND or DL_EINVAL
 * (ambiguous) with a message. */
static int find_long(const struct opt_table *t, const char *name, size_t len,
		     const struct opt_spec **out, char *err, size_t es)
{
	const struct opt_spec *s;
	int hits = 0;
	for (s = t->specs; s->name; s++)
		if (same_name(name, len, s->name, 0)) {
			*out = s;
			return 0;
		}
	for (s = t->specs; (t->flags & OPT_ABBREV) && len && s->name; s++)
		if (same_name(name, len, s->name, 1) && hits++ == 0)
			*out = s;
	if (hits == 1)
		return 0;
	if (hits > 1)
		return dl_errorf(err, es, DL_EINVAL,
				 "option '--%.*s' is ambiguous (%s --help "
				 "lists the options)",
				 (int)len, name, t->prog);
	return dl_errorf(err, es, DL_ENOTFOUND,
			 "unknown option '--%.*s' (%s --help lists the "
			 "options)",
			 (int)len, name, t->prog);
}

static int refused(const struct opt_table *t, const struct opt_spec *s,
		   char *err, size_t es)
{
	return dl_errorf(err, es, DL_EINVAL,
			 "option --%s is not supported by %s", s->name,
			 t->prog);
}

/* from_env applies every option's variable; a false boolean asks for
 * nothing, and a refused option is refused from its variable too. */
static int from_env(const struct opt_table *t, void *base, char **envp,
		    char *err, size_t es)
{
	for (const struct opt_spec *s = t->specs; s->name; s++) {
		const char *v = NULL;
		size_t n = s->env ? strlen(s->env) : 0;
		int on = 1, rc;
		char inner[512];
		for (char **e = envp; n && e && *e && !v; e++)
			if (strncmp(*e, s->env, n) == 0 && (*e)[n] == '=')
				v = *e + n + 1;
		if (!v)
			continue;
		if (!opt_takes_value(s) && parse_bool(v, &on) != 0)
			return dl_errorf(err, es, DL_EINVAL,
					 "%s='%s' is not true or false", s->env,
					 v);
		if (!on)
			continue;
		rc = s->type == OPT_REFUSED
			 ? refused(t, s, inner, sizeof(inner))
			 : opt_set(s, base, opt_takes_value(s) ? v : NULL,
				   inner, sizeof(inner));
		if (rc)
			return dl_errorf(err, es, rc, "%s (from %s)", inner,
					 s->env);
	}
	return 0;
}

/* one_arg parses argv[*k] (and its value) into base; *stop is set after
 * an OPT_STOP option. */
static int one_arg(const struct opt_table *t, void *base, int argc, char **argv,
		   int *k, int *stop, char *err, size_t es)
{
	const char *arg = argv[*k], *val = NULL;
	const struct opt_spec *s = NULL;

	if (arg[1] != '-') { /* -m, -r VALUE, -rVALUE, -h */
		for (s = t->specs; s->name && s->short_name != arg[1]; s++)
			;
		if (!s->name)
			return dl_errorf(err, es, DL_ENOTFOUND,
					 "unknown option '%s' (%s --help "
					 "lists the options)",
					 arg, t->prog);
		if (arg[2] && !opt_takes_value(s))
			return dl_errorf(err, es, DL_EINVAL,
					 "option -%c takes no value", arg[1]);
		if (arg[2])
			val = arg + 2;
	} else {
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		int rc = find_long(t, name, len, &s, err, es);
		if (rc)
			return rc;
		if (eq && !opt_takes_value(s))
			return dl_errorf(err, es, DL_EINVAL,
					 "option --%s takes no value", s->name);
		if (eq)
			val = eq + 1;
	}
	if (s->type == OPT_REFUSED)
		return refused(t, s, err, es);
	if (opt_takes_value(s) && !val) {
		if (*k + 1 >= argc)
			return dl_errorf(err, es, DL_EINVAL,
					 "option --%s needs a value (%s)",
					 s->name, s->metavar ? s->metavar : "");
		val = argv[++*k];
	}
	*stop = (s->flags & OPT_STOP) != 0;
	return opt_set(s, base, val, err, es);
}

int opt_parse(const struct opt_table *t, void *base, int argc, char **argv,
	      char **envp, int *next, char *err, size_t es)
{
	int k, rc, stop = 0;

	rc = from_env(t, base, envp, err, es);
	for (k = 1; rc == 0 && !stop && k < argc; k++) {
		if (strcmp(argv[k], "--") == 0) {
			k++;
			break;
		}
		if (argv[k][0] != '-' || argv[k][1] == '\0')
			break;
		rc = one_arg(t, base, argc, argv, &k, &stop, err, es);
	}
	*next = k;
	return rc;
}

void opt_format_default(const struct opt_spec *s, const void *base, char *out,
			size_t size)
{
	const void *p = cfield(s, base);
	int zero = 0;
	out[0] = '\0';
	switch (s->type) {
	case OPT_INT: zero = *(const int *)p == 0; break;
	case OPT_UINT:
	case OPT_SIZE: zero = load_uint(s, base) == 0; break;
	case OPT_DOUBLE: zero = *(const double *)p == 0; break;
	case OPT_DURATION: zero = *(const uint64_t *)p == 0; break;
	case OPT_STRING:
	case OPT_NAME: zero = *(const char *const *)p == NULL; break;
	case OPT_CHOICE:
		snprintf(out, size, "%s", s->choices[*(const int *)p]);
		return;
	case OPT_CALLBACK:
		if (s->format)
			s->format(s, base, out, size);
		zero = out[0] == '\0';
		break;
	default: return; /* flags and refused options have no default */
	}
	if (zero && s->unset) {
		snprintf(out, size, "%s", s->unset);
		return;
	}
	switch (s->type) {
	case OPT_INT: snprintf(out, size, "%d", *(const int *)p); break;
	case OPT_UINT:
		snprintf(out, size, "%" PRIu64, load_uint(s, base));
		break;
	case OPT_SIZE: opt_format_size(load_uint(s, base), out, size); break;
	case OPT_DOUBLE: snprintf(out, size, "%g", *(const double *)p); break;
	case OPT_DURATION:
		opt_format_duration(*(const uint64_t *)p, out, size);
		break;
	case OPT_STRING:
	case OPT_NAME:
		if (!zero)
			snprintf(out, size, "%s", *(const char *const *)p);
		break;
	default: break;
	}
}

/* wrap prints text from column HELP_INDENT, breaking lines between words
 * before HELP_WIDTH. */
static void wrap(FILE *fp, const char *text)
{
	size_t col = HELP_INDENT;
	fprintf(fp, "%*s", HELP_INDENT, "");
	while (*text) {
		size_t w = strcspn(text, " ");
		if (col > HELP_INDENT && col + 1 + w > HELP_WIDTH) {
			fprintf(fp, "\n%*s", HELP_INDENT, "");
			col = HELP_INDENT;
		} else if (col > HELP_INDENT) {
			fputc(' ', fp);
			col++;
		}
		fprintf(fp, "%.*s", (int)w, text);
		col += w;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', fp);
}

/* usage_text writes the --help text. */
static void usage_text(const struct opt_table *t, const void *defaults,
		       FILE *fp)
{
	const struct opt_spec *s;
	char def[256], help[1024];
	int n_refused = 0;

	fputs(t->usage, fp);
	for (s = t->specs; s->name; s++) {
		if (s->type == OPT_REFUSED) {
			n_refused++;
			continue;
		}
		fprintf(fp, "  ");
		if (s->short_name)
			fprintf(fp, "-%c, ", s->short_name);
		fprintf(fp, "--%s%s%s\n", s->name, s->metavar ? " " : "",
			s->metavar ? s->metavar : "");
		opt_format_default(s, defaults, def, sizeof(def));
		snprintf(help, sizeof(help), "%s%s%s%s", s->help,
			 def[0] ? " (default: " : "", def, def[0] ? ")" : "");
		wrap(fp, help);
	}
	if (n_refused) {
		fprintf(fp, "\nNot supported (refused):");
		for (s = t->specs; s->name; s++)
			if (s->type == OPT_REFUSED)
				fprintf(fp, " --%s%s", s->name,
					--n_refused ? "," : ".\n");
	}
	if (t->footer)
		fprintf(fp, "\n%s", t->footer);
}

enum opt_help_format opt_help_format_env(void)
{
	const char *f = getenv("DLAUNCH_HELP_FORMAT");
	if (f && strcmp(f, "man") == 0)
		return OPT_HELP_MAN;
	if (f && strcmp(f, "completion") == 0)
		return OPT_HELP_COMPLETION;
	return OPT_HELP_TEXT;
}

void opt_usage_format(const struct opt_table *t, const void *defaults,
		      enum opt_help_format f, FILE *fp)
{
	switch (f) {
	case OPT_HELP_MAN: opt_doc_man(t, defaults, fp); break;
	case OPT_HELP_COMPLETION: opt_doc_completion(t, fp); break;
	case OPT_HELP_TEXT: usage_text(t, defaults, fp); break;
	}
}

void opt_usage(const struct opt_table *t, const void *defaults, FILE *fp)
{
	opt_usage_format(t, defaults, opt_help_format_env(), fp);
}

/* check_one parses the shown default of s onto copy (a copy of defaults)
 * and says whether the value is the same. */
static int check_one(const struct opt_spec *s, const void *defaults, void *copy,
		     size_t base_size, const char *text)
{
	char err[512];
	if (opt_set(s, copy, text, err, sizeof(err)) != 0)
		return 0;
	if (s->type == OPT_STRING || s->type == OPT_NAME) {
		const char *a = *(const char *const *)cfield(s, defaults);
		const char *b = *(const char *const *)cfield(s, copy);
		int same = a && b && strcmp(a, b) == 0;
		memcpy(field(s, copy), cfield(s, defaults), sizeof(char *));
		return same;
	}
	return memcmp(defaults, copy, base_size) == 0;
}

/* check_choices: every word s offers parses (onto copy, which is reset to
 * defaults after each). */
static int check_choices(const struct opt_table *t, const struct opt_spec *s,
			 const void *defaults, void *copy, size_t base_size,
			 char *err, size_t es)
{
	char msg[512];
	for (size_t i = 0; s->choices && s->choices[i]; i++) {
		int rc = opt_set(s, copy, s->choices[i], msg, sizeof(msg));
		memcpy(copy, defaults, base_size);
		if (rc)
			return dl_errorf(err, es, DL_ECONFLICT,
					 "%s --%s: the word '%s' it offers is "
					 "refused: %s",
					 t->prog, s->name, s->choices[i], msg);
	}
	return 0;
}

int opt_check_defaults(const struct opt_table *t, const void *defaults,
		       size_t base_size, char *err, size_t es)
{
	char text[256];
	void *copy = malloc(base_size);
	int rc = 0;

	if (!copy)
		return dl_errorf(err, es, DL_ENOMEM, "out of memory");
	memcpy(copy, defaults, base_size);
	for (const struct opt_spec *s = t->specs; s->name && rc == 0; s++) {
		rc = check_choices(t, s, defaults, copy, base_size, err, es);
		if (rc)
			break;
		opt_format_default(s, defaults, text, sizeof(text));
		if (!text[0] || (s->unset && strcmp(text, s->unset) == 0))
			continue;
		if (!check_one(s, defaults, copy, base_size, text))
			rc = dl_errorf(err, es, DL_ECONFLICT,
				       "%s --%s: the default shown, '%s', is "
				       "not the value used",
				       t->prog, s->name, text);
	}
	free(copy);
	return rc;
}
