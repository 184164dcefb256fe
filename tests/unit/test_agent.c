/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_agent.c - the agent's pure pieces: worker environment (the progress
 * file included), std specs,
 * rank filters, line splitting, error-file parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/rdzv/addr.h"
#include "../../agent/env.h"
#include "../../agent/output.h"
#include "../../agent/report.h"
#include "dlaunch/agent.h"
#include "dlaunch/error.h"

static const char *env_get(char **env, const char *name)
{
	size_t n = strlen(name);
	for (; *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static int env_count(char **env, const char *name)
{
	size_t n = strlen(name);
	int c = 0;
	for (; *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			c++;
	return c;
}

static struct agent_worker_env sample(void)
{
	struct agent_worker_env e;
	memset(&e, 0, sizeof(e));
	e.rank = 9;
	e.local_rank = 1;
	e.world_size = 16;
	e.local_world_size = 8;
	e.group_rank = 1;
	e.group_world_size = 2;
	e.role_rank = 9;
	e.role_world_size = 16;
	e.role_name = "trainer";
	e.master_addr = "10.0.0.5";
	e.master_port = 29501;
	e.restart_count = 2;
	e.max_restarts = 3;
	e.run_id = "job42";
	e.error_file = "/tmp/x/error.json";
	e.job_id = "job42";
	e.round = 7;
	e.node_id = "nodeB";
	return e;
}

static void test_env_exact(void **state)
{
	char *base[] = {"PATH=/bin", "RANK=99", "HOME=/root", NULL};
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	assert_int_equal(agent_env_build(base, &e, &env), 0);
	assert_string_equal(env_get(env, "RANK"), "9");
	assert_int_equal(env_count(env, "RANK"), 1); /* inherited replaced */
	assert_string_equal(env_get(env, "LOCAL_RANK"), "1");
	assert_string_equal(env_get(env, "WORLD_SIZE"), "16");
	assert_string_equal(env_get(env, "LOCAL_WORLD_SIZE"), "8");
	assert_string_equal(env_get(env, "GROUP_RANK"), "1");
	assert_string_equal(env_get(env, "GROUP_WORLD_SIZE"), "2");
	assert_string_equal(env_get(env, "ROLE_RANK"), "9");
	assert_string_equal(env_get(env, "ROLE_NAME"), "trainer");
	assert_string_equal(env_get(env, "ROLE_WORLD_SIZE"), "16");
	assert_string_equal(env_get(env, "MASTER_ADDR"), "10.0.0.5");
	assert_string_equal(env_get(env, "MASTER_PORT"), "29501");
	assert_string_equal(env_get(env, "TORCHELASTIC_RESTART_COUNT"), "2");
	assert_string_equal(env_get(env, "TORCHELASTIC_MAX_RESTARTS"), "3");
	assert_string_equal(env_get(env, "TORCHELASTIC_RUN_ID"), "job42");
	assert_string_equal(env_get(env, "TORCHELASTIC_ERROR_FILE"),
			    "/tmp/x/error.json");
	assert_string_equal(env_get(env, "TORCHELASTIC_USE_AGENT_STORE"),
			    "False");
	assert_string_equal(env_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
			    "1");
	assert_string_equal(env_get(env, "NCCL_ASYNC_ERROR_HANDLING"), "1");
	assert_string_equal(env_get(env, "OMP_NUM_THREADS"), "1");
	assert_string_equal(env_get(env, "DLAUNCH_JOB_ID"), "job42");
	assert_string_equal(env_get(env, "DLAUNCH_ROUND"), "7");
	assert_string_equal(env_get(env, "DLAUNCH_NODE_ID"), "nodeB");
	assert_string_equal(env_get(env, "PATH"), "/bin");
	assert_string_equal(env_get(env, "HOME"), "/root");
	agent_env_free(env);
}

static void test_env_defaults_only_if_unset(void **state)
{
	char *base[] = {"OMP_NUM_THREADS=4",
			"TORCH_NCCL_ASYNC_ERROR_HANDLING=0",
			"NCCL_ASYNC_ERROR_HANDLING=0", NULL};
	char *empty[] = {NULL};
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	assert_int_equal(agent_env_build(base, &e, &env), 0);
	assert_string_equal(env_get(env, "OMP_NUM_THREADS"), "4");
	assert_int_equal(env_count(env, "OMP_NUM_THREADS"), 1);
	assert_string_equal(env_get(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
			    "0");
	assert_string_equal(env_get(env, "NCCL_ASYNC_ERROR_HANDLING"), "0");
	assert_int_equal(env_count(env, "NCCL_ASYNC_ERROR_HANDLING"), 1);
	agent_env_free(env);
	/* one worker per node: OMP_NUM_THREADS is left alone */
	e.local_world_size = 1;
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	assert_null(env_get(env, "OMP_NUM_THREADS"));
	agent_env_free(env);
}

static void test_env_progress_file(void **state)
{
	char *base[] = {"DLAUNCH_PROGRESS_FILE=/stale", NULL};
	char *empty[] = {NULL};
	char long_path[4000];
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	/* not set unless the agent names one */
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	assert_null(env_get(env, "DLAUNCH_PROGRESS_FILE"));
	agent_env_free(env);
	e.progress_file = "/logs/attempt_2/rank_9/progress";
	assert_int_equal(agent_env_build(base, &e, &env), 0);
	assert_string_equal(env_get(env, "DLAUNCH_PROGRESS_FILE"),
			    "/logs/attempt_2/rank_9/progress");
	assert_int_equal(env_count(env, "DLAUNCH_PROGRESS_FILE"), 1);
	agent_env_free(env);
	/* paths as long as the agent allows reach the worker whole */
	memset(long_path, 'p', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	e.progress_file = long_path;
	e.error_file = long_path;
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	assert_string_equal(env_get(env, "DLAUNCH_PROGRESS_FILE"), long_path);
	assert_string_equal(env_get(env, "TORCHELASTIC_ERROR_FILE"), long_path);
	agent_env_free(env);
}

static void test_std_spec(void **state)
{
	struct agent_std_spec s;
	char err[128];
	(void)state;
	assert_int_equal(agent_std_parse("3", &s, err, sizeof(err)), 0);
	assert_int_equal(agent_std_mask(&s, 0), 3);
	assert_int_equal(agent_std_mask(&s, 7), 3);
	assert_int_equal(agent_std_parse("0:1,2:2", &s, err, sizeof(err)), 0);
	assert_int_equal(agent_std_mask(&s, 0), AGENT_STD_OUT);
	assert_int_equal(agent_std_mask(&s, 1), 0);
	assert_int_equal(agent_std_mask(&s, 2), AGENT_STD_ERR);
	assert_int_equal(agent_std_parse("4", &s, err, sizeof(err)), DL_EINVAL);
	assert_int_equal(agent_std_parse("0:x", &s, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "0:x"));
	assert_int_equal(agent_std_parse("", &s, err, sizeof(err)), DL_EINVAL);
}

static void test_ranks(void **state)
{
	int r[4], n;
	char err[128];
	(void)state;
	assert_int_equal(agent_ranks_parse("0,2,5", r, 4, &n, err, sizeof(err)),
			 0);
	assert_int_equal(n, 3);
	assert_int_equal(r[2], 5);
	assert_int_equal(agent_ranks_parse("1,a", r, 4, &n, err, sizeof(err)),
			 DL_EINVAL);
	assert_int_equal(
	    agent_ranks_parse("1,2,3,4,5", r, 4, &n, err, sizeof(err)),
	    DL_ELIMIT);
}

struct collected {
	char lines[16][32];
	int n;
};

static void collect(void *arg, const char *line, size_t len)
{
	struct collected *c = arg;
	if (c->n < 16) {
		snprintf(c->lines[c->n], sizeof(c->lines[0]), "%.*s", (int)len,
			 line);
		c->n++;
	}
}

static void test_lines(void **state)
{
	struct agent_lines l;
	struct collected c;
	(void)state;
	memset(&c, 0, sizeof(c));
	assert_int_equal(agent_lines_init(&l, 8, collect, &c), 0);
	agent_lines_feed(&l, "ab\ncd", 5);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.lines[0], "ab");
	agent_lines_feed(&l, "e\n\n", 3);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.lines[1], "cde");
	assert_string_equal(c.lines[2], "");
	/* a 20-byte line with cap 8: pieces of 8, 8 and 4 */
	agent_lines_feed(&l, "0123456789abcdefghij\n", 21);
	assert_int_equal(c.n, 6);
	assert_string_equal(c.lines[3], "01234567");
	assert_string_equal(c.lines[4], "89abcdef");
	assert_string_equal(c.lines[5], "ghij");
	/* exactly the cap, then a newline: one line, no empty piece */
	agent_lines_feed(&l, "ABCDEFGH\n", 9);
	assert_int_equal(c.n, 7);
	assert_string_equal(c.lines[6], "ABCDEFGH");
	agent_lines_feed(&l, "tail", 4);
	assert_int_equal(c.n, 7);
	agent_lines_flush(&l);
	assert_int_equal(c.n, 8);
	assert_string_equal(c.lines[7], "tail");
	agent_lines_release(&l);
}

static void test_error_file(void **state)
{
	const char *nested =
	    "{\"message\": {\"message\": \"RuntimeError: boom\", "
	    "\"extraInfo\": {\"py_callstack\": \"Traceback: line 3\", "
	    "\"timestamp\": \"1763726400\"}}}";
	const char *flat = "{\"message\": \"plain failure\"}";
	char out[256];
	uint64_t ts = 0;
	(void)state;
	assert_int_equal(agent_error_file_message(nested, strlen(nested), out,
						  sizeof(out), &ts),
			 0);
	assert_string_equal(out, "RuntimeError: boom\nTraceback: line 3");
	assert_int_equal(ts, 1763726400ULL);
	assert_int_equal(agent_error_file_message(flat, strlen(flat), out,
						  sizeof(out), NULL),
			 0);
	assert_string_equal(out, "plain failure");
	assert_int_equal(
	    agent_error_file_message("{\"x\": 1}", 8, out, sizeof(out), NULL),
	    DL_EINVAL);
	assert_int_equal(
	    agent_error_file_message("not json", 8, out, sizeof(out), NULL),
	    DL_EINVAL);
}

/* The announced address: the route unless it is loopback or link-local,
 * then an interface (IPv4 first), else the route as it is. */
static void test_addr_pick(void **state)
{
	const char *ifs[] = {"fe80::1", "169.254.3.4", "2001:db8::7",
			     "10.1.2.3", "10.9.9.9"};
	const char *v6only[] = {"fe80::1", "2001:db8::7"};
	char out[AGENT_ADDR_MAX];
	(void)state;
	assert_true(agent_addr_is_loopback("127.0.1.1"));
	assert_true(agent_addr_is_loopback("127.0.0.1"));
	assert_true(agent_addr_is_loopback("::1"));
	assert_true(agent_addr_is_loopback("::ffff:127.0.0.1"));
	assert_false(agent_addr_is_loopback("10.0.0.1"));
	assert_false(agent_addr_is_loopback("128.0.0.1"));
	assert_false(agent_addr_is_loopback("node1"));
	/* a routable route is what is announced */
	assert_int_equal(
	    agent_addr_pick("192.168.1.5", ifs, 5, out, sizeof(out)),
	    AGENT_ADDR_ROUTE);
	assert_string_equal(out, "192.168.1.5");
	/* the head reached the server by a name that is loopback on it */
	assert_int_equal(agent_addr_pick("127.0.0.1", ifs, 5, out, sizeof(out)),
			 AGENT_ADDR_INTERFACE);
	assert_string_equal(out, "10.1.2.3");
	assert_int_equal(agent_addr_pick("::1", v6only, 2, out, sizeof(out)),
			 AGENT_ADDR_INTERFACE);
	assert_string_equal(out, "2001:db8::7");
	/* a link-local route is no better than loopback */
	assert_int_equal(
	    agent_addr_pick("169.254.0.9", ifs, 5, out, sizeof(out)),
	    AGENT_ADDR_INTERFACE);
	assert_string_equal(out, "10.1.2.3");
	/* nothing else on this host: a one-host job keeps loopback */
	assert_int_equal(agent_addr_pick("127.0.0.1", ifs, 2, out, sizeof(out)),
			 AGENT_ADDR_LOOPBACK);
	assert_string_equal(out, "127.0.0.1");
	/* no route known: the server takes the address it sees */
	assert_int_equal(agent_addr_pick("", ifs, 5, out, sizeof(out)),
			 AGENT_ADDR_SERVER);
	assert_string_equal(out, "");
}

/* The interface for gloo and NCCL: the one that holds the announced
 * address, only when the host name resolves to loopback alone (or not at
 * all) and the announced address is not loopback. */
static void test_addr_socket_ifname(void **state)
{
	const struct agent_addr_if ifs[] = {{"lo", "127.0.0.1"},
					    {"lo", "::1"},
					    {"eth0", "10.213.0.1"},
					    {"eth0", "fe80::1%eth0"},
					    {"ib0", "2001:db8::7"}};
	const char *debian[] = {"127.0.1.1"};
	const char *both[] = {"127.0.1.1", "10.213.0.1"};
	const char *other[] = {"192.168.7.7"};
	char out[32];
	(void)state;
	assert_string_equal(agent_addr_ifname("10.213.0.1", ifs, 5), "eth0");
	assert_string_equal(agent_addr_ifname("2001:DB8:0::7", ifs, 5), "ib0");
	assert_string_equal(agent_addr_ifname("fe80::1", ifs, 5), "eth0");
	assert_null(agent_addr_ifname("10.213.0.2", ifs, 5));
	assert_null(agent_addr_ifname("node1", ifs, 5));
	/* Debian's /etc/hosts: the host name is 127.0.1.1 */
	assert_int_equal(agent_addr_socket_ifname("10.213.0.1", debian, 1, ifs,
						  5, out, sizeof(out)),
			 1);
	assert_string_equal(out, "eth0");
	assert_int_equal(agent_addr_socket_ifname("2001:db8::7", debian, 1, ifs,
						  5, out, sizeof(out)),
			 1);
	assert_string_equal(out, "ib0");
	/* a host name that does not resolve: gloo falls back to loopback */
	assert_int_equal(agent_addr_socket_ifname("10.213.0.1", NULL, 0, ifs, 5,
						  out, sizeof(out)),
			 1);
	assert_string_equal(out, "eth0");
	/* a host name with a reachable address is left to the transports,
	 * whatever it is */
	assert_int_equal(agent_addr_socket_ifname("10.213.0.1", both, 2, ifs, 5,
						  out, sizeof(out)),
			 0);
	assert_string_equal(out, "");
	assert_int_equal(agent_addr_socket_ifname("10.213.0.1", other, 1, ifs,
						  5, out, sizeof(out)),
			 0);
	/* nothing better known: a loopback, unknown or foreign address */
	assert_int_equal(agent_addr_socket_ifname("127.0.0.1", debian, 1, ifs,
						  5, out, sizeof(out)),
			 0);
	assert_int_equal(
	    agent_addr_socket_ifname("", debian, 1, ifs, 5, out, sizeof(out)),
	    0);
	assert_int_equal(
	    agent_addr_socket_ifname(NULL, debian, 1, ifs, 5, out, sizeof(out)),
	    0);
	assert_int_equal(agent_addr_socket_ifname("10.9.9.9", debian, 1, ifs, 5,
						  out, sizeof(out)),
			 0);
	assert_int_equal(agent_addr_socket_ifname("head.example", debian, 1,
						  ifs, 5, out, sizeof(out)),
			 0);
	assert_string_equal(out, "");
}

/* GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME: each only where unset */
static void test_env_socket_ifname(void **state)
{
	char *empty[] = {NULL};
	char *gloo[] = {"GLOO_SOCKET_IFNAME=lo", NULL};
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	assert_null(env_get(env, "GLOO_SOCKET_IFNAME"));
	assert_null(env_get(env, "NCCL_SOCKET_IFNAME"));
	agent_env_free(env);
	e.socket_ifname = "eth0";
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	assert_string_equal(env_get(env, "GLOO_SOCKET_IFNAME"), "eth0");
	assert_string_equal(env_get(env, "NCCL_SOCKET_IFNAME"), "eth0");
	agent_env_free(env);
	assert_int_equal(agent_env_build(gloo, &e, &env), 0);
	assert_string_equal(env_get(env, "GLOO_SOCKET_IFNAME"), "lo");
	assert_int_equal(env_count(env, "GLOO_SOCKET_IFNAME"), 1);
	assert_string_equal(env_get(env, "NCCL_SOCKET_IFNAME"), "eth0");
	agent_env_free(env);
}

/* every variable at once: the most agent_env_build ever sets */
static void test_env_every_variable(void **state)
{
	char *empty[] = {NULL};
	struct agent_worker_env e = sample();
	char **env;
	size_t n = 0;
	(void)state;
	e.socket_ifname = "eth0";
	e.progress_file = "/tmp/x/progress";
	e.control_fd = 7;
	e.control_version = 1;
	e.site_dir = "/l/.dlaunch-site";
	e.pystack_file = "/l/pystack.txt";
	assert_int_equal(agent_env_build(empty, &e, &env), 0);
	while (env[n])
		n++;
	assert_int_equal(n, 29);
	assert_string_equal(env_get(env, "PYTHONPATH"), "/l/.dlaunch-site");
	assert_string_equal(env_get(env, "DLAUNCH_PYSTACK_FILE"),
			    "/l/pystack.txt");
	assert_string_equal(env_get(env, "DLAUNCH_CONTROL_FD"), "7");
	assert_string_equal(env_get(env, "DLAUNCH_CONTROL_VERSION"), "1");
	assert_string_equal(env_get(env, "OMP_NUM_THREADS"), "1");
	assert_string_equal(env_get(env, "GLOO_SOCKET_IFNAME"), "eth0");
	assert_string_equal(env_get(env, "DLAUNCH_PROGRESS_FILE"),
			    "/tmp/x/progress");
	assert_string_equal(env_get(env, "DLAUNCH_NODE_ID"), "nodeB");
	agent_env_free(env);
}

/* dlaunch's sitecustomize goes first on PYTHONPATH, the user's value
 * after it; an empty PYTHONPATH is left alone (and so is the stack file) */
static void test_env_pythonpath(void **state)
{
	char *user[] = {"PYTHONPATH=/u:/v", NULL};
	char *empty_pp[] = {"PYTHONPATH=", NULL};
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	e.site_dir = "/l/.dlaunch-site";
	e.pystack_file = "/l/pystack.txt";
	assert_int_equal(agent_env_build(user, &e, &env), 0);
	assert_string_equal(env_get(env, "PYTHONPATH"),
			    "/l/.dlaunch-site:/u:/v");
	agent_env_free(env);
	assert_int_equal(agent_env_build(empty_pp, &e, &env), 0);
	assert_string_equal(env_get(env, "PYTHONPATH"), "");
	assert_null(env_get(env, "DLAUNCH_PYSTACK_FILE"));
	agent_env_free(env);
	e.site_dir = NULL;
	assert_int_equal(agent_env_build(user, &e, &env), 0);
	assert_string_equal(env_get(env, "PYTHONPATH"), "/u:/v");
	assert_null(env_get(env, "DLAUNCH_PYSTACK_FILE"));
	agent_env_free(env);
}

/* no channel: neither variable, not even one the agent inherited (its
 * own agent's, when dlaunch runs as a worker) */
static void test_env_control_channel(void **state)
{
	char *base[] = {"DLAUNCH_CONTROL_FD=9", "DLAUNCH_CONTROL_VERSION=1",
			"KEEP=1", NULL};
	struct agent_worker_env e = sample();
	char **env;
	(void)state;
	assert_int_equal(agent_env_build(base, &e, &env), 0);
	assert_null(env_get(env, "DLAUNCH_CONTROL_FD"));
	assert_null(env_get(env, "DLAUNCH_CONTROL_VERSION"));
	assert_string_equal(env_get(env, "KEEP"), "1");
	agent_env_free(env);
	e.control_fd = 12;
	e.control_version = 1;
	assert_int_equal(agent_env_build(base, &e, &env), 0);
	assert_string_equal(env_get(env, "DLAUNCH_CONTROL_FD"), "12");
	agent_env_free(env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_env_exact),
	    cmocka_unit_test(test_env_defaults_only_if_unset),
	    cmocka_unit_test(test_env_progress_file),
	    cmocka_unit_test(test_std_spec),
	    cmocka_unit_test(test_ranks),
	    cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_error_file),
	    cmocka_unit_test(test_addr_pick),
	    cmocka_unit_test(test_addr_socket_ifname),
	    cmocka_unit_test(test_env_socket_ifname),
	    cmocka_unit_test(test_env_every_variable),
	    cmocka_unit_test(test_env_control_channel),
	    cmocka_unit_test(test_env_pythonpath),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
