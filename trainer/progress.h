/* SPDX-License-Identifier: Apache-2.0 */
/*
 * progress.h - dlaunch-train shows the agent it is alive.
 *
 * The agent's hang detection (--progress-timeout) counts a worker's output
 * or a touch of its DLAUNCH_PROGRESS_FILE as progress. Only rank 0 of
 * dlaunch-train prints, and seldom, so every rank touches the file as it
 * finishes a step (at most every TRAIN_PROGRESS_EVERY_MS).
 */
#ifndef DLAUNCH_TRAIN_PROGRESS_H
#define DLAUNCH_TRAIN_PROGRESS_H

#define TRAIN_PROGRESS_EVERY_MS 100

/* train_progress_touch marks progress: sets the progress file's mtime to
 * now, creating the file on first use. Without DLAUNCH_PROGRESS_FILE (not
 * run by an agent, or no --progress-timeout) it does nothing; a file that
 * cannot be opened is reported once and then ignored. */
void train_progress_touch(void);

#endif
