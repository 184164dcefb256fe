# SPDX-License-Identifier: Apache-2.0
"""benchlib - the benchmarks of bench/bench.py by group (launch, nodeloss,
reform, rdzv, etcd, dist, train, gpu), what they share (common) and the
report (report, plots); bench.py parses the command line and dispatches.
The hang benchmarks live in bench.py itself."""
