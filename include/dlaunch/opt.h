/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opt.h - the one command-line engine of every dlaunch binary.
 *
 * A binary describes its options once, as a table of struct opt_spec: the
 * long name (dashed; '_' is accepted for '-', as torchrun does), a short
 * name, the type and the field of the binary's options struct it fills, an
 * environment variable read before the command line, a metavar and one help
 * line. Parsing, the environment, validation and --help all come from that
 * table, so they cannot drift apart.
 *
 * Defaults are not written in the table: the binary initialises its
 * options struct (agent_config_init, rdzv_server_config_init, ...) and
 * --help prints each default by formatting that initialised value, so what
 * --help shows is what an empty command line gets. opt_check_defaults
 * proves that every shown default parses back to the value it describes.
 *
 * The same table also writes the OPTIONS of the man pages and the data of
 * the shell completion (opt_usage_format), so those cannot drift from
 * --help either: the build runs each binary's --help with
 * DLAUNCH_HELP_FORMAT=man or =completion (man/man.mk).
 *
 * libc only: the trainer links this without jansson, libevent or libcurl.
 */
#ifndef DLAUNCH_OPT_H
#define DLAUNCH_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_type {
	OPT_END = 0,  /* ends a table (name NULL) */
	OPT_FLAG,     /* int set to 1; from the environment a boolean */
	OPT_INT,      /* int in [min, max] (min >= 0) */
	OPT_UINT,     /* unsigned integer of .size bytes (2, 4 or 8) */
	OPT_DOUBLE,   /* double in [dmin, dmax] */
	OPT_DURATION, /* uint64_t ms; a bare number is seconds; "500ms" */
	OPT_SIZE,     /* unsigned of .size bytes; "64KiB", "1G" */
	OPT_STRING,   /* const char *, borrowed from argv or the environment */
	OPT_NAME,     /* const char *: a job or node name (parse_name_valid) */
	OPT_CHOICE,   /* int: the index of the value in .choices */
	OPT_CALLBACK, /* .set parses the value, .format shows the default */
	OPT_REFUSED,  /* known (torchrun has it) but refused by name */
};

/* opt_spec.flags */
#define OPT_STOP	0x1 /* parsing ends after it (--help) */
#define OPT_EMPTY_UNSET 0x2 /* a string given as "" leaves the field NULL */
#define OPT_NO_VALUE	0x4 /* an OPT_CALLBACK or OPT_REFUSED without value */

struct opt_spec;

/* opt_set_fn parses value into the options struct at base. Returns 0 or a
 * DL_E* code with a message naming the option in err. value is NULL for an
 * OPT_NO_VALUE callback. */
typedef int (*opt_set_fn)(const struct opt_spec *s, void *base,
			  const char *value, char *err, size_t err_size);
/* opt_format_fn writes the current value at base as the option's text
 * (what --help shows as the default); "" for none. */
typedef void (*opt_format_fn)(const struct opt_spec *s, const void *base,
			      char *out, size_t size);

struct opt_spec {
	const char *name; /* long name, dashed; NULL ends the table */
	char short_name;  /* 0: none */
	enum opt_type type;
	unsigned flags;	   /* OPT_STOP, OPT_EMPTY_UNSET, OPT_NO_VALUE */
	size_t offset;	   /* the field in the options struct */
	size_t size;	   /* its size (OPT_UINT, OPT_SIZE) */
	uint64_t min, max; /* OPT_INT, OPT_UINT, OPT_DURATION (ms), OPT_SIZE,
			      and string lengths (OPT_STRING, OPT_NAME) */
	double dmin, dmax; /* OPT_DOUBLE */
	/* NULL-terminated words. OPT_CHOICE: the values. Any other type:
	 * the words it takes (all or some of its values), which completion
	 * offers; opt_check_defaults proves each one is accepted. */
	const char *const *choices;
	opt_set_fn set;	      /* OPT_CALLBACK */
	opt_format_fn format; /* OPT_CALLBACK (NULL: no default) */
	const char *env;      /* variable read before argv, or NULL */
	const char *metavar;  /* the value in --help; NULL: FLAG */
	/* shown as the default when the field is NULL or 0 (e.g. "0: off",
	 * "a temporary directory"); NULL: a 0 is shown as 0, NULL as none */
	const char *unset;
	const char *help; /* one line; may be long, --help wraps it */
};

/* Entry builders: T is the options struct, F the field (a member path such
 * as cfg.max_restarts is fine). The rest of an entry is given with
 * designated initializers after the builder. */
#define OPT_FIELD(T, F) .offset = offsetof(T, F), .size = sizeof(((T *)0)->F)

/* opt_table.flags */
#define OPT_ABBREV 0x1 /* a unique prefix of a long name selects it */

struct opt_table {
	const char *prog;   /* in messages: "dlaunch", "dlaunch status" */
	const char *usage;  /* --help text before the options */
	const char *footer; /* --help text after them, or NULL */
	const struct opt_spec *specs; /* ended by an entry whose name is NULL */
	unsigned flags;		      /* OPT_ABBREV */
};

/*
 * opt_parse reads the table's environment variables from envp (NULL: none)
 * and then argv[1..] into base (already holding the defaults). It stops at
 * the first argument that is not an option, after "--", or after an
 * OPT_STOP option, and sets *next to the index of the first argument left.
 * Returns 0; DL_ENOTFOUND for an unknown option; DL_EINVAL for a bad or
 * missing value or a refused option. err names the option (and the
 * variable when the value came from the environment).
 */
int opt_parse(const struct opt_table *t, void *base, int argc, char **argv,
	      char **envp, int *next, char *err, size_t err_size);

/* opt_set applies one value to one option, as opt_parse does (value NULL
 * for a flag). */
int opt_set(const struct opt_spec *s, void *base, const char *value, char *err,
	    size_t err_size);

/* opt_format_default writes the default --help shows for s, given base
 * holding the defaults: the .unset text, the formatted value, or "" when
 * there is none to show. */
void opt_format_default(const struct opt_spec *s, const void *base, char *out,
			size_t size);

/* What opt_usage_format writes. */
enum opt_help_format {
	OPT_HELP_TEXT = 0,   /* --help */
	OPT_HELP_MAN,	     /* roff (man(7)): each option as a .TP entry,
				with its default and variable, then the
				refused ones; escaped, no headings */
	OPT_HELP_COMPLETION, /* one line an option (refused ones left out):
				"--name -s KIND WORD...", "-" for no short
				name; KIND is flag (takes no value), word
				(its .choices follow), file, dir (metavar
				FILE or PATH, DIR) or value (anything else) */
};

/* opt_usage prints t's --help to fp: usage, every option with its help line
 * and its default (from defaults, the initialised options struct), the
 * options refused by name, the footer. With DLAUNCH_HELP_FORMAT=man or
 * =completion in the environment it writes that format instead
 * (opt_help_format_env), which is how the build gets them from every
 * binary's own table and defaults. */
void opt_usage(const struct opt_table *t, const void *defaults, FILE *fp);

/* opt_help_format_env: the format $DLAUNCH_HELP_FORMAT names ("man",
 * "completion"); OPT_HELP_TEXT when it is unset or anything else. */
enum opt_help_format opt_help_format_env(void);

/* opt_usage_format writes t in format f (the text is opt_usage's). */
void opt_usage_format(const struct opt_table *t, const void *defaults,
		      enum opt_help_format f, FILE *fp);

/* opt_takes_value: whether s reads a value (a flag or an OPT_NO_VALUE
 * option does not). */
int opt_takes_value(const struct opt_spec *s);

/*
 * opt_check_defaults proves --help tells the truth: for every option with
 * a formatted default (not an .unset text) it parses that text onto a copy
 * of defaults (base_size bytes) and checks the copy is unchanged; and every
 * word of an option's .choices (what completion offers) must parse. Returns
 * 0, or DL_ECONFLICT naming the first option whose shown default differs or
 * whose offered word is refused.
 */
int opt_check_defaults(const struct opt_table *t, const void *defaults,
		       size_t base_size, char *err, size_t err_size);

/* opt_format_duration writes ms as "30s", "500ms" or "0"; opt_format_size
 * writes bytes as "64KiB", "1GiB" or "100". */
void opt_format_duration(uint64_t ms, char *out, size_t size);
void opt_format_size(uint64_t bytes, char *out, size_t size);

#endif
