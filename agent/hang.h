/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hang.h - hang diagnosis, the agent's side (docs/hangs.md): collect a
 * node report from every worker of this node (state, CPU, wait channel,
 * step, Python and native stacks, the collective flight recorder), send
 * it to the rendezvous, gather every node's, run the analysis
 * (include/dlaunch/hang.h) and print the verdict.
 *
 *   hang_proc.c     /proc readers and the report's text helpers (pure)
 *   hang_collect.c  one node's collection, each part with a deadline, on
 *                   the agent's loop (helper processes run async)
 *   hang_site.c     the sitecustomize that lets a plain Python worker
 *                   print its threads' stacks on SIGUSR2
 *   hang.c          triggers, transport through the backend, analysis,
 *                   files and the verdict
 */
#ifndef DLAUNCH_AGENT_HANG_H
#define DLAUNCH_AGENT_HANG_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlaunch/hang.h"

struct agent;
struct agent_worker;

#define HANG_TEXT_MAX	       (32 * 1024)  /* bytes in one text field */
#define HANG_REPORT_MAX	       (512 * 1024) /* bytes in one node report */
#define HANG_ID_MAX	       DL_HANG_ID_MAX
#define HANG_CUT_MARK	       "...[cut]"
#define HANG_CPU_INTERVAL_MS   300  /* CPU use is measured over this */
#define HANG_PYTHON_TIMEOUT_MS 2000 /* a Python dump's deadline */
#define HANG_NATIVE_TIMEOUT_MS 3000 /* eu-stack's or gdb's deadline */
#define HANG_GATHER_MS	       5000 /* waiting for the other nodes */
#define HANG_PY_SIGNAL	       SIGUSR2
#define HANG_PYSTACK_FILE      "pystack.txt" /* in the worker's log dir */
#define HANG_DUMP_FILE	       "dump.json"   /* the control channel's */
#define HANG_SITE_DIR	       ".dlaunch-site"

/* ---- hang_proc.c ---- */

/* What /proc says of a process now. */
struct hang_proc {
	char state;	    /* the letter of /proc/PID/stat */
	uint64_t cpu_ticks; /* utime + stime */
	int threads;
	char wchan[64]; /* "" when none or unreadable */
};

/* hang_proc_read: 0, or -1 when pid is gone */
int hang_proc_read(pid_t pid, struct hang_proc *p);

/* hang_proc_tracer: the pid that ptrace-traces pid (TracerPid), its
 * name into comm (may be ""); 0 when none or unreadable */
pid_t hang_proc_tracer(pid_t pid, char *comm, size_t comm_size);

/* hang_proc_threads: the threads of pid other than its leader that are
 * not zombies, described into out ("tid 12 sleeping (S) in
 * do_sys_poll, ..."), the first of them into *live_tid (0: none).
 * Returns how many there are. */
int hang_proc_threads(pid_t pid, char *out, size_t size, pid_t *live_tid);

/* hang_state_name: the report's name of a /proc state letter:
 * "running", "sleeping", "disk-sleep", "stopped", "tracing-stop",
 * "zombie", "dead"; unknown letters are "running" only for R, else
 * "sleeping" (idle kernel-ish states) */
const char *hang_state_name(char letter);

/* hang_text makes a JSON string of len bytes of s: invalid UTF-8 bytes
 * become '?', NULs are dropped, and text over max bytes keeps its first
 * part, cut at a character boundary, followed by HANG_CUT_MARK. */
json_t *hang_text(const char *s, size_t len, size_t max);

/* hang_id_valid: 1-64 of [A-Za-z0-9._:-] (dl_hang_id_valid, which the
 * etcd backend, agent/etcd/, uses without this header) */
static inline int hang_id_valid(const char *id)
{
	return dl_hang_id_valid(id);
}

/* hang_report_bound cuts report (a node report) until its encoding is
 * at most max bytes: the largest of its workers' "native", then
 * "python" texts first (halved, with the cut mark), then their "flight"
 * arrays (older entries dropped). Returns 0, or -1 when it cannot get
 * under max. */
int hang_report_bound(json_t *report, size_t max);

/* ---- hang_site.c ---- */

/* hang_site_dir writes the sitecustomize directory under log_dir (made
 * once per agent) and puts its path into out. 0 or -1 (logged). */
int hang_site_dir(const char *log_dir, char *out, size_t size);

/* ---- hang_collect.c ---- */

struct hang_collect;

/* called once the collection is over, with the node report (owned by
 * the callee) */
typedef void (*hang_collect_cb)(struct agent *a, json_t *report);

/* hang_collect_start collects this node's report for trigger (borrowed,
 * copied) from the round's workers; done follows on the loop, within
 * HANG_CPU_INTERVAL_MS + HANG_NATIVE_TIMEOUT_MS and a little. NULL when
 * out of memory. */
struct hang_collect *hang_collect_start(struct agent *a, json_t *trigger,
					hang_collect_cb done);
/* hang_collect_free kills what it still runs and frees it; no callback */
void hang_collect_free(struct hang_collect *c);
/* hang_collect_reaped: pid (just reaped with status) was one of the
 * collection's helpers; 1 when so */
int hang_collect_reaped(struct hang_collect *c, pid_t pid, int status);
/* hang_collect_owns: pid is a live helper of the collection */
int hang_collect_owns(const struct hang_collect *c, pid_t pid);
/* hang_collect_dumped: worker w answered `dumped` with id */
void hang_collect_dumped(struct hang_collect *c, struct agent_worker *w,
			 const char *id);

/* ---- hang.c ---- */

/* The agent's hang state (struct agent.hang). */
struct agent_hang;

int hang_new(struct agent *a);
void hang_free(struct agent *a);

/* hang_diagnose starts a job-wide diagnosis of kind ("progress-timeout",
 * "stall") found on this node. failures (a JSON array, taken; NULL:
 * none) are posted as WORKER_FAILED once it is over (or at once when one
 * is under way for them already, and it ends), each message followed by
 * the verdict; that is the kill and restart of today. */
void hang_diagnose(struct agent *a, const char *kind, json_t *failures);

/* hang_on_trigger: the rendezvous says a trigger is open (a dump asked
 * for by another node or by `dlaunch dump`): collect and report for it
 * once. trigger is borrowed. */
void hang_on_trigger(struct agent *a, json_t *trigger);

/* hang_busy: a diagnosis is under way; hang_failing: one whose end
 * posts failures (of --progress-timeout or a stall) */
int hang_busy(const struct agent *a);
int hang_failing(const struct agent *a);

/* hang_round_hung: this node printed the verdict of a hang (a trigger
 * of --progress-timeout or a stall, this node's or another's) in the
 * round now running: its workers are stopped with SIGKILL, not SIGTERM
 * (docs/hangs.md, "After the verdict") */
int hang_round_hung(const struct agent *a);

/* hang_last_reason: the last verdict's sentence, or NULL */
const char *hang_last_reason(const struct agent *a);

/* hooks for the rest of the agent: a helper process was reaped (1 when
 * it was ours), whether pid is a live helper, a `dumped` answer */
int hang_reaped(struct agent *a, pid_t pid, int status);
int hang_owns(const struct agent *a, pid_t pid);
void hang_dumped(struct agent_worker *w, const char *id);

#endif
