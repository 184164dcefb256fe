#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""env_compare.py - compare the worker environments two launchers gave the
same program (contrib/pytorch/dump_env.py) variable for variable.

    env_compare.py --parent PARENT.json --torchrun DIR --dlaunch DIR \
        --world N [--run-id-given] [--static]

With --static (static mode: --master-addr and --master-port given, no
rendezvous) MASTER_ADDR and MASTER_PORT are the user's and compared too.

PARENT.json is the environment both launchers were started with (a JSON
object); DIR holds env.<RANK>.json for every rank 0..N-1. For each rank, the
variables a launcher set or changed (relative to PARENT) must be the same
names with the same values under both, except for the variables listed in
EXCLUDED below, each of which must differ for a stated reason and is checked
another way instead. A variable of PARENT that a launcher removed is a
mismatch too.

Prints "MISMATCH rank=R NAME: torchrun=... dlaunch=..." (or "CHECK ...")
for each difference and "env_compare ok ..." at the end; exit status 1 on
any difference.
"""
import argparse
import ipaddress
import json
import os
import socket
import subprocess
import sys

# Variables whose values legitimately differ between the two launchers.
EXCLUDED = {
    "MASTER_PORT": "a port each launcher finds free at run time; checked: an "
                   "integer in 1..65535, the same for every rank of a run",
    "MASTER_ADDR": "torchrun announces socket.getfqdn() (a host name), dlaunch "
                   "an IP address the other nodes can reach (DESIGN.md s.1: never "
                   "an unresolvable host name); checked: the same for every rank "
                   "and it resolves to an address of this machine",
    "TORCHELASTIC_ERROR_FILE": "a path in each launcher's own temporary folder; "
                               "checked: absolute, different for every rank, and "
                               "its folder exists while the worker runs",
    "_": "set by the shell that started the launcher, not by the launcher",
    "PWD": "set by the shell that started the launcher, in a folder of its "
           "own for each run; checked: the worker's working directory",
    "PYTHONPATH": "dlaunch starts Python workers with its sitecustomize "
                  "directory first on PYTHONPATH (Python stacks on SIGUSR2 "
                  "for the hang diagnosis, docs/hangs.md); the sitecustomize "
                  "gives os.environ the old value back before the script "
                  "runs; checked: what the worker sees is the launcher's "
                  "own value (or unset)",
}
# Only when no --rdzv-id is given (standalone): both generate a random one.
RUN_ID_NOTE = ("without --rdzv-id each launcher makes up a random run id; "
               "checked: non-empty and the same for every rank")
# Only in static mode (--master-addr/--node-rank, no rendezvous server).
AGENT_STORE_NOTE = ("torchrun's static agent hosts a TCPStore at MASTER_PORT "
                    "and tells workers to use it (True); dlaunch hosts no store, "
                    "rank 0's init_process_group creates it (False, DESIGN.md s.1); "
                    "checked: dlaunch says False")
# dlaunch's own extras: names torchrun does not have.
DLAUNCH_EXTRA_PREFIX = "DLAUNCH_"
DLAUNCH_EXTRAS = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "the name torchrun >= 2.2 uses for "
        "NCCL_ASYNC_ERROR_HANDLING; torch 1.13 ignores it",
    "GLOO_SOCKET_IFNAME": "dlaunch names the interface of the node's "
        "announced address when the host name resolves to loopback only "
        "and the round has several nodes (README, docs/migrating-from-"
        "torchrun.md); torchrun leaves gloo on loopback",
    "NCCL_SOCKET_IFNAME": "the same, for NCCL's socket bootstrap",
}


def load_ranks(folder, world):
    envs = {}
    for rank in range(world):
        path = os.path.join(folder, f"env.{rank}.json")
        with open(path) as f:
            envs[rank] = json.load(f)
    return envs


def launcher_set(parent, env):
    """The variables a launcher set or changed, and those it removed."""
    changed = {k: v for k, v in env.items() if parent.get(k) != v}
    removed = sorted(k for k in parent if k not in env and k != "_")
    return changed, removed


def local_addresses():
    """The host name's addresses and every interface's: dlaunch announces
    an interface address when the route to the server is loopback."""
    addrs = {"127.0.0.1", "::1"}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            addrs.add(info[4][0])
    except OSError:
        pass
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], check=False,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) > 3 and fields[2] in ("inet", "inet6"):
                addrs.add(fields[3].split("/")[0])
    except OSError:
        pass
    return addrs


def resolves_locally(name):
    try:
        ipaddress.ip_address(name)
        addrs = {name}
    except ValueError:
        try:
            addrs = {i[4][0] for i in socket.getaddrinfo(name, None)}
        except OSError:
            return False
    local = local_addresses()
    return any(a in local or a.startswith("127.") for a in addrs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parent", required=True)
    ap.add_argument("--torchrun", required=True)
    ap.add_argument("--dlaunch", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--run-id-given", action="store_true")
    ap.add_argument("--static", action="store_true",
                    help="--master-addr/--master-port given: compare them too")
    args = ap.parse_args()

    with open(args.parent) as f:
        parent = json.load(f)
    runs = {"torchrun": load_ranks(args.torchrun, args.world),
            "dlaunch": load_ranks(args.dlaunch, args.world)}
    problems = []
    excluded = dict(EXCLUDED)
    if args.static:  # the user chose them: both launchers must pass them on
        del excluded["MASTER_ADDR"], excluded["MASTER_PORT"]
    if not args.run_id_given:
        excluded["TORCHELASTIC_RUN_ID"] = RUN_ID_NOTE
    if args.static:
        excluded["TORCHELASTIC_USE_AGENT_STORE"] = AGENT_STORE_NOTE

    compared = set()
    for rank in range(args.world):
        t_set, t_removed = launcher_set(parent, runs["torchrun"][rank]["env"])
        d_set, d_removed = launcher_set(parent, runs["dlaunch"][rank]["env"])
        for name in d_removed:
            problems.append(f"MISMATCH rank={rank} {name}: dlaunch removed a "
                            f"variable of its own environment")
        for name in t_removed:
            problems.append(f"CHECK rank={rank} {name}: torchrun removed it")
        for name in sorted(set(t_set) | set(d_set)):
            if name in excluded:
                continue
            if name.startswith(DLAUNCH_EXTRA_PREFIX) or name in DLAUNCH_EXTRAS:
                if name in t_set:
                    problems.append(f"CHECK rank={rank} {name}: torchrun sets "
                                    f"it too ({t_set[name]!r})")
                continue
            compared.add(name)
            tv = t_set.get(name, runs["torchrun"][rank]["env"].get(name))
            dv = d_set.get(name, runs["dlaunch"][rank]["env"].get(name))
            if tv != dv:
                problems.append(f"MISMATCH rank={rank} {name}: torchrun={tv!r} "
                                f"dlaunch={dv!r}")

    # the excluded variables, checked another way (dlaunch's side; torchrun's
    # values are the reference and checked for sanity)
    for launcher, envs in runs.items():
        def values(name):
            return [envs[r]["env"].get(name) for r in range(args.world)]
        ports = values("MASTER_PORT")
        if len(set(ports)) != 1 or not (ports[0] or "").isdigit() \
                or not 1 <= int(ports[0]) <= 65535:
            problems.append(f"CHECK {launcher} MASTER_PORT: {ports}")
        addrs = values("MASTER_ADDR")
        if len(set(addrs)) != 1 or not addrs[0] or not resolves_locally(addrs[0]):
            problems.append(f"CHECK {launcher} MASTER_ADDR: {addrs} (not one "
                            f"address of this machine)")
        files = values("TORCHELASTIC_ERROR_FILE")
        if None in files or len(set(files)) != args.world \
                or not all(os.path.isabs(f) for f in files):
            problems.append(f"CHECK {launcher} TORCHELASTIC_ERROR_FILE: {files} "
                            f"(not one absolute path per rank)")
        for r in range(args.world):
            if not envs[r].get("error_file_dir_exists"):
                problems.append(f"CHECK {launcher} rank={r} TORCHELASTIC_ERROR_FILE "
                                f"folder did not exist while the worker ran")
        for r in range(args.world):
            pwd = envs[r]["env"].get("PWD")
            if pwd is not None and os.path.realpath(pwd) != os.path.realpath(envs[r]["cwd"]):
                problems.append(f"CHECK {launcher} rank={r} PWD {pwd!r} is not the "
                                f"working directory {envs[r]['cwd']!r}")
        if launcher == "dlaunch":
            for r in range(args.world):
                if envs[r]["env"].get("PYTHONPATH") != parent.get("PYTHONPATH"):
                    problems.append(f"CHECK dlaunch rank={r} PYTHONPATH "
                                    f"{envs[r]['env'].get('PYTHONPATH')!r} is "
                                    f"not the launcher's "
                                    f"{parent.get('PYTHONPATH')!r}")
        ids = values("TORCHELASTIC_RUN_ID")
        if len(set(ids)) != 1 or not ids[0]:
            problems.append(f"CHECK {launcher} TORCHELASTIC_RUN_ID: {ids}")
    if args.static:
        stores = [runs["dlaunch"][r]["env"].get("TORCHELASTIC_USE_AGENT_STORE")
                  for r in range(args.world)]
        if set(stores) != {"False"}:
            problems.append(f"CHECK dlaunch TORCHELASTIC_USE_AGENT_STORE: {stores}")

    for p in problems:
        print(p)
    for name, why in sorted(excluded.items()):
        print(f"# excluded {name}: {why}")
    if problems:
        print(f"env_compare FAILED: {len(problems)} differences", flush=True)
        return 1
    print(f"env_compare ok world={args.world} compared={','.join(sorted(compared))}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
