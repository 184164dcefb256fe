/* SPDX-License-Identifier: Apache-2.0 */
/*
 * opt_doc.h - an option table as a man page's options and as completion
 * data (opt_doc.c); reached through opt_usage_format (dlaunch/opt.h).
 */
#ifndef DLAUNCH_OPT_DOC_H
#define DLAUNCH_OPT_DOC_H

#include <stdio.h>

#include "dlaunch/opt.h"

/* opt_doc_man writes t's options as man(7) .TP entries (help line, default
 * from defaults, variable), then the refused ones; see OPT_HELP_MAN. */
void opt_doc_man(const struct opt_table *t, const void *defaults, FILE *fp);

/* opt_doc_completion writes one line an option; see OPT_HELP_COMPLETION. */
void opt_doc_completion(const struct opt_table *t, FILE *fp);

#endif
