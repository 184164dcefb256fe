/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_opt.c - the shared option engine (common/opt.c) on a table with
 * every type: both spellings, short options, values from the environment,
 * bounds, choices, names, refusals, abbreviations, --help and the check
 * that each default --help shows is the value used; the same table as a
 * man page's options and as completion data.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/error.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"

struct t_opts {
	int help, flag, count;
	uint16_t port;
	uint64_t big;
	double ratio;
	uint64_t wait_ms;
	size_t buf_bytes;
	const char *path;
	const char *job;
	int color;
	int pair_lo, pair_hi;
};

#define T(f) OPT_FIELD(struct t_opts, f)

static int set_pair(const struct opt_spec *s, void *base, const char *v,
		    char *err, size_t es)
{
	struct t_opts *o = base;
	(void)s;
	if (strlen(v) != 3 || v[1] != ':')
		return dl_errorf(err, es, DL_EINVAL, "--pair '%s' is not A:B",
				 v);
	o->pair_lo = v[0] - '0';
	o->pair_hi = v[2] - '0';
	return 0;
}

static void format_pair(const struct opt_spec *s, const void *base, char *out,
			size_t size)
{
	const struct t_opts *o = base;
	(void)s;
	snprintf(out, size, "%d:%d", o->pair_lo, o->pair_hi);
}

/* format_lie shows a default that is not the value (drift) */
static void format_lie(const struct opt_spec *s, const void *base, char *out,
		       size_t size)
{
	const struct t_opts *o = base;
	(void)s;
	snprintf(out, size, "%d:%d", o->pair_lo + 1, o->pair_hi);
}

static const char *const colors[] = {"red", "green", "blue", NULL};

static struct opt_spec specs[] = {
    {.name = "help",
     .short_name = 'h',
     .type = OPT_FLAG,
     .flags = OPT_STOP,
     T(help),
     .help = "show this help"},
    {.name = "flag-on",
     .short_name = 'f',
     .type = OPT_FLAG,
     T(flag),
     .env = "T_FLAG",
     .help = "a flag"},
    {.name = "count",
     .short_name = 'c',
     .type = OPT_INT,
     T(count),
     .min = 0,
     .max = 10,
     .env = "T_COUNT",
     .metavar = "N",
     .help = "a count"},
    {.name = "port",
     .type = OPT_UINT,
     T(port),
     .min = 1,
     .max = 65535,
     .metavar = "PORT",
     .help = "a port"},
    {.name = "big",
     .type = OPT_UINT,
     T(big),
     .max = UINT64_MAX,
     .metavar = "N",
     .unset = "none",
     .help = "a big number"},
    {.name = "ratio",
     .type = OPT_DOUBLE,
     T(ratio),
     .dmax = 1,
     .metavar = "X",
     .help = "a ratio"},
    {.name = "wait",
     .type = OPT_DURATION,
     T(wait_ms),
     .min = 10,
     .max = 3600000,
     .metavar = "DURATION",
     .help = "a wait"},
    {.name = "buf-size",
     .type = OPT_SIZE,
     T(buf_bytes),
     .min = 1024,
     .max = 1 << 20,
     .metavar = "SIZE",
     .help = "a buffer"},
    {.name = "path",
     .type = OPT_STRING,
     .flags = OPT_EMPTY_UNSET,
     T(path),
     .max = 8,
     .metavar = "PATH",
     .unset = "somewhere",
     .help = "a path"},
    {.name = "job",
     .type = OPT_NAME,
     T(job),
     .max = PARSE_NAME_MAX,
     .metavar = "ID",
     .help = "a job"},
    {.name = "color",
     .type = OPT_CHOICE,
     T(color),
     .choices = colors,
     .metavar = "COLOR",
     .help = "a color"},
    {.name = "pair",
     .type = OPT_CALLBACK,
     T(pair_lo),
     .set = set_pair,
     .format = format_pair,
     .metavar = "A:B",
     .help = "a pair"},
    {.name = "old-thing",
     .type = OPT_REFUSED,
     .flags = OPT_NO_VALUE,
     .env = "T_OLD"},
    {.name = NULL},
};

static const struct opt_table table = {
    .prog = "tprog",
    .usage = "usage: tprog [options] ARGS\n",
    .footer = "the end\n",
    .specs = specs,
};

static void init(struct t_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->count = 3;
	o->port = 8080;
	o->ratio = 0.25;
	o->wait_ms = 1500;
	o->buf_bytes = 64 * 1024;
	o->job = "none";
	o->color = 1;
	o->pair_lo = 1;
	o->pair_hi = 2;
}

/* parse runs the table over NULL-terminated args (after argv[0]). */
static int parse(const struct opt_table *t, struct t_opts *o, char **env,
		 int *next, char *err, size_t es, ...)
{
	static char *argv[32];
	int argc = 0;
	va_list ap;
	va_start(ap, es);
	argv[argc++] = "tprog";
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	init(o);
	return opt_parse(t, o, argc, argv, env, next, err, es);
}

static void test_types(void **state)
{
	struct t_opts o;
	char err[256];
	int next;
	(void)state;
	assert_int_equal(parse(&table, &o, NULL, &next, err, sizeof(err), "-f",
			       "--count=7", "--port", "1", "--big",
			       "18446744073709551615", "--ratio", "0.5",
			       "--wait", "2m", "--buf_size", "4KiB", "--path",
			       "p", "--job", "j.1", "--color", "blue", "--pair",
			       "4:5", "rest", "--count", "1", NULL),
			 0);
	assert_int_equal(o.flag, 1);
	assert_int_equal(o.count, 7);
	assert_int_equal(o.port, 1);
	assert_true(o.big == UINT64_MAX);
	assert_true(o.ratio == 0.5);
	assert_int_equal(o.wait_ms, 120000);
	assert_int_equal(o.buf_bytes, 4096);
	assert_string_equal(o.path, "p");
	assert_string_equal(o.job, "j.1");
	assert_int_equal(o.color, 2);
	assert_int_equal(o.pair_lo, 4);
	assert_int_equal(o.pair_hi, 5);
	assert_int_equal(next, 21); /* "rest": the first non-option */
	/* -cVALUE, -c VALUE, "--" ends the options, "" unsets a path */
	assert_int_equal(parse(&table, &o, NULL, &next, err, sizeof(err), "-c9",
			       "--path=", "--", "-f", NULL),
			 0);
	assert_int_equal(o.count, 9);
	assert_null(o.path);
	assert_int_equal(o.flag, 0);
	assert_int_equal(next, 4);
	/* --help stops at once */
	assert_int_equal(parse(&table, &o, NULL, &next, err, sizeof(err), "-h",
			       "--bogus", NULL),
			 0);
	assert_int_equal(o.help, 1);
}

/* bad: the option fails with DL_EINVAL and a message containing text */
static void bad(const char *text, const char *a, const char *b)
{
	struct t_opts o;
	char err[256] = "";
	int next;
	assert_int_equal(
	    parse(&table, &o, NULL, &next, err, sizeof(err), a, b, NULL),
	    DL_EINVAL);
	if (!strstr(err, text))
		fail_msg("'%s %s': '%s' lacks '%s'", a, b ? b : "", err, text);
}

static void test_errors(void **state)
{
	struct t_opts o;
	char err[256];
	int next;
	(void)state;
	bad("--count '11' is not a whole number in 0..10", "--count", "11");
	bad("--port '0' is not a whole number in 1..65535", "--port", "0");
	bad("--ratio '2' is not a number in 0..1", "--ratio", "2");
	bad("--wait '5ms' is not a duration in 10ms..1h", "--wait", "5ms");
	bad("--buf-size '1' is not a size in 1KiB..1MiB", "--buf-size", "1");
	bad("--path must be 0-8 bytes", "--path", "123456789");
	bad("--job '.x' must be 1-128 of [A-Za-z0-9._:-]", "--job", ".x");
	bad("--job 'a/b' must be", "--job", "a/b");
	bad("--color 'pink' is not red, green or blue", "--color", "pink");
	bad("--pair 'x' is not A:B", "--pair", "x");
	bad("option --old-thing is not supported by tprog", "--old_thing",
	    NULL);
	bad("option --count needs a value (N)", "--count", NULL);
	bad("option --flag-on takes no value", "--flag-on=1", NULL);
	bad("option -f takes no value", "-fx", NULL);
	assert_int_equal(
	    parse(&table, &o, NULL, &next, err, sizeof(err), "--bogus=1", NULL),
	    DL_ENOTFOUND);
	assert_string_equal(err, "unknown option '--bogus' (tprog --help "
				 "lists the options)");
	assert_int_equal(
	    parse(&table, &o, NULL, &next, err, sizeof(err), "-z", NULL),
	    DL_ENOTFOUND);
	/* no abbreviations unless the table asks for them */
	assert_int_equal(parse(&table, &o, NULL, &next, err, sizeof(err),
			       "--cou", "1", NULL),
			 DL_ENOTFOUND);
}

static void test_abbrev(void **state)
{
	struct opt_table t = table;
	struct t_opts o;
	char err[256];
	int next;
	(void)state;
	t.flags = OPT_ABBREV;
	assert_int_equal(parse(&t, &o, NULL, &next, err, sizeof(err), "--cou",
			       "1", "--po=2", NULL),
			 0);
	assert_int_equal(o.count, 1);
	assert_int_equal(o.port, 2);
	assert_int_equal(
	    parse(&t, &o, NULL, &next, err, sizeof(err), "--p", "1", NULL),
	    DL_EINVAL); /* --port, --path, --pair */
	assert_non_null(strstr(err, "ambiguous"));
}

static void test_env(void **state)
{
	struct t_opts o;
	char err[256];
	int next;
	char *env[] = {"T_COUNT=5", "T_FLAG=yes", NULL};
	char *off[] = {"T_FLAG=off", "T_OLD=0", NULL};
	char *bad_count[] = {"T_COUNT=50", NULL};
	char *bad_flag[] = {"T_FLAG=maybe", NULL};
	char *old[] = {"T_OLD=1", NULL};
	(void)state;
	assert_int_equal(parse(&table, &o, env, &next, err, sizeof(err), NULL),
			 0);
	assert_int_equal(o.count, 5);
	assert_int_equal(o.flag, 1);
	/* the command line wins */
	assert_int_equal(
	    parse(&table, &o, env, &next, err, sizeof(err), "-c", "2", NULL),
	    0);
	assert_int_equal(o.count, 2);
	assert_int_equal(parse(&table, &o, off, &next, err, sizeof(err), NULL),
			 0);
	assert_int_equal(o.flag, 0);
	assert_int_equal(
	    parse(&table, &o, bad_count, &next, err, sizeof(err), NULL),
	    DL_EINVAL);
	assert_string_equal(err, "--count '50' is not a whole number in 0..10 "
				 "(from T_COUNT)");
	assert_int_equal(
	    parse(&table, &o, bad_flag, &next, err, sizeof(err), NULL),
	    DL_EINVAL);
	assert_string_equal(err, "T_FLAG='maybe' is not true or false");
	assert_int_equal(parse(&table, &o, old, &next, err, sizeof(err), NULL),
			 DL_EINVAL);
	assert_string_equal(err, "option --old-thing is not supported by tprog "
				 "(from T_OLD)");
}

static void test_help(void **state)
{
	struct t_opts d;
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	(void)state;
	init(&d);
	assert_non_null(fp);
	opt_usage(&table, &d, fp);
	fclose(fp);
	assert_true(strncmp(text, "usage: tprog", 12) == 0);
	assert_non_null(strstr(text, "  -c, --count N\n      a count "
				     "(default: 3)\n"));
	assert_non_null(strstr(text, "--port PORT\n      a port (default: "
				     "8080)\n"));
	assert_non_null(strstr(text, "a big number (default: none)"));
	assert_non_null(strstr(text, "a ratio (default: 0.25)"));
	assert_non_null(strstr(text, "a wait (default: 1500ms)"));
	assert_non_null(strstr(text, "a buffer (default: 64KiB)"));
	assert_non_null(strstr(text, "a path (default: somewhere)"));
	assert_non_null(strstr(text, "a job (default: none)"));
	assert_non_null(strstr(text, "a color (default: green)"));
	assert_non_null(strstr(text, "a pair (default: 1:2)"));
	assert_non_null(strstr(text, "  -f, --flag-on\n      a flag\n"));
	assert_non_null(strstr(text, "Not supported (refused): --old-thing."));
	assert_null(strstr(text, "--old-thing\n"));
	assert_true(len > 9 && strcmp(text + len - 8, "the end\n") == 0);
	free(text);
}

/* every default --help shows parses back to the value used; a table whose
 * shown default is not the value fails the check, naming the option */
static void test_check_defaults(void **state)
{
	struct t_opts d;
	char err[256];
	(void)state;
	init(&d);
	assert_int_equal(
	    opt_check_defaults(&table, &d, sizeof(d), err, sizeof(err)), 0);
	d.wait_ms = 1234; /* still true: shown as 1234ms */
	assert_int_equal(
	    opt_check_defaults(&table, &d, sizeof(d), err, sizeof(err)), 0);
	specs[11].format = format_lie;
	assert_int_equal(
	    opt_check_defaults(&table, &d, sizeof(d), err, sizeof(err)),
	    DL_ECONFLICT);
	specs[11].format = format_pair;
	assert_non_null(strstr(err, "tprog --pair: the default shown, '2:2'"));
}

/* usage_as writes the table in format f into a string (the caller frees) */
static char *usage_as(enum opt_help_format f)
{
	struct t_opts d;
	char *text = NULL;
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	init(&d);
	assert_non_null(fp);
	opt_usage_format(&table, &d, f, fp);
	fclose(fp);
	return text;
}

/* the man page's entries: names and metavar, help and default as --help
 * has them, the variable; '-' typed as \-, '\' as \e, a leading '.'
 * kept literal, --names in the help in bold; the refused ones by name */
static void test_man(void **state)
{
	const char *help = specs[5].help;
	char *text;
	(void)state;
	specs[5].help = ".5 of a\\b, as --count-ish or a-b,c --";
	text = usage_as(OPT_HELP_MAN);
	specs[5].help = help;
	assert_non_null(
	    strstr(text, ".TP\n\\fB\\-c\\fR, \\fB\\-\\-count\\fR "
			 "\\fIN\\fR\na count (default: \\%3). Also read from "
			 "\\fB\\%T_COUNT\\fR.\n.TP\n"));
	assert_non_null(strstr(text, ".TP\n\\fB\\-\\-buf\\-size\\fR "
				     "\\fISIZE\\fR\na buffer (default: "
				     "\\%64KiB).\n.TP\n"));
	assert_non_null(
	    strstr(text, ".TP\n\\fB\\-f\\fR, "
			 "\\fB\\-\\-flag\\-on\\fR\na flag. Also read from "
			 "\\fB\\%T_FLAG\\fR.\n"));
	assert_non_null(strstr(text, "\n\\&.5 of a\\eb, as "
				     "\\fB\\-\\-count\\-ish\\fR or a\\-b,\\:c "
				     "\\-\\- (default: \\%0.25).\n"));
	assert_non_null(strstr(text, ".PP\nNot supported (refused): "
				     "\\fB\\-\\-old\\-thing\\fR.\n"));
	assert_null(strstr(text, "usage:"));
	assert_null(strstr(text, "the end"));
	free(text);
	/* a long help is wrapped at spaces into lines of at most 79 bytes */
	specs[5].help = "a ratio, which is a number between zero and one, "
			"here written out at some length so that it cannot fit "
			"on one line of the page";
	text = usage_as(OPT_HELP_MAN);
	specs[5].help = help;
	assert_non_null(strstr(text, "\na ratio, which is a number between "
				     "zero and one, here written out at some\n"
				     "length so that it cannot fit on one "
				     "line of the page (default: \\%0.25).\n"));
	for (char *line = text, *end; *line; line = end + 1) {
		end = strchr(line, '\n');
		assert_non_null(end);
		assert_true(end - line <= 79);
	}
	free(text);
}

/* completion data: a line an option, its kind from its type and metavar,
 * the words of a choice; the refused option left out; opt_usage writes it
 * when DLAUNCH_HELP_FORMAT=completion asks */
static void test_completion(void **state)
{
	struct t_opts d;
	char *text, *env_text = NULL;
	size_t len = 0;
	FILE *fp;
	(void)state;
	text = usage_as(OPT_HELP_COMPLETION);
	assert_non_null(strstr(text, "--help -h flag\n--flag-on -f flag\n"
				     "--count -c value\n--port - value\n"));
	assert_non_null(strstr(text, "\n--path - file\n--job - value\n"
				     "--color - word red green blue\n"
				     "--pair - value\n"));
	assert_null(strstr(text, "old-thing"));
	setenv("DLAUNCH_HELP_FORMAT", "completion", 1);
	assert_int_equal(opt_help_format_env(), OPT_HELP_COMPLETION);
	fp = open_memstream(&env_text, &len);
	init(&d);
	opt_usage(&table, &d, fp);
	fclose(fp);
	assert_string_equal(env_text, text);
	setenv("DLAUNCH_HELP_FORMAT", "man", 1);
	assert_int_equal(opt_help_format_env(), OPT_HELP_MAN);
	setenv("DLAUNCH_HELP_FORMAT", "bogus", 1);
	assert_int_equal(opt_help_format_env(), OPT_HELP_TEXT);
	unsetenv("DLAUNCH_HELP_FORMAT");
	assert_int_equal(opt_help_format_env(), OPT_HELP_TEXT);
	free(env_text);
	free(text);
}

/* the words a callback offers are checked: each must parse */
static void test_offered_words(void **state)
{
	static const char *const good[] = {"1:2", "3:4", NULL};
	static const char *const bad[] = {"1:2", "12", NULL};
	struct t_opts d;
	char err[256], *text;
	(void)state;
	init(&d);
	specs[11].choices = good;
	text = usage_as(OPT_HELP_COMPLETION);
	assert_non_null(strstr(text, "\n--pair - word 1:2 3:4\n"));
	free(text);
	assert_int_equal(
	    opt_check_defaults(&table, &d, sizeof(d), err, sizeof(err)), 0);
	specs[11].choices = bad;
	assert_int_equal(
	    opt_check_defaults(&table, &d, sizeof(d), err, sizeof(err)),
	    DL_ECONFLICT);
	specs[11].choices = NULL;
	assert_string_equal(err, "tprog --pair: the word '12' it offers is "
				 "refused: --pair '12' is not A:B");
}

static void test_formats_and_names(void **state)
{
	char s[32];
	(void)state;
	opt_format_duration(0, s, sizeof(s));
	assert_string_equal(s, "0");
	opt_format_duration(7200000, s, sizeof(s));
	assert_string_equal(s, "2h");
	opt_format_duration(90000, s, sizeof(s));
	assert_string_equal(s, "90s");
	opt_format_duration(1500, s, sizeof(s));
	assert_string_equal(s, "1500ms");
	opt_format_size(1 << 30, s, sizeof(s));
	assert_string_equal(s, "1GiB");
	opt_format_size(3 << 20, s, sizeof(s));
	assert_string_equal(s, "3MiB");
	opt_format_size(1536, s, sizeof(s));
	assert_string_equal(s, "1536");
	assert_true(parse_name_valid("a.b_c:d-9", 128));
	assert_false(parse_name_valid(".hidden", 128));
	assert_false(parse_name_valid("..", 128));
	assert_false(parse_name_valid("a/b", 128));
	assert_false(parse_name_valid("a b", 128));
	assert_false(parse_name_valid("", 128));
	assert_false(parse_name_valid(NULL, 128));
	assert_true(parse_name_valid("abc", 3));
	assert_false(parse_name_valid("abcd", 3));
	snprintf(s, sizeof(s), ".host name/x");
	parse_name_sanitize(s);
	assert_string_equal(s, "-host-name-x");
	assert_true(parse_name_valid(s, 128));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_types),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_abbrev),
	    cmocka_unit_test(test_env),
	    cmocka_unit_test(test_help),
	    cmocka_unit_test(test_check_defaults),
	    cmocka_unit_test(test_man),
	    cmocka_unit_test(test_completion),
	    cmocka_unit_test(test_offered_words),
	    cmocka_unit_test(test_formats_and_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
