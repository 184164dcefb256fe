# SPDX-License-Identifier: Apache-2.0
# lib_elastic.sh - reading and checking the runs of the dlaunch module's
# example, contrib/pytorch/elastic_inplace.py, in the tests that run it
# under dlaunch on loopback (e2e/torch_inplace.sh) and on namespace hosts
# (faults/faults_torch_inplace.sh). Sourced after the suite's own library.
#
# The caller defines:
#   logs          prints every agent log of the job under test
#   log_of NODE   prints the path of that node's agent log
# and sets S, ARGS (the script and its arguments) and DLAUNCH_BIN (the
# dlaunch binary), which reference runs.

# rank0_step: the highest step rank 0 has printed
rank0_step() {
	logs | sed -n 's/.*inplace step=\([0-9]*\) rank=0 .*/\1/p' | sort -n | tail -n 1
}
past_step() { local s; s=$(rank0_step); [ -n "$s" ] && [ "$s" -ge "$1" ]; }
n_reformed() { [ "$(logs | grep -c 're-formed in place for round')" -ge "$1" ]; }
# resume_steps: the distinct steps the workers resumed after, re-formed
resume_steps() {
	logs | sed -n 's/.*re-formed in place .*resuming after step \([0-9]*\).*/\1/p' |
		sort -u | tr '\n' ' '
}
# pids_of NODE WHAT: the pids of that node's worker's "inplace WHAT" lines
pids_of() {
	sed -n "s/.*inplace $2 .*pid=\([0-9]*\).*/\1/p" "$(log_of "$1")" |
		sort -u | tr '\n' ' '
}
# digests_in [FILE...]: the distinct final digests (stdin without FILE)
digests_in() {
	sed -n 's/.*inplace done .*digest=\([0-9a-f]*\).*/\1/p' "$@" | sort -u | tr '\n' ' '
}
digests() { logs | digests_in; }
# reference W1 STEP W2: the digest after W1 ranks train to STEP on
# loopback and W2 ranks resume from that checkpoint to the end: the state
# a run that followed the same membership schedule by checkpoint and
# restart ends with
reference() {
	local d=$TEST_TMP/ref.$1.$2.$3
	mkdir -p "$d"
	GLOO_SOCKET_IFNAME=lo timeout 120 "$DLAUNCH_BIN" --standalone \
		--nproc-per-node "$1" "$S" "${ARGS[@]}" --step-ms 0 \
		--max-steps "$2" --checkpoint "$d/ck.pt" >"$d/a.log" 2>&1 || return 1
	GLOO_SOCKET_IFNAME=lo timeout 120 "$DLAUNCH_BIN" --standalone \
		--nproc-per-node "$3" "$S" "${ARGS[@]}" --step-ms 0 \
		--checkpoint "$d/ck.pt" >"$d/b.log" 2>&1 || return 1
	digests_in "$d/b.log"
}
