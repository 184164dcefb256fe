#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_launched.py --out-file FILE - worker of tests/e2e/
torch_launch_cases.sh: writes what torch.distributed.is_torchelastic_launched()
says (True under a torchrun-compatible launcher, False when run directly)
to FILE, with nothing else."""
import argparse

import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--out-file", "--out_file", required=True)
args = ap.parse_args()
with open(args.out_file, "w") as out:
    out.write(str(dist.is_torchelastic_launched()))
