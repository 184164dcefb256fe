/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.h - what a failed worker's report is made of (report.c): the
 * pure parts, exposed for tests; private to agent/.
 */
#ifndef DLAUNCH_AGENT_REPORT_H
#define DLAUNCH_AGENT_REPORT_H
#include <stddef.h>
#include <stdint.h>

/*
 * agent_error_file_message reads the JSON that PyTorch's @record writes to
 * TORCHELASTIC_ERROR_FILE ({"message": {"message": "...", "extraInfo":
 * {"py_callstack": "...", "timestamp": "..."}}} or {"message": "..."})
 * from data and writes its message (and the call stack when present) into
 * out. Returns 0, or DL_EINVAL when data is not of that form.
 */
int agent_error_file_message(const char *data, size_t len, char *out,
			     size_t out_size, uint64_t *timestamp_s);

#endif
