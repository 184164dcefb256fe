/*
 * opt_doc.c - an option table written as the OPTIONS of a man page (roff,
 * man(7) macros) and as the data of the shell completion. Both come from
 * the table and defaults --help prints, so the man pages and completion
 * that the build makes from them (man/man.mk) say what --help says.
 */
#include "opt_doc.h"

#include <ctype.h>
#include <string.h>

/* option_char: a character of an option's long name */
static int option_char(char c)
{
	return islower((unsigned char)c) || isdigit((unsigned char)c) ||
	       c == '-';
}

/* option_at: whether text[i] starts "--name" (not inside a word) */
static int option_at(const char *text, size_t i)
{
	return text[i] == '-' && text[i + 1] == '-' &&
	       islower((unsigned char)text[i + 2]) &&
	       (i == 0 ||
		!(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '-'));
}

/* roff writes text for a man(7) text line: each '-' as \- (as help2man
 * does, so values and names copy out of the page as typed), '\' as \e, a
 * '.' or '\'' that starts the line made literal; with bold, every --name
 * in the text in bold. */
static void roff(FILE *fp, const char *text, int line_start, int bold)
{
	for (size_t i = 0; text[i]; i++) {
		if (i == 0 && line_start && (text[0] == '.' || text[0] == '\''))
			fputs("\\&", fp);
		if (bold && option_at(text, i)) {
			fputs("\\fB", fp);
			for (; option_char(text[i]); i++)
				if (text[i] == '-')
					fputs("\\-", fp);
				else
					fputc(text[i], fp);
			fputs("\\fR", fp);
			if (!text[i])
				break;
		}
		if (text[i] == '-')
			fputs("\\-", fp);
		else if (text[i] == '\\')
			fputs("\\e", fp);
		else
			fputc(text[i], fp);
	}
}

/* man_entry writes one option: the tag (names and metavar), then its help
 * line with the default as --help shows it, then its variable. */
static void man_entry(const struct opt_spec *s, const void *defaults, FILE *fp)
{
	char def[256];
	size_t n = strlen(s->help ? s->help : "");

	fputs(".TP\n", fp);
	if (s->short_name)
		fprintf(fp, "\\fB\\-%c\\fR, ", s->short_name);
	fputs("\\fB\\-\\-", fp);
	roff(fp, s->name, 0, 0);
	fputs("\\fR", fp);
	if (s->metavar) {
		fputs(" \\fI", fp);
		roff(fp, s->metavar, 0, 0);
		fputs("\\fR", fp);
	}
	fputc('\n', fp);
	roff(fp, s->help ? s->help : "", 1, 1);
	opt_format_default(s, defaults, def, sizeof(def));
	if (def[0]) {
		fputs(" (default: ", fp);
		roff(fp, def, 0, 0);
		fputc(')', fp);
	}
	if (def[0] || (n && s->help[n - 1] != '.'))
		fputc('.', fp);
	fputc('\n', fp);
	if (s->env) {
		fputs("Also read from \\fB", fp);
		roff(fp, s->env, 0, 0);
		fputs("\\fR.\n", fp);
	}
}

void opt_doc_man(const struct opt_table *t, const void *defaults, FILE *fp)
{
	const struct opt_spec *s;
	int n_refused = 0;

	for (s = t->specs; s->name; s++) {
		if (s->type == OPT_REFUSED)
			n_refused++;
		else
			man_entry(s, defaults, fp);
	}
	if (!n_refused)
		return;
	fputs(".PP\nNot supported (refused):", fp);
	for (s = t->specs; s->name; s++) {
		if (s->type != OPT_REFUSED)
			continue;
		fputs(" \\fB\\-\\-", fp);
		roff(fp, s->name, 0, 0);
		fputs(--n_refused ? "\\fR," : "\\fR.\n", fp);
	}
}

/* completion_kind: what the value of s is, for the shell */
static const char *completion_kind(const struct opt_spec *s)
{
	const char *m = s->metavar ? s->metavar : "";
	if (!opt_takes_value(s))
		return "flag";
	if (s->choices)
		return "word";
	if (strcmp(m, "FILE") == 0 || strcmp(m, "PATH") == 0)
		return "file";
	if (strcmp(m, "DIR") == 0)
		return "dir";
	return "value";
}

void opt_doc_completion(const struct opt_table *t, FILE *fp)
{
	for (const struct opt_spec *s = t->specs; s->name; s++) {
		if (s->type == OPT_REFUSED)
			continue;
		fprintf(fp, "--%s ", s->name);
		if (s->short_name)
			fprintf(fp, "-%c ", s->short_name);
		else
			fputs("- ", fp);
		fputs(completion_kind(s), fp);
		for (size_t i = 0; s->choices && s->choices[i]; i++)
			fprintf(fp, " %s", s->choices[i]);
		fputc('\n', fp);
	}
}
