/*
 * train_progress.h - dlaunch-train's sign of life for --progress-timeout.
 */
#ifndef DLAUNCH_TRAIN_PROGRESS_H
#define DLAUNCH_TRAIN_PROGRESS_H

/* train_progress_step: a step was completed; touches DLAUNCH_PROGRESS_FILE
 * (opened on the first call, created when missing) at most every 250 ms.
 * No-op without the variable. Not thread-safe: the training thread only. */
void train_progress_step(void);

#endif
