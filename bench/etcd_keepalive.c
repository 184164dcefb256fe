/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_keepalive.c - what a lease keep-alive costs etcd, sent as the agent
 * sends it (a message of a gRPC LeaseKeepAlive stream, etcd_lease.c) and
 * as it was sent before (a request of etcd's JSON gateway).
 *
 *   etcd_keepalive --mode stream|gateway --url http://HOST:PORT --lease ID
 *                  --conns N --interval-ms MS --seconds S
 *
 * N connections to one member each renew lease ID every MS milliseconds
 * (their turns spread over MS), for S seconds: the steady load of N agents
 * keeping their leases. stream: each connection is an HTTP/2 connection
 * (prior knowledge) with one stream; gateway: each an HTTP/1.1 connection
 * kept alive, a POST /v3/lease/keepalive per renewal. bench.py reads
 * etcd's CPU and counters while it runs. It prints one JSON object: the
 * renewals sent and answered, the streams that ended early. Exit status 1
 * when the connections could not keep up (fewer than 90% answered).
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlaunch/clock.h"

struct conn {
	CURL *easy;
	int want;   /* stream: a renewal to send */
	int paused; /* stream: the upload waits for one */
	int busy;   /* gateway: a request in flight */
	uint64_t due_ms;
};

static unsigned char frame[16];
static size_t frame_len;
static long sent, answered, ended;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct conn *c = arg;
	if (size * n < frame_len)
		return CURL_READFUNC_ABORT;
	if (!c->want) {
		c->paused = 1;
		return CURL_READFUNC_PAUSE;
	}
	c->want = 0;
	memcpy(buf, frame, frame_len);
	sent++;
	return frame_len;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
	(void)data;
	(void)arg;
	answered++; /* one answer a chunk: each is sent alone */
	return size * n;
}

static int usage(void)
{
	fprintf(stderr, "usage: etcd_keepalive --mode stream|gateway --url URL "
			"--lease ID --conns N --interval-ms MS --seconds S\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *mode = NULL, *url = NULL;
	uint64_t lease = 0;
	long conns = 0, interval_ms = 0, seconds = 0;
	char target[512], body[64];
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mode") == 0)
			mode = argv[i + 1];
		else if (strcmp(argv[i], "--url") == 0)
			url = argv[i + 1];
		else if (strcmp(argv[i], "--lease") == 0)
			lease = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--conns") == 0)
			conns = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--interval-ms") == 0)
			interval_ms = atol(argv[i + 1]);
		else if (strcmp(argv[i], "--seconds") == 0)
			seconds = atol(argv[i + 1]);
		else
			return usage();
	}
	if (!mode || !url || !lease || conns < 1 || conns > 20000 ||
	    interval_ms < 1 || seconds < 1 ||
	    (strcmp(mode, "stream") != 0 && strcmp(mode, "gateway") != 0))
		return usage();
	int stream = strcmp(mode, "stream") == 0;

	/* LeaseKeepAliveRequest { ID = 1 } in gRPC's framing */
	size_t n = 5;
	uint64_t v = lease;
	memset(frame, 0, 5);
	frame[n++] = 0x08;
	while (v >= 0x80) {
		frame[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	frame[n++] = (unsigned char)v;
	frame[4] = (unsigned char)(n - 5);
	frame_len = n;
	snprintf(body, sizeof(body), "{\"ID\":\"%" PRIu64 "\"}", lease);
	snprintf(target, sizeof(target), "%s%s", url,
		 stream ? "/etcdserverpb.Lease/LeaseKeepAlive"
			: "/v3/lease/keepalive");

	curl_global_init(CURL_GLOBAL_DEFAULT);
	CURLM *multi = curl_multi_init();
	/* a connection each, never shared */
	curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 2 * conns);
	struct curl_slist *hdrs =
	    curl_slist_append(NULL, stream ? "Content-Type: application/grpc"
					   : "Content-Type: application/json");
	struct conn *cs = calloc((size_t)conns, sizeof(*cs));
	if (!multi || !hdrs || !cs)
		return 1;
	uint64_t t0 = clock_now_ms(), end = t0 + (uint64_t)seconds * 1000;
	for (long i = 0; i < conns; i++) {
		CURL *e = cs[i].easy = curl_easy_init();
		cs[i].due_ms = t0 + (uint64_t)(interval_ms * i / conns);
		curl_easy_setopt(e, CURLOPT_URL, target);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
		curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
		if (stream) {
			curl_easy_setopt(
			    e, CURLOPT_HTTP_VERSION,
			    (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
			curl_easy_setopt(e, CURLOPT_POST, 1L);
			curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(e, CURLOPT_READDATA, &cs[i]);
			curl_multi_add_handle(multi, e);
		} else {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
		}
	}
	while (clock_now_ms() < end) {
		uint64_t now = clock_now_ms();
		int running;
		for (long i = 0; i < conns; i++) {
			struct conn *c = &cs[i];
			if (now < c->due_ms)
				continue;
			c->due_ms += (uint64_t)interval_ms;
			if (stream && !c->want) {
				c->want = 1;
				if (c->paused) {
					c->paused = 0;
					curl_easy_pause(c->easy,
							CURLPAUSE_CONT);
				}
			} else if (!stream && !c->busy) {
				c->busy = 1;
				sent++;
				curl_multi_add_handle(multi, c->easy);
			}
		}
		curl_multi_perform(multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(multi, &left))) {
			if (m->msg != CURLMSG_DONE)
				continue;
			curl_multi_remove_handle(multi, m->easy_handle);
			for (long i = 0; i < conns; i++)
				if (cs[i].easy == m->easy_handle) {
					cs[i].busy = 0;
					if (stream)
						ended++;
				}
		}
		curl_multi_poll(multi, NULL, 0, 5, NULL);
	}
	printf("{\"mode\": \"%s\", \"conns\": %ld, \"interval_ms\": %ld, "
	       "\"seconds\": %ld, \"sent\": %ld, \"answered\": %ld, "
	       "\"streams_ended\": %ld}\n",
	       mode, conns, interval_ms, seconds, sent, answered, ended);
	return answered * 10 >= sent * 9 && !ended ? 0 : 1;
}
