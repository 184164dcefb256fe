/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_launcher.c - dlaunch's command line: both spellings, PET_*
 * variables, --nnodes ranges, --rdzv-conf, --progress-timeout, refusals,
 * worker argv, and the defaults (launcher_options_init's agree with
 * agent_config_init's, and --help shows each). --rdzv-backend etcd is
 * test_launcher_etcd's.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "dlaunch/error.h"
#include "../../launcher/launcher.h"
#include "dlaunch/opt.h"
#include "launcher_fix.h"

static void test_spellings(void **state)
{
	struct launcher_options o;
	char err[256];
	(void)state;
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--nproc-per-node",
			       "4", "--max_restarts=2", "--nnodes=2:4",
			       "--rdzv_endpoint", "h:1", "--rdzv-id=job",
			       "train.py", "--lr", "1", NULL),
			 0);
	assert_int_equal(o.nproc_kind, LAUNCHER_NPROC_N);
	assert_int_equal(o.cfg.nproc, 4);
	assert_int_equal(o.cfg.max_restarts, 2);
	assert_int_equal(o.cfg.min_nodes, 2);
	assert_int_equal(o.cfg.max_nodes, 4);
	assert_string_equal(o.cfg.endpoint, "h:1");
	assert_string_equal(o.cfg.run_id, "job");
	assert_int_equal(o.n_program, 3);
	assert_string_equal(o.program[0], "train.py");
	assert_string_equal(o.program[1], "--lr"); /* the program's own */
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--nproc_per_node=gpu", "-m", "pkg.mod", NULL),
			 0);
	assert_int_equal(o.nproc_kind, LAUNCHER_NPROC_GPU);
	assert_int_equal(o.module, 1);
}

static void test_pet_env(void **state)
{
	struct launcher_options o;
	char err[256];
	char *env[] = {"PET_NPROC_PER_NODE=3", "PET_MAX_RESTARTS=5",
		       "PET_STANDALONE=1", NULL};
	char *bad[] = {"PET_MAX_RESTARTS=lots", NULL};
	(void)state;
	assert_int_equal(parse(&o, env, err, sizeof(err), "prog", NULL), 0);
	assert_int_equal(o.nproc_kind, LAUNCHER_NPROC_N);
	assert_int_equal(o.cfg.nproc, 3);
	assert_int_equal(o.cfg.max_restarts, 5);
	assert_int_equal(o.standalone, 1);
	/* the command line wins over PET_* */
	assert_int_equal(parse(&o, env, err, sizeof(err), "--max-restarts", "1",
			       "prog", NULL),
			 0);
	assert_int_equal(o.cfg.max_restarts, 1);
	assert_int_equal(parse(&o, bad, err, sizeof(err), "prog", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "PET_MAX_RESTARTS"));
}

/* an option dlaunch refuses is refused from its PET_* variable too, never
 * silently ignored */
static void test_pet_refused(void **state)
{
	struct launcher_options o;
	char err[256];
	char *logs_specs[] = {"PET_LOGS_SPECS=foo", NULL};
	(void)state;
	assert_int_equal(parse(&o, logs_specs, err, sizeof(err), "prog", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--logs-specs is not supported"));
	assert_non_null(strstr(err, "PET_LOGS_SPECS"));
}

/* --run-path (and PET_RUN_PATH) runs any script under python, also with
 * --no-python; it cannot be combined with -m; PET_RUN_PATH=0 asks for
 * nothing */
static void test_run_path(void **state)
{
	struct launcher_options o;
	char err[256];
	char **argv;
	char *on[] = {"PET_RUN_PATH=1", NULL};
	char *off[] = {"PET_RUN_PATH=0", NULL};
	char *bad[] = {"PET_RUN_PATH=maybe", NULL};
	(void)state;
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--run-path",
			       "job/main", "--lr", "1", NULL),
			 0);
	assert_int_equal(o.run_path, 1);
	argv = launcher_worker_argv(&o, "/opt/py");
	assert_string_equal(argv[0], "/opt/py");
	assert_string_equal(argv[1], "-u");
	assert_string_equal(argv[2], "job/main");
	assert_string_equal(argv[3], "--lr");
	assert_string_equal(argv[4], "1");
	assert_null(argv[5]);
	free(argv);
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--run_path", "t.py", NULL), 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[2], "t.py");
	free(argv);
	assert_int_equal(parse(&o, on, err, sizeof(err), "job/main", NULL), 0);
	assert_int_equal(o.run_path, 1);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "python3");
	free(argv);
	assert_int_equal(parse(&o, off, err, sizeof(err), "job/main", NULL), 0);
	assert_int_equal(o.run_path, 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "job/main");
	free(argv);
	assert_int_equal(parse(&o, bad, err, sizeof(err), "job/main", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "PET_RUN_PATH"));
	/* torchrun: --run_path "takes precedence over --no_python" */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--no-python",
			       "--run-path", "x", NULL),
			 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[2], "x");
	free(argv);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--run-path", "-m",
			       "pkg", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "-m/--module"));
}

static void test_rdzv_conf(void **state)
{
	struct launcher_options o;
	char err[256];
	(void)state;
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--rdzv-endpoint", "h:1",
		  "--rdzv-conf",
		  "join_timeout=30,last_call_timeout=0.5,heartbeat_interval="
		  "200ms,heartbeat_timeout=2,read_timeout=10s,node_id=n-1",
		  "p", NULL),
	    0);
	assert_int_equal(o.cfg.join_timeout_ms, 30000);
	assert_int_equal(o.cfg.last_call_timeout_ms, 500);
	assert_int_equal(o.cfg.heartbeat_interval_ms, 200);
	assert_int_equal(o.cfg.heartbeat_timeout_ms, 2000);
	assert_int_equal(o.cfg.read_timeout_ms, 10000);
	assert_string_equal(o.node_id, "n-1");
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "store_type=x", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "store_type"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "join_timeout=soon", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "join_timeout"));
}

static void test_refusals(void **state)
{
	struct launcher_options o;
	char err[256];
	(void)state;
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--logs-specs", "x", "p", NULL),
	    DL_EINVAL);
	assert_non_null(strstr(err, "--logs-specs"));
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--bogus", "p", NULL),
	    DL_EINVAL);
	assert_non_null(strstr(err, "--bogus"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-backend",
			       "zookeeper", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--rdzv-backend 'zookeeper' is not static, "
				    "c10d, dlaunch, etcd, etcd-v1, etcd-v2 or "
				    "etcd-v3"));
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--nnodes", "3:2", "p", NULL),
	    DL_EINVAL);
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--nnodes", "1:2", "p", NULL),
	    DL_EINVAL); /* a range needs a rendezvous */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--nnodes", "2",
			       "--node-rank", "2", "p", NULL),
			 DL_EINVAL);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--standalone",
			       "--nnodes", "2", "p", NULL),
			 DL_EINVAL);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--nproc-per-node",
			       "0", "p", NULL),
			 DL_EINVAL);
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--max-restarts", NULL),
	    DL_EINVAL);
	assert_non_null(strstr(err, "needs a value"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err), NULL), DL_EINVAL);
	assert_non_null(strstr(err, "no program"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--signals-to-handle", "SIGKILL", "p", NULL),
			 DL_EINVAL);
}

static void test_static_and_signals(void **state)
{
	struct launcher_options o;
	char err[256];
	(void)state;
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--nnodes", "2",
			       "--node-rank", "1", "--master-addr", "10.1.1.1",
			       "--master-port", "1234", "--signals-to-handle",
			       "SIGUSR1,TERM", "--shutdown-timeout", "500ms",
			       "p", NULL),
			 0);
	assert_int_equal(o.cfg.node_rank, 1);
	assert_string_equal(o.cfg.master_addr, "10.1.1.1");
	assert_int_equal(o.cfg.master_port, 1234);
	assert_int_equal(o.signals[0], SIGUSR1);
	assert_int_equal(o.signals[1], SIGTERM);
	assert_int_equal(o.signals[2], 0);
	assert_int_equal(o.cfg.shutdown_timeout_ms, 500);
	assert_int_equal(o.rdzv_backend, LAUNCHER_BACKEND_STATIC);
	assert_int_equal(o.cfg.mode, AGENT_MODE_STATIC);
}

static void test_progress_timeout(void **state)
{
	struct launcher_options o;
	char err[256];
	char *pet[] = {"PET_PROGRESS_TIMEOUT=45", NULL};
	char *bad_pet[] = {"PET_PROGRESS_TIMEOUT=never", NULL};
	(void)state;
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "p", NULL), 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 0); /* off */
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "30s", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 30000);
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress_timeout=1.5", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 1500);
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "500ms", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 500);
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "0", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 0);
	/* --rdzv-conf spelling; the later one wins */
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "progress_timeout=2m", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 120000);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "progress_timeout=2m", "--progress-timeout", "3",
			       "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 3000);
	/* PET_PROGRESS_TIMEOUT, overridden by the command line */
	assert_int_equal(parse(&o, pet, err, sizeof(err), "p", NULL), 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 45000);
	assert_int_equal(parse(&o, pet, err, sizeof(err), "--progress-timeout",
			       "250ms", "p", NULL),
			 0);
	assert_int_equal(o.cfg.progress_timeout_ms, 250);
	/* refusals name the option */
	assert_int_equal(parse(&o, bad_pet, err, sizeof(err), "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "PET_PROGRESS_TIMEOUT"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "-1", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "--progress-timeout"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "30 s", "p", NULL),
			 DL_EINVAL);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "--rdzv-conf",
			       "progress_timeout=soon", "p", NULL),
			 DL_EINVAL);
	assert_non_null(strstr(err, "progress_timeout"));
	assert_int_equal(parse(&o, no_env, err, sizeof(err),
			       "--progress-timeout", "169h", "p", NULL),
			 DL_EINVAL); /* a week at most */
}

static void test_worker_argv(void **state)
{
	struct launcher_options o;
	char err[256];
	char **argv;
	(void)state;
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "train.py", "-x", NULL), 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "python3");
	assert_string_equal(argv[1], "-u");
	assert_string_equal(argv[2], "train.py");
	assert_string_equal(argv[3], "-x");
	assert_null(argv[4]);
	free(argv);
	argv = launcher_worker_argv(&o, "/opt/py");
	assert_string_equal(argv[0], "/opt/py");
	free(argv);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "-m", "pkg", NULL),
			 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[2], "-m");
	assert_string_equal(argv[3], "pkg");
	free(argv);
	assert_int_equal(
	    parse(&o, no_env, err, sizeof(err), "--no-python", "run.py", NULL),
	    0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "run.py");
	free(argv);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "/bin/true", NULL),
			 0);
	argv = launcher_worker_argv(&o, NULL);
	assert_string_equal(argv[0], "/bin/true");
	free(argv);
}

/* the defaults: an empty command line gets launcher_options_init's values,
 * whose agent settings are agent_config_init's, and --help shows each of
 * them as text that parses back to the value used */
static void test_defaults(void **state)
{
	struct launcher_options d, o;
	struct agent_config c;
	char err[256];
	(void)state;
	launcher_options_init(&d);
	agent_config_init(&c);
	c.node_id = d.cfg.node_id;
	c.ranks_filter = d.cfg.ranks_filter;
	c.signals = d.cfg.signals;
	assert_memory_equal(&c, &d.cfg, sizeof(c));
	assert_int_equal(opt_check_defaults(launcher_option_table(), &d,
					    sizeof(d), err, sizeof(err)),
			 0);
	assert_int_equal(parse(&o, no_env, err, sizeof(err), "p", NULL), 0);
	o.cfg.node_id = d.cfg.node_id;
	o.cfg.ranks_filter = d.cfg.ranks_filter;
	o.cfg.signals = d.cfg.signals;
	o.program = NULL;
	o.n_program = 0;
	assert_memory_equal(&o, &d, sizeof(o));
}

/* squeeze_lines undoes the help's wrapping: a newline and the indent
 * after it become one space. */
static void squeeze_lines(char *text)
{
	char *w = text;
	for (const char *r = text; *r; r++) {
		if (*r == '\n') {
			*w++ = ' ';
			r += strspn(r + 1, " ");
			continue;
		}
		*w++ = *r;
	}
	*w = '\0';
}

/* --help lists every option the table has, each with its default */
static void test_help_shows_defaults(void **state)
{
	const struct opt_spec *s;
	struct launcher_options d;
	char *text = NULL, want[512], def[256];
	size_t len = 0;
	FILE *fp = open_memstream(&text, &len);
	(void)state;
	assert_non_null(fp);
	launcher_usage(fp);
	fclose(fp);
	squeeze_lines(text);
	launcher_options_init(&d);
	for (s = launcher_option_table()->specs; s->name; s++) {
		snprintf(want, sizeof(want), "--%s", s->name);
		assert_non_null(strstr(text, want));
		opt_format_default(s, &d, def, sizeof(def));
		if (!def[0])
			continue;
		snprintf(want, sizeof(want), "(default: %s)", def);
		if (!strstr(text, want))
			fail_msg("--help lacks '%s' for --%s", want, s->name);
	}
	assert_non_null(strstr(text, "(default: 1:1)"));
	assert_non_null(strstr(text, "(default: 30s)"));
	assert_non_null(
	    strstr(text, "(default: SIGTERM,SIGINT,SIGHUP,SIGQUIT)"));
	assert_non_null(strstr(text, "Not supported (refused): --logs-specs."));
	/* the etcd backend, its spellings and its --rdzv-conf keys */
	assert_non_null(strstr(text, "etcd (etcd-v1, etcd-v2 and etcd-v3 are "
				     "taken as etcd)"));
	assert_non_null(strstr(text, "port 2379 when omitted"));
	for (const char *const *k =
		 (const char *const[]){
		     "protocol (http or https", "cacert (", "cert and key (",
		     "username and "
		     "password_file (",
		     "lease_ttl (whole seconds, 2-3600", NULL};
	     *k; k++)
		if (!strstr(text, *k))
			fail_msg("--help lacks '%s'", *k);
	snprintf(want, sizeof(want),
		 "key_prefix (where the job's keys live; "
		 "default %s)",
		 d.cfg.etcd.key_prefix);
	if (!strstr(text, want))
		fail_msg("--help lacks '%s'", want);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_spellings),
	    cmocka_unit_test(test_pet_env),
	    cmocka_unit_test(test_pet_refused),
	    cmocka_unit_test(test_rdzv_conf),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_static_and_signals),
	    cmocka_unit_test(test_progress_timeout),
	    cmocka_unit_test(test_worker_argv),
	    cmocka_unit_test(test_run_path),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_help_shows_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
