/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bare_http.c - the limit of dlaunch-rdzv's heartbeat path: a libevent
 * HTTP server (evhttp, one thread, as dlaunch-rdzv) that reads each
 * request's body and answers 200 with one fixed JSON body, a heartbeat's
 * answer, and does nothing else.
 *
 *   bare_http [--listen 127.0.0.1:0]
 *
 * It prints "listening on HOST:PORT" once bound, then serves until
 * SIGTERM or SIGINT. bench/bench.py drives it and dlaunch-rdzv with the
 * same load generator (bench/rdzv_load.c --no-join) in one run and
 * reports dlaunch-rdzv's heartbeats per second as a ratio to it.
 */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "dlaunch/parse.h"

/* dlaunch-rdzv's answer to a heartbeat of a running job's member, byte
 * for byte */
static const char BODY[] = "{\"round\":1,\"state\":\"RUNNING\",\"action\":"
			   "\"continue\",\"restart_count\":0}";

static void on_request(struct evhttp_request *req, void *arg)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	struct evbuffer *out = arg;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evbuffer_drain(in, evbuffer_get_length(in));
	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add_reference(out, BODY, sizeof(BODY) - 1, NULL, NULL);
	evhttp_send_reply(req, 200, "OK", out);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
	const char *listen = "127.0.0.1:0";
	char host[256], addr[300];
	uint16_t port;
	if (argc == 3 && strcmp(argv[1], "--listen") == 0) {
		listen = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: bare_http [--listen HOST:PORT]\n");
		return 2;
	}
	if (parse_host_port(listen, 0, 1, host, sizeof(host), &port) != 0) {
		fprintf(stderr,
			"bare_http: bad --listen '%s' (want HOST:PORT)\n",
			listen);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct event_base *base = event_base_new();
	struct evhttp *http = base ? evhttp_new(base) : NULL;
	struct evbuffer *out = evbuffer_new();
	if (!http || !out) {
		fprintf(stderr, "bare_http: out of memory\n");
		return 1;
	}
	struct evhttp_bound_socket *bound =
	    evhttp_bind_socket_with_handle(http, host, port);
	if (!bound) {
		fprintf(stderr, "bare_http: cannot listen on %s\n", listen);
		return 1;
	}
	evhttp_set_gencb(http, on_request, out);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(bound);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
	    ss.ss_family != AF_INET) {
		fprintf(stderr, "bare_http: IPv4 addresses only\n");
		return 1;
	}
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	evutil_inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof(addr));
	printf("listening on %s:%u\n", addr, (unsigned)ntohs(sin->sin_port));
	fflush(stdout);
	struct event *term = evsignal_new(base, SIGTERM, on_signal, base);
	struct event *intr = evsignal_new(base, SIGINT, on_signal, base);
	if (!term || !intr || evsignal_add(term, NULL) ||
	    evsignal_add(intr, NULL)) {
		fprintf(stderr, "bare_http: cannot catch signals\n");
		return 1;
	}
	event_base_dispatch(base);
	event_free(term);
	event_free(intr);
	evbuffer_free(out);
	evhttp_free(http);
	event_base_free(base);
	return 0;
}
