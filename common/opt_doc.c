/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opt_doc.c - an option table written as the OPTIONS of a man page (roff,
 * man(7) macros) and as the data of the shell completion. Both come from
 * the table and defaults --help prints, so the man pages and completion
 * that the build makes from them (man/man.mk) say what --help says.
 */
#include "opt_doc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* the longest text line written (mandoc -Tlint wants at most 80 bytes) */
#define MAN_WIDTH 79

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
 * ',' within a word followed by \: (a line may break there: a list such
 * as a default of --rdzv-conf is one long word); with bold, every --name
 * in the text in bold. */
static void roff(FILE *fp, const char *text, int bold)
{
	for (size_t i = 0; text[i]; i++) {
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
		else if (text[i] == ',' && text[i + 1] && text[i + 1] != ' ')
			fputs(",\\:", fp);
		else
			fputc(text[i], fp);
	}
}

/* put_wrapped writes roff text as lines of at most MAN_WIDTH bytes,
 * broken at spaces (a word longer than that stays whole); a line that
 * would start with '.' or '\'' is made literal. */
static void put_wrapped(FILE *fp, const char *text)
{
	size_t col = 0;
	while (*text) {
		size_t w;
		text += strspn(text, " ");
		w = strcspn(text, " ");
		if (!w)
			break;
		if (col && col + 1 + w > MAN_WIDTH) {
			fputc('\n', fp);
			col = 0;
		} else if (col) {
			fputc(' ', fp);
			col++;
		}
		if (!col && (text[0] == '.' || text[0] == '\'')) {
			fputs("\\&", fp);
			col += 2;
		}
		fwrite(text, 1, w, fp);
		col += w;
		text += w;
	}
	if (col)
		fputc('\n', fp);
}

/* man_body writes the paragraph of s: its help line with the default as
 * --help shows it, then its variable. */
static void man_body(const struct opt_spec *s, const void *defaults, FILE *fp)
{
	char def[256], *text = NULL;
	size_t len = 0, n = strlen(s->help ? s->help : "");
	FILE *mem = open_memstream(&text, &len);

	if (!mem)
		return;
	roff(mem, s->help ? s->help : "", 1);
	opt_format_default(s, defaults, def, sizeof(def));
	if (def[0]) {
		fputs(" (default: \\%", mem); /* \%: never hyphenated */
		roff(mem, def, 0);
		fputc(')', mem);
	}
	if (def[0] || (n && s->help[n - 1] != '.'))
		fputc('.', mem);
	if (s->env) {
		fputs(" Also read from \\fB\\%", mem);
		roff(mem, s->env, 0);
		fputs("\\fR.", mem);
	}
	if (fclose(mem) == 0)
		put_wrapped(fp, text);
	free(text);
}

/* man_entry writes one option: the tag (names and metavar), then its
 * paragraph. */
static void man_entry(const struct opt_spec *s, const void *defaults, FILE *fp)
{
	fputs(".TP\n", fp);
	if (s->short_name)
		fprintf(fp, "\\fB\\-%c\\fR, ", s->short_name);
	fputs("\\fB\\-\\-", fp);
	roff(fp, s->name, 0);
	fputs("\\fR", fp);
	if (s->metavar) {
		fputs(" \\fI", fp);
		roff(fp, s->metavar, 0);
		fputs("\\fR", fp);
	}
	fputc('\n', fp);
	man_body(s, defaults, fp);
}

void opt_doc_man(const struct opt_table *t, const void *defaults, FILE *fp)
{
	const struct opt_spec *s;
	char *text = NULL;
	size_t len = 0;
	int n_refused = 0;
	FILE *mem;

	for (s = t->specs; s->name; s++) {
		if (s->type == OPT_REFUSED)
			n_refused++;
		else
			man_entry(s, defaults, fp);
	}
	if (!n_refused || !(mem = open_memstream(&text, &len)))
		return;
	fputs("Not supported (refused):", mem);
	for (s = t->specs; s->name; s++) {
		if (s->type != OPT_REFUSED)
			continue;
		fputs(" \\fB\\-\\-", mem);
		roff(mem, s->name, 0);
		fputs(--n_refused ? "\\fR," : "\\fR.", mem);
	}
	fputs(".PP\n", fp);
	if (fclose(mem) == 0)
		put_wrapped(fp, text);
	free(text);
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
