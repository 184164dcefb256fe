/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c - dlaunch-train: the training loop, its progress reports, the
 * stop signals and main (the command line: options.c; the process group
 * and its in-place re-form: reform.c; what a run holds and its set-up,
 * checkpoints and summary: run.h, run.c).
 *
 * Every rank runs the same loop in lockstep: the same global batch from the
 * same permutation (each rank its slice), the same all-reduced gradients
 * and the same optimizer step, so parameters stay identical everywhere and
 * rank 0 alone writes checkpoints. Collectives happen at points fixed by
 * the step count (buckets, window losses, end-of-epoch evaluation), never
 * by timing, which keeps ranks in step and runs reproducible.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "control.h"
#include "data.h"
#include "ddp.h"
#include "device.h"
#include "dist/dist.h"
#include "dist/dist_flight.h"
#include "mlp.h"
#include "optim.h"
#include "options.h"
#include "progress.h"
#include "reform.h"
#include "rng.h"
#include "run.h"
#include "sampler.h"
#include "dlaunch/buf.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"
#include "dlaunch/opt.h"
#include "dlaunch/parse.h"

#define EXIT_USAGE 2

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t sigterms; /* SIGTERMs received */
static uint64_t notice_ms;	       /* the first one's, 0: none yet */
static struct timespec first_term;     /* when the first one came */

/* SIGTERMs this close to the first are the same one delivered twice
 * (Slurm signals the step's processes, and srun forwards its copy) */
#define REPEAT_NS 1000000000LL

static void on_stop_signal(int sig)
{
	struct timespec now;
	stop_signal = sig;
	if (sig != SIGTERM || sigterms >= 2)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now); /* async-signal-safe */
	if (sigterms == 0) {
		first_term = now;
		sigterms = 1;
	} else if ((now.tv_sec - first_term.tv_sec) * 1000000000LL +
		       (now.tv_nsec - first_term.tv_nsec) >=
		   REPEAT_NS) {
		sigterms = 2;
	}
}

/* stopping: a signal ends the training. With an agent that preempts
 * (its welcome's preempt_grace_ms), the first SIGTERM is a notice (Slurm
 * signals every process of a step, the workers too): the agent is
 * picking the job's stop step and sends it as preempt. A second SIGTERM,
 * the agent closing the channel (it does before its own SIGTERM), or no
 * stop reached within the grace after the notice, stops as a SIGTERM
 * always did. */
static int stopping(struct run *r)
{
	uint64_t grace = control_preempt_grace_ms(r->ctl);
	if (!stop_signal)
		return 0;
	if (stop_signal != SIGTERM || sigterms > 1 || grace == 0)
		return 1;
	if (notice_ms == 0) {
		notice_ms = clock_now_ms();
		log_info("rank %d: SIGTERM taken as a notice of preemption: "
			 "training on until the agent's stop step",
			 r->rank);
	}
	return clock_now_ms() - notice_ms >= grace;
}

/* preempt_reached: the agent's stop step is reached (or passed, which
 * its margin should never let happen: then said, and this step saved) */
static int preempt_reached(struct run *r)
{
	uint64_t step;
	if (!control_preempt_step(r->ctl, &step) || r->step < step)
		return 0;
	if (r->step > step)
		log_warn("rank %d: preempted: already past the stop step %llu "
			 "at step %llu; saving this step",
			 r->rank, (unsigned long long)step,
			 (unsigned long long)r->step);
	r->preempted = 1;
	return 1;
}

static int env_int(const char *name, int def, int min, int max, int *out)
{
	const char *v = getenv(name);

	if (v == NULL || *v == '\0') {
		*out = def;
		return 0;
	}
	if (parse_int(v, min, max, out) != 0) {
		log_error("environment %s='%s' is not a number in %d..%d", name,
			  v, min, max);
		return -1;
	}
	return 0;
}

/* evaluate: each rank scores its slice of the test set; sums are
 * all-reduced so every rank gets the same accuracy. */
static int evaluate(struct run *r)
{
	size_t n = r->test.n;
	size_t lo = n * (size_t)r->rank / (size_t)r->world;
	size_t hi = n * ((size_t)r->rank + 1) / (size_t)r->world;

	dist_flight_set_phase(r->flight, "evaluate");
	double stats[3] = {0, 0, (double)(hi - lo)};
	int rc = 0;

	for (size_t i = lo; i < hi && rc == 0;) {
		size_t k = hi - i < (size_t)r->max_local ? hi - i
							 : (size_t)r->max_local;

		for (size_t j = 0; j < k; j++)
			r->idx[j] = (uint32_t)(i + j);
		data_gather(&r->test, r->idx, k, r->x, r->y);
		rc = mlp_evaluate(r->model, r->x, r->y, (int)k, stats);
		i += k;
	}
	if (rc == 0)
		rc = train_ddp_sum_host(r->ddp, stats, 3);
	if (rc == 0) {
		r->last_test_loss = stats[0] / stats[2];
		r->last_accuracy = stats[1] / stats[2];
	}
	return rc;
}

static void crash_hook(const struct run *r)
{
	static int armed = -1;
	static uint64_t at_step;
	int restart, crash_rank;

	if (armed < 0) {
		const char *v = getenv("DLAUNCH_TRAIN_CRASH_AT_STEP");

		armed = 0;
		if (v && parse_u64(v, 1, UINT64_MAX, &at_step) == 0 &&
		    env_int("TORCHELASTIC_RESTART_COUNT", 0, 0, INT_MAX,
			    &restart) == 0 &&
		    restart == 0 &&
		    env_int("DLAUNCH_TRAIN_CRASH_RANK", 0, 0, INT_MAX,
			    &crash_rank) == 0 &&
		    crash_rank == r->rank)
			armed = 1;
	}
	if (armed == 1 && r->step == at_step) {
		log_warn("DLAUNCH_TRAIN_CRASH_AT_STEP=%llu: killing myself",
			 (unsigned long long)at_step);
		raise(SIGKILL);
	}
}

/* lr_at: the learning rate of the step after `step` steps; a function of
 * the step alone, so a resumed run continues the same schedule. */
static float lr_at(const struct train_options *o, uint64_t step, uint64_t total)
{
	const double pi = 3.14159265358979323846;

	if (!o->cosine || total == 0)
		return (float)o->lr;
	return (float)(o->lr * 0.5 *
		       (1.0 + cos(pi * (double)step / (double)total)));
}

static void fmt_eta(double secs, char *out, size_t size)
{
	unsigned long s = secs > 0 ? (unsigned long)(secs + 0.5) : 0;

	if (s >= 3600)
		snprintf(out, size, "%luh%02lum", s / 3600, s / 60 % 60);
	else
		snprintf(out, size, "%lum%02lus", s / 60, s % 60);
}

/* The training loss since the last report: summed over this rank's
 * samples, averaged over every rank's when reported. */
struct loss_window {
	double sum[2]; /* loss sum, samples */
	uint64_t steps;
	uint64_t start_ns;
};

static void window_reset(struct loss_window *w)
{
	w->sum[0] = w->sum[1] = 0;
	w->steps = 0;
	w->start_ns = clock_now_ns();
}

/* window_reduce: r->last_loss = the window's mean loss over all ranks
 * (collective: every rank calls it at the same step). */
static int window_reduce(struct run *r, const struct loss_window *w)
{
	double wl[2] = {w->sum[0], w->sum[1]};
	int rc = train_ddp_sum_host(r->ddp, wl, 2);

	if (rc == 0)
		r->last_loss = wl[0] / wl[1];
	return rc;
}

/* train_step: one optimiser step on the next global batch; *local_n and
 * *global_n are the samples this rank and all ranks took, stats[0] this
 * rank's loss sum. */
static int train_step(struct run *r, float lr, size_t *local_n,
		      size_t *global_n, double stats[2])
{
	const struct train_options *o = &r->o;
	uint64_t offset = r->offset;
	int rc, rc2;

	if (r->bn_before)
		r->be.copy(r->be.ctx, r->bn_before, mlp_buffers(r->model),
			   r->bn_bytes);

	r->offset =
	    train_sampler_batch(&r->sampler, r->offset, o->global_batch,
				r->rank, r->world, r->idx, local_n, global_n);
	data_gather(&r->train, r->idx, *local_n, r->x, r->y);
	rc = mlp_train_step(r->model, r->x, r->y, (int)*local_n, (int)*global_n,
			    train_ddp_hooks(r->ddp), stats);
	rc2 = train_ddp_finish(r->ddp);
	if (rc == 0)
		rc = rc2;
	if (rc != 0) {
		/* the step is dropped: nothing of it stays applied */
		r->offset = offset;
		if (r->bn_before)
			r->be.copy(r->be.ctx, mlp_buffers(r->model),
				   r->bn_before, r->bn_bytes);
		if (!control_in_place(r->ctl))
			log_error("rank %d: step %llu failed: %s", r->rank,
				  (unsigned long long)r->step + 1,
				  dl_strerror(rc));
		return rc;
	}
	train_optim_step(&r->optim, mlp_params(r->model), mlp_grads(r->model),
			 lr);
	r->step++;
	return 0;
}

/* end_epoch: scores the epoch just finished, reports it and moves on to
 * the next one. */
static int end_epoch(struct run *r, struct loss_window *w)
{
	const struct train_options *o = &r->o;
	int rc = evaluate(r);

	if (rc == 0 && w->steps)
		rc = window_reduce(r, w);
	if (rc != 0)
		return rc;
	if (r->rank == 0) {
		printf("epoch %llu/%llu done: step %llu train loss %.4f test "
		       "loss %.4f test accuracy %.2f%%\n",
		       (unsigned long long)r->epoch + 1,
		       (unsigned long long)o->epochs,
		       (unsigned long long)r->step, r->last_loss,
		       r->last_test_loss, 100.0 * r->last_accuracy);
		fflush(stdout);
	}
	r->epoch++;
	r->offset = 0;
	train_sampler_set_epoch(&r->sampler, r->epoch);
	window_reset(w);
	r->evaluated_at_end = 1;
	return 0;
}

/* report_progress: the loss, rate and time left since the last report */
static int report_progress(struct run *r, struct loss_window *w,
			   uint64_t total_steps)
{
	const struct train_options *o = &r->o;
	double secs = (double)(clock_now_ns() - w->start_ns) / 1e9;
	double rate = (double)w->steps * o->global_batch / secs;
	char eta[32];
	int rc;

	dist_flight_set_phase(r->flight, "report");
	rc = window_reduce(r, w);

	if (rc != 0)
		return rc;
	fmt_eta((double)(total_steps - r->step) * o->global_batch / rate, eta,
		sizeof(eta));
	if (r->rank == 0) {
		printf(
		    "epoch %llu/%llu step %llu/%llu loss %.4f samples/s "
		    "%.0f eta %s\n",
		    (unsigned long long)r->epoch + 1,
		    (unsigned long long)o->epochs, (unsigned long long)r->step,
		    (unsigned long long)total_steps, r->last_loss, rate, eta);
		fflush(stdout);
	}
	window_reset(w);
	return 0;
}

static int train(struct run *r, double *train_secs, uint64_t *samples)
{
	const struct train_options *o = &r->o;
	size_t steps_per_epoch =
	    train_sampler_steps(r->train.n, o->global_batch);
	uint64_t total_steps = steps_per_epoch * o->epochs;
	uint64_t schedule_steps = total_steps; /* --max-steps does not stretch
						* or cut the schedule */
	uint64_t t_train_ns = 0;
	struct loss_window w;
	int rc = 0;

	if (o->max_steps && o->max_steps < total_steps)
		total_steps = o->max_steps;
	window_reset(&w);
	train_sampler_set_epoch(&r->sampler, r->epoch);
	/* set up: the first step has the whole timeout */
	train_progress_touch();
	while (r->step < total_steps && r->epoch < o->epochs) {
		size_t local_n, global_n;
		double stats[2] = {0, 0};
		uint64_t t0 = clock_now_ns(), round;

		if (stopping(r) || preempt_reached(r))
			break;
		/* what a dump tells of this thread (dist_flight.h) */
		dist_flight_set_step(r->flight, (int64_t)r->step + 1);
		dist_flight_set_phase(r->flight, "train_step");
		if (control_abort_pending(r->ctl, &round)) {
			rc = reform_aborts(r);
			if (rc != 0)
				return rc;
			window_reset(&w);
			continue;
		}
		rc = train_step(r, lr_at(o, r->step, schedule_steps), &local_n,
				&global_n, stats);
		if (rc != 0) {
			rc = reform_recover(r, rc);
			if (rc != 0)
				return rc;
			window_reset(&w);
			continue;
		}
		control_send_step(r->ctl, r->step);
		t_train_ns += clock_now_ns() - t0;
		*samples += global_n;
		w.sum[0] += stats[0];
		w.sum[1] += (double)local_n;
		w.steps++;
		train_progress_touch(); /* every rank: the agent's hang check */
		crash_hook(r);

		if (r->offset >= r->train.n) {
			rc = end_epoch(r, &w);
		} else {
			r->evaluated_at_end = 0;
			if (w.steps >= o->log_every)
				rc = report_progress(r, &w, total_steps);
		}
		if (rc != 0) { /* the step stands; its report is lost */
			rc = reform_recover(r, rc);
			window_reset(&w);
		}
		if (rc == 0 && o->checkpoint_every &&
		    r->step % o->checkpoint_every == 0)
			rc = run_save_checkpoint(r);
		if (rc != 0)
			return rc;
	}
	if (w.steps && !stopping(r) && !r->preempted) {
		dist_flight_set_phase(r->flight, "report");
		rc = window_reduce(r, &w);
		if (rc != 0)
			rc = reform_recover(r, rc);
		if (rc != 0)
			return rc;
	}
	*train_secs += (double)t_train_ns / 1e9;
	return 0;
}

/* dump_members: the agent's dump (control.h) shows the flight recorder
 * and where the training thread is; runs on the channel's reader */
static int dump_members(void *ctx, struct buf *out)
{
	return dist_flight_format_dump(ctx, out);
}

/* pick_blas_kernels: OpenBLAS chooses its kernels from CPUID when it is
 * loaded, before main; on a CPU model it does not know it falls back to
 * SSE3 kernels that are 1.5-3x slower here. Re-executing once with
 * OPENBLAS_CORETYPE set fixes that (same pid, same arguments); if the exec
 * fails we carry on with the slow kernels. */
static void pick_blas_kernels(char **argv)
{
	const char *core = train_backend_cpu_better_core();

	if (core == NULL || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
		return;
	execv("/proc/self/exe", argv);
	log_warn("cannot re-execute with OPENBLAS_CORETYPE=%s: %s", core,
		 strerror(errno));
}

int main(int argc, char **argv)
{
	struct run r;
	struct sigaction sa;
	double train_secs = 0;
	uint64_t samples = 0, t_start;
	int rc, status = 1;

	log_init("dlaunch-train");
	memset(&r, 0, sizeof(r));
	rc = train_options_parse(argc, argv, &r.o);
	if (rc != 0)
		return rc > 0 ? 0 : EXIT_USAGE;
	if (env_int("LOCAL_RANK", 0, 0, 65535, &r.local_rank) != 0 ||
	    env_int("LOCAL_WORLD_SIZE", r.local_rank + 1, 1, 65536,
		    &r.local_world) != 0)
		return EXIT_USAGE;
	if (r.o.device != DEVICE_CUDA)
		pick_blas_kernels(argv);
	/* after the re-exec above, which must not lose the descriptor */
	{
		char err[256];
		uint64_t round = 0;
		const char *v = getenv("DLAUNCH_ROUND");

		if (dist_flight_from_env(&r.flight, err, sizeof(err)) != 0) {
			log_error("%s", err);
			return EXIT_USAGE;
		}
		dist_flight_set_phase(r.flight, "setup");
		/* a channel that cannot be used leaves a plain worker, which
		 * is what the agent makes of one that never says hello */
		if (control_open(&r.ctl, err, sizeof(err)) != 0)
			log_warn("%s; going on without the control channel",
				 err);
		control_set_dump_hook(r.ctl, dump_members, r.flight);
		if (v && *v && parse_u64(v, 0, INT64_MAX, &round) == 0)
			r.round = round;
	}
	r.stopping = stopping;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	t_start = clock_now_ms();

	rc = run_setup_device(&r);
	if (rc == 0)
		rc = reform_join_group(&r, NULL);
	if (rc == 0)
		rc = run_load_data(&r);
	if (rc != 0)
		goto out;
	rc = run_setup_model(&r);
	if (rc != 0)
		goto out;
	train_rng_seed(&r.rng, r.o.seed, 0x747261696eULL /* "train" */);
	rc = reform_sampler_for_state(&r);
	if (rc == 0 && r.o.checkpoint_dir)
		rc = run_load_local(&r);
	if (rc == 0) {
		struct control_agreement ag;

		rc = reform_agree(&r, &ag);
		if (rc == 0) {
			r.resumed_from = r.step;
			if (r.rank == 0 && r.step > 0)
				printf("resumed from %s: step %llu, epoch "
				       "%llu, sample %llu of the epoch\n",
				       ag.received ? "a peer's state"
						   : r.ckpt_file,
				       (unsigned long long)r.step,
				       (unsigned long long)r.epoch + 1,
				       (unsigned long long)r.offset);
		} else {
			rc = reform_recover(&r, rc);
		}
	}
	if (rc == 0)
		rc = reform_sampler_for_state(&r);
	if (rc != 0)
		goto out;
	if (r.rank == 0)
		run_print_banner(&r);

	for (;;) { /* again when a re-form interrupts the last evaluation */
		rc = train(&r, &train_secs, &samples);
		if (rc != 0 || r.evaluated_at_end || stopping(&r) ||
		    r.preempted)
			break;
		rc = evaluate(&r);
		if (rc == 0)
			break;
		rc = reform_recover(&r, rc);
		if (rc != 0)
			break;
	}
	if (rc != 0)
		goto out;
	rc = run_save_checkpoint(&r);
	if (rc != 0)
		goto out;
	dist_flight_set_phase(r.flight, "finish");
	/* work queued after the last copy back (the final SGD step) that
	 * failed on the GPU fails the run too (the CPU's sync is a no-op) */
	rc = r.be.sync(r.be.ctx);
	if (rc != 0) {
		log_error("rank %d: the %s backend failed: %s", r.rank,
			  r.be.name, dl_strerror(rc));
		goto out;
	}
	if (r.preempted) {
		/* every rank says it: a test reads them all */
		printf("rank %d: preempted: stopped after step %llu%s\n",
		       r.rank, (unsigned long long)r.step,
		       r.rank == 0 && r.o.checkpoint_dir ? ", checkpoint saved"
							 : "");
		fflush(stdout);
		status = 0;
		goto out;
	}
	if (stopping(&r)) {
		log_warn("stopped by signal %d at step %llu", (int)stop_signal,
			 (unsigned long long)r.step);
		goto out;
	}
	if (r.rank == 0)
		run_print_summary(&r, train_secs, samples,
				  (double)(clock_now_ms() - t_start) / 1e3);
	status = 0;
out:
	run_release(&r);
	return status;
}
