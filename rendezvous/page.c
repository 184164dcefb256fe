/* SPDX-License-Identifier: Apache-2.0 */
/*
 * page.c - which paths are the status page's and which embedded file
 * answers each. The files themselves are rendezvous/page/, turned into
 * C arrays at build time (embed.sh).
 */
#include "page.h"

#include <string.h>

#include "dlaunch/parse.h"
#include "dlaunch/rdzv_state.h"

static const struct {
	const char *path; /* exact path, or NULL: the job pages */
	const char *file;
	const char *content_type;
} routes[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {NULL, "index.html", "text/html; charset=utf-8"},
    {"/static/page.js", "page.js", "text/javascript; charset=utf-8"},
    {"/static/page.css", "page.css", "text/css; charset=utf-8"},
};

/* is_job_page: "/jobs/{job}" with a name the API would take */
static int is_job_page(const char *path)
{
	return strncmp(path, "/jobs/", 6) == 0 &&
	       parse_name_valid(path + 6, RDZV_NAME_MAX);
}

static const struct rdzv_page_blob *blob_named(const char *name)
{
	for (const struct rdzv_page_blob *b = rdzv_page_blobs; b->name; b++)
		if (strcmp(b->name, name) == 0)
			return b;
	return NULL;
}

int rdzv_page_asset(const char *path, struct rdzv_page_file *out)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct rdzv_page_blob *b;
		if (routes[i].path ? strcmp(path, routes[i].path) != 0
				   : !is_job_page(path))
			continue;
		b = blob_named(routes[i].file);
		if (!b)
			return 0;
		if (out) {
			out->data = (const char *)b->data;
			out->len = b->len;
			out->content_type = routes[i].content_type;
		}
		return 1;
	}
	return 0;
}
