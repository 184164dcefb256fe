/* SPDX-License-Identifier: Apache-2.0 */
/*
 * page.h - the status page's files, compiled into the binary (private to
 * rendezvous/). The page is static: HTML, a script and a style sheet that
 * hold no data and ask the JSON API for everything, so a cluster with no
 * internet serves it whole, and with a token configured the files may be
 * served to anyone (the data is not).
 */
#ifndef DLAUNCH_RDZV_PAGE_H
#define DLAUNCH_RDZV_PAGE_H

#include <stddef.h>

/* One embedded file, as rendezvous/page/embed.sh writes them; the table
 * rdzv_page_blobs ends with a NULL name. data is NUL-terminated. */
struct rdzv_page_blob {
	const char *name;
	const unsigned char *data;
	size_t len;
};
extern const struct rdzv_page_blob rdzv_page_blobs[];

/* What a page path is answered with: static data, never freed. */
struct rdzv_page_file {
	const char *data;
	size_t len;
	const char *content_type;
};

/*
 * rdzv_page_asset: whether path is one of the page's ("/", "/jobs/{job}"
 * with a valid job name, "/static/page.js", "/static/page.css"); returns 1
 * and fills out (when not NULL), else 0.
 */
int rdzv_page_asset(const char *path, struct rdzv_page_file *out);

#endif
