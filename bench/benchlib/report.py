# SPDX-License-Identifier: Apache-2.0
"""benchlib.report - the table of results: a row per case from
bench/results/*.json with its ratio and goal, as markdown, and the note
on the runs that made it (bench.py report writes them)."""
import os

from .common import ROOT, load
from .etcd import LOAD_TTL_S


def fmt_s(x):
    if x is None:
        return "-"
    if x < 0.01:
        return f"{x * 1000:.2f} ms"
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s"


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def load_note(case):
    """' (load A-B)': the 1-minute load average before and after a case,
    where its results recorded it."""
    la = case.get("loadavg")
    return " (load {:.1f}-{:.1f})".format(*la) if la else ""


def rdzv_heartbeats_of(case):
    """dlaunch-rdzv's heartbeats/s in an rdzv case: those of its turns
    against bare_http, or (results from before the turns) of its join
    runs; None when not measured."""
    hb = case.get("heartbeats")
    if hb and hb.get("rdzv_per_s"):
        return hb["rdzv_per_s"]
    return case.get("heartbeats_per_s")


def rdzv_heartbeat_rows(cases):
    """The rows "rdzv heartbeats": dlaunch-rdzv's heartbeats/s as a ratio
    to bare_http's (the median of the turns' pairs, their spread), for
    each job size measured; and the rate of one core at the largest."""
    rows = []
    for c in cases:
        hb = c.get("heartbeats")
        if not hb or not hb.get("ratio"):
            continue
        r, cpu = hb["ratio"], hb.get("cpu_ratio")
        ref = (f"bare libevent {hb['bare_per_s']['median']:,.0f}/s; "
               f"{r['n']} turns each, ratios {r['min']:.2f}-{r['max']:.2f}")
        if cpu:
            ref += f"; CPU per heartbeat {cpu['median']:.2f}x"
        rows.append(("rdzv heartbeats", f"job of {c['nodes']} nodes, vs a "
                     "bare libevent server, same load, taking turns"
                     + load_note(c),
                     f"{hb['rdzv_per_s']['median']:,.0f}/s", ref,
                     r["median"], ">= 0.7x", r["median"] >= 0.7))
    measured = [c for c in cases if rdzv_heartbeats_of(c)]
    if measured:
        # the goal is judged on the largest job measured, not on the
        # smallest (lookups grow with the job)
        big = max(measured, key=lambda c: c["nodes"])
        rate = rdzv_heartbeats_of(big)["median"]
        rows.append(("rdzv heartbeats", f"one core, job of "
                     f"{big['nodes']} nodes", f"{rate:,.0f}/s", "", None,
                     ">= 30,000/s", rate >= 30000))
    return rows


def summary_rows():
    """(benchmark, case, dlaunch, reference, ratio, goal, met) rows from
    the saved results."""
    rows = []
    for name, goal in (("launch", 50), ("restart", 10)):
        d = load(name)
        if d and "cases" in d:
            for c in d["cases"]:
                dl, tr = c.get("dlaunch"), c.get("torchrun")
                fl = c.get("floor")
                ratio = c.get("ratio")
                dls = fmt_s(dl["median"]) if dl else "failed"
                if dl and fl:
                    dls += f" (floor {fmt_s(fl['median'])})"
                case = plural(c["nproc"], "worker")
                if c.get("loadavg"):
                    case += " (load {:.1f}-{:.1f})".format(*c["loadavg"])
                rows.append((name, case, dls,
                             "torchrun " + (fmt_s(tr["median"]) if tr
                                            else "failed"),
                             ratio, f">= {goal}x",
                             ratio is not None and ratio >= goal))
        elif d:
            rows.append((name, "-", "not run", d.get("error", ""), None,
                         f">= {goal}x", False))
    d = load("nodeloss")
    if d and "dlaunch" in d:
        for key, what in (("start_s", "survivor restarted"),
                          ("ready_s", "survivor's first all-reduce")):
            dl = d["dlaunch"].get(key)
            tr = d["torchrun"].get(key)
            ratio = (tr["median"] / dl["median"]) if dl and tr else None
            trs = ("torchrun " + fmt_s(tr["median"])) if tr else \
                "torchrun: none within the cap"
            if d["torchrun"].get(key + "_missing"):
                trs += f" ({d['torchrun'][key + '_missing']} runs never)"
            timeout = d["dlaunch_heartbeat_timeout_s"]
            judged = key == "start_s"  # ready_s adds the worker's torch import
            rows.append(("node loss", f"{what} (heartbeat timeout "
                         f"{timeout} s)",
                         fmt_s(dl["median"]) if dl else "failed", trs, ratio,
                         "<= heartbeat timeout + 1 s" if judged else "",
                         (dl is not None and dl["median"] <= timeout + 1)
                         if judged else None))
        short = d.get("dlaunch_short", {}).get("start_s")
        if short:
            timeout = d["dlaunch_short_heartbeat_timeout_s"]
            rows.append(("node loss", f"survivor restarted (heartbeat "
                         f"timeout {timeout} s)", fmt_s(short["median"]), "",
                         None, "<= heartbeat timeout + 1 s",
                         short["median"] <= timeout + 1))
    elif d:
        rows.append(("node loss", "-", "not run", d.get("error", ""), None,
                     "", False))
    d = load("trainloss")
    if d and "in_place" in d:
        ip, rs, tr = (d[m]["s"] for m in ("in_place", "restart", "torchrun"))
        timeout = d["dlaunch_heartbeat_timeout_s"]
        ref = "; ".join(f"{name} {fmt_s(x['median'])}" for name, x in
                        (("restart", rs), ("torchrun", tr)) if x)
        rows.append(("node loss, dlaunch-train", "kill to the survivor's "
                     f"first step, in place (heartbeat timeout {timeout} s)",
                     fmt_s(ip["median"]) if ip else "failed", ref,
                     tr["median"] / ip["median"] if ip and tr else None,
                     "<= heartbeat timeout + 1 s",
                     ip is not None and ip["median"] <= timeout + 1))
        lost = {m: d[m]["steps_lost"] for m in ("in_place", "restart",
                                                 "torchrun")}
        if lost["in_place"]:
            rows.append(("node loss, dlaunch-train", "steps lost per node "
                         f"loss (checkpoint every {d['checkpoint_every']})",
                         f"{lost['in_place']['max']:.0f}",
                         "; ".join(f"{m} {lost[m]['median']:.0f}"
                                   for m in ("restart", "torchrun")
                                   if lost[m]), None, "<= 1",
                         lost["in_place"]["max"] <= 1))
    d = load("reformtrain")
    if d and d.get("modes", {}).get("shrink", {}).get("change_to_step_ms"):
        ip = d["modes"]["shrink"]["change_to_step_ms"]
        rs = d["modes"]["restart"].get("change_to_step_ms")
        rows.append(("re-form", "dlaunch-train alone, kill to the next step "
                     "(3 ranks, no detection)", fmt_s(ip["median"] / 1000),
                     f"restart from checkpoint {fmt_s(rs['median'] / 1000)}"
                     if rs else "", rs["median"] / ip["median"] if rs else
                     None, "", None))
    d = load("reform")
    if d and d.get("in_place"):
        rs = d.get("restart")
        rows.append(("re-form", "node loss to the survivor's workers in the "
                     f"next round (heartbeat timeout "
                     f"{d['heartbeat_timeout_s']} s)",
                     fmt_s(d["in_place"]["median"]),
                     f"restart {fmt_s(rs['median'])}" if rs else "",
                     rs["median"] / d["in_place"]["median"] if rs else None,
                     "", None))
    d = load("rdzv")
    if d and "cases" in d:
        for c in d["cases"]:
            j = c["join_ms"]["median"]
            goal = "< 1 s" if c["nodes"] == 4096 else ""
            ref = f"server VmHWM {c['server_hwm_bytes'] / 2**20:.1f} MiB"
            hb = rdzv_heartbeats_of(c)
            if hb:
                ref += f"; {hb['median']:,.0f} heartbeats/s"
            rows.append(("rdzv join", f"{c['nodes']} nodes"
                         + load_note(c), fmt_s(j / 1000), ref, None, goal,
                         j < 1000 if c["nodes"] == 4096 else None))
        rows.extend(rdzv_heartbeat_rows(d["cases"]))
        for f in d.get("failures", []):
            # "N nodes: why" (bench_rdzv's wording)
            n, _, why = f.partition(" nodes: ")
            skipped = why.startswith("not run")
            if "within" in why:
                why = "not every node assigned " + why[why.index("within"):]
            rows.append(("rdzv join", f"{n} nodes",
                         "not run" if skipped else "failed", why[:90], None,
                         "< 1 s" if n == "4096" else "",
                         None if skipped and n != "4096" else False))
    elif d:
        rows.append(("rdzv", "-", "not run", d.get("error", ""), None, "",
                     False))
    rows.extend(etcd_rows(load("etcd")))
    d = load("dist")
    if d and "cases" in d:
        for world in d["worlds"]:
            cs = [c for c in d["cases"]
                  if c["world"] == world and "ratio" in c]
            if not cs:
                rows.append(("all-reduce", f"{world} ranks", "failed", "",
                             None, "> 1x at every size", False))
                continue
            small, large = cs[0], cs[-1]
            worst = min(cs, key=lambda c: c["ratio"])
            rows.append(("all-reduce", f"{world} ranks, {small['bytes']} B",
                         f"{small['dlaunch']['latency_us']:.1f} us",
                         f"gloo {small['gloo']['latency_us']:.1f} us",
                         small["ratio"], "> 1x", small["ratio"] > 1))
            rows.append(("all-reduce", f"{world} ranks, "
                         f"{large['bytes'] >> 20} MiB",
                         f"{large['dlaunch']['busbw_gbps']:.2f} GB/s",
                         f"gloo {large['gloo']['busbw_gbps']:.2f} GB/s",
                         large["ratio"], "> 1x", large["ratio"] > 1))
            rows.append(("all-reduce", f"{world} ranks, worst size "
                         f"({worst['bytes']} B)", "", "", worst["ratio"],
                         "> 1x at every size", worst["ratio"] > 1))
    elif d:
        rows.append(("all-reduce", "-", "not run", d.get("error", ""), None,
                     "> 1x", False))
    d = load("flight")
    if d and d.get("ns_per_collective") and "cases" in d:
        # the recorder's own time against the fastest all-reduce measured
        # without it: the side-by-side below cannot resolve a cost this
        # small on a loaded machine, this can
        c = d["ns_per_collective"]
        offs = [x["off"]["median"] for x in d["cases"] if "off" in x]
        if offs:
            pct = c["median"] / 1e3 / min(offs) * 100
            rows.append(("flight recorder", "cost of one collective "
                         "recorded (enter + finish)",
                         f"{c['median']:.0f} ns",
                         f"{pct:.2f}% of a {min(offs):.0f} us all-reduce",
                         None, "< 1% of the fastest all-reduce",
                         pct < 1))
    if d and "cases" in d:
        for world in d["worlds"]:
            cs = [c for c in d["cases"]
                  if c["world"] == world and "ratio" in c]
            if not cs:
                rows.append(("flight recorder", f"{world} ranks", "failed",
                             "", None, "", False))
                continue
            lo = min(c["off_over_on"]["min"] for c in cs)
            hi = max(c["off_over_on"]["max"] for c in cs)
            med = [c["ratio"] for c in cs]
            rows.append(("flight recorder", f"{world} ranks, all-reduce "
                         f"{cs[0]['bytes']}-{cs[-1]['bytes']} B, recorded "
                         "and not, alternating",
                         f"off/on medians {min(med):.2f}-{max(med):.2f}",
                         f"runs {lo:.2f}-{hi:.2f}", None,
                         "", None))
    elif d:
        rows.append(("flight recorder", "-", "not run", d.get("error", ""),
                     None, ">= 0.95x", False))
    for name, label in (("train", "training"), ("ckpt", "checkpoint"),
                        ("hang", "hang diagnosis"),
                        ("hangfp", "hang diagnosis"), ("gpu", "gpu")):
        d = load(name)
        if d and "rows" in d:
            rows.extend(tuple(r) for r in d["rows"])
        elif d:
            rows.append((label, "-", "not run", d.get("error", ""), None, "",
                         None if name == "gpu" else False))
    return rows


ETCD_LOAD_GOALS = {1024: 2.0, 4096: 10.0}  # seconds (issue 12)
# the leader's kill to every survivor in a new round: the lease TTL (the
# leader key expires with it) and this much more (issue 23)
TAKEOVER_GOAL_AFTER_TTL_S = 2


def etcd_rows(d):
    """The etcd benchmark's rows of the table."""
    rows = []
    if not d:
        return rows
    if "first" not in d:
        return [("etcd", "-", "not run", d.get("error", ""), None, "",
                 False)]
    for c in d["first"]:
        dl, tr = c.get("dlaunch"), c.get("torchrun")
        if tr:
            ref = "torchrun etcd-v2 " + fmt_s(tr["median"])
            if c.get("torchrun_failed"):
                ref += f" ({c['torchrun_failed']} runs failed)"
        elif c.get("torchrun_not_run"):
            ref = "torchrun not run: " + c["torchrun_not_run"]
        else:
            ref = "torchrun etcd-v2 failed"
        ratio = c.get("ratio")
        rows.append(("etcd first round", plural(c["nodes"], "agent"),
                     fmt_s(dl["median"]) if dl else "failed", ref, ratio,
                     ">= 10x" if tr else "",
                     (ratio is not None and ratio >= 10) if tr else None))
        rd = c.get("torchrun_rdzv_s")
        if dl and rd:
            # torchrun's share once its agents have imported torch, against
            # dlaunch's whole time: the part the protocol decides
            rows.append(("etcd first round", f"{c['nodes']} agents, "
                         "torchrun from its last agent's torch import",
                         fmt_s(dl["median"]),
                         "torchrun etcd-v2 " + fmt_s(rd["median"]),
                         rd["median"] / dl["median"], "", None))
    k = d.get("kill", {})
    dl, tr = k.get("dlaunch", {}).get("start_s"), \
        k.get("torchrun", {}).get("start_s")
    if dl or tr:
        rows.append(("etcd agent killed", "4 agents, a follower; survivors "
                     "running again (detection 2 s, last call 1 s)",
                     fmt_s(dl["median"]) if dl else "failed",
                     "torchrun etcd-v2 " + (fmt_s(tr["median"]) if tr
                                            else "failed"),
                     k.get("ratio"), "", None))
    ld = k.get("dlaunch_leader", {}).get("start_s")
    if ld:
        rows.append(("etcd agent killed", "4 agents, the leader; survivors "
                     "running again", fmt_s(ld["median"]), "", None, "",
                     None))
    for c in d.get("load", []):
        n, goal = c["nodes"], ETCD_LOAD_GOALS.get(c["nodes"])
        gs = f"<= {goal:.0f} s" if goal else ""
        ttl = c.get("lease_ttl_s", LOAD_TTL_S)
        nodes = f"{n} nodes, lease TTL {ttl} s"
        if not c.get("join_ms"):
            run = next((x for x in c.get("runs", []) if "error" in x), {})
            why = run.get("error", "").split("etcd_load: ")[-1]
            if run.get("log"):
                why += "; most: " + run["log"][0]
            rows.append(("etcd simulated join", nodes, "failed",
                         why[:160], None, gs, False if goal else None))
            continue
        j = c["join_ms"]["median"] / 1000
        ref = (f"{c['requests_per_join']['median']:.2f} requests, "
               f"{c['proposals_per_join']['median']:.2f} raft proposals, "
               f"{c['join_etcd_cpu_ms_per_node']['median']:.1f} ms of etcd "
               "CPU per join")
        if c.get("failed"):
            ref += f"; {c['failed']} of {len(c['runs'])} runs failed"
        if c.get("nodes_failed"):
            ref += (f"; {c['nodes_failed']} agents ended without a round "
                    "(see the run's log)")
        ok = not c.get("failed") and not c.get("nodes_failed")
        rows.append(("etcd simulated join", nodes, fmt_s(j), ref,
                     None, gs, (j <= goal and ok) if goal else None))
        idle = c.get("idle_etcd_cores_per_1000_nodes")
        if idle:
            rows.append(("etcd while running", f"{n} nodes, lease TTL "
                         f"{ttl} s (keep-alives only)",
                         f"{idle['median']:.2f} cores / 1000 nodes",
                         "etcd's CPU, all members", None, "", None))
        tk = c.get("takeover_reformed_ms")
        tk_failed = c.get("takeover_failed", 0)
        if tk or tk_failed:
            # the leader killed: its lease expires within the TTL (when
            # depends on where in the keep-alive period the kill fell),
            # then every survivor must be in a new round within 2 s
            # more, in every run: judged on the time after the expiry,
            # which a kill just after a keep-alive would add to a whole
            # TTL
            nl = c.get("takeover_new_leader_ms")
            tk_goal = ttl + TAKEOVER_GOAL_AFTER_TTL_S
            vals = [v / 1000 for v in (tk or {}).get("values", [])]
            after = [(x["takeover"]["reformed_ms"]
                      - x["takeover"]["leader_key_gone_ms"]) / 1000
                     for x in c.get("runs", []) if "error" not in x
                     and x.get("takeover", {}).get("reformed_ms", -1) >= 0
                     and x["takeover"].get("leader_key_gone_ms", -1) >= 0]
            ref = ("new leader after " + (fmt_s(nl["median"] / 1000)
                                          if nl else "-")
                   + ("; runs " + ", ".join(fmt_s(v) for v in vals)
                      if len(vals) > 1 else "")
                   + ("; every survivor in it "
                      + ", ".join(fmt_s(v) for v in after)
                      + " after the lease expired" if after else ""))
            waves = takeover_waves(c.get("runs", []))
            if waves:
                ref += ("; after the expiry (median): every survivor told "
                        f"its round is over {fmt_s(waves[0])}, the new "
                        f"round's first node in it {fmt_s(waves[1])}")
            if tk_failed:
                ref += f"; {tk_failed} run(s) never re-formed"
            rows.append(("etcd leader takeover",
                         nodes + ", every survivor in the new round",
                         fmt_s(tk["median"] / 1000) if tk else "failed",
                         ref, None, f"<= {tk_goal:.0f} s in every run",
                         bool(vals) and not tk_failed
                         and len(after) == len(vals)
                         and max(after) <= TAKEOVER_GOAL_AFTER_TTL_S))
    ka = d.get("keepalive") or {}
    for where in ("follower", "leader"):
        st, gw = ka.get(f"{where}_stream_ms"), ka.get(f"{where}_gateway_ms")
        if st and gw:
            rows.append(("etcd keep-alive", f"{ka['conns']} agents' leases "
                         f"renewed every {ka['interval_ms'] / 1000:.2f} s at "
                         + ("a follower" if where == "follower"
                            else "the leader")
                         + ", etcd's CPU each (all members)",
                         f"{st['median']:.2f} ms on a gRPC stream",
                         f"JSON gateway {gw['median']:.2f} ms",
                         ka[f"{where}_ratio"], "", None))
    if ka.get("error"):
        rows.append(("etcd keep-alive", "stream against gateway", "failed",
                     ka["error"][:120], None, "", None))
    sizes = [c["nodes"] for c in d.get("load", [])
             if c.get("requests_per_join")
             and c.get("lease_ttl_s", LOAD_TTL_S) == LOAD_TTL_S]
    g = d.get("requests_per_join_growth")
    if g is not None and len(sizes) > 1:
        rows.append(("etcd requests per join", f"{min(sizes)} to "
                     f"{max(sizes)} nodes", f"x{g:.2f}", "", None,
                     "no growth with N (<= x1.10)", g <= 1.10))
    return rows


def takeover_waves(runs):
    """Where a takeover's time after the lease's expiry went, medians over
    the runs that say (etcd_load's round_over_last_ms and
    reformed_first_ms): every survivor told that its round is over, and
    the new round's first node in it; None when no run says."""
    over, first = [], []
    for x in runs:
        t = x.get("takeover", {}) if "error" not in x else {}
        gone = t.get("leader_key_gone_ms", -1)
        if gone >= 0 and t.get("round_over_last_ms", -1) >= 0 \
                and t.get("reformed_first_ms", -1) >= 0:
            over.append((t["round_over_last_ms"] - gone) / 1000)
            first.append((t["reformed_first_ms"] - gone) / 1000)
    if not over:
        return None
    return (sorted(over)[len(over) // 2], sorted(first)[len(first) // 2])


def table_markdown(rows):
    out = ["| benchmark | case | dlaunch | reference | ratio | goal | met |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for bench, case, dl, ref, ratio, goal, met in rows:
        r = "-"
        if isinstance(ratio, (int, float)):
            # a ratio under 1 (a limit reached in part) wants two digits
            r = f"{ratio:.2f}x" if ratio < 1 else f"{ratio:.1f}x"
        m = {True: "yes", False: "**no**", None: ""}[met]
        out.append(f"| {bench} | {case} | {dl} | {ref} | {r} | {goal} | "
                   f"{m} |")
    return "\n".join(out) + "\n"


DOCS = os.path.join(ROOT, "docs", "benchmarks.md")
TABLE_BEGIN = "<!-- bench:table:begin (bench/bench.py report writes this) -->"
TABLE_END = "<!-- bench:table:end -->"


def first_load(metas):
    return min(metas, key=lambda x: x["date"]).get("loadavg_at_start", 0)


def run_note(results):
    """One line saying where and how the numbers in the table were made."""
    # a result written by hand (hang.json's meta says how it was made)
    # may have no date: it does not say when the runs were
    metas = [d["meta"] for d in results.values()
             if d and isinstance(d.get("meta"), dict) and "date" in d["meta"]]
    if not metas:
        return "No results yet."
    dates = sorted(m["date"] for m in metas)
    # a part carried from an earlier run (hang's workers) keeps its meta
    quick = sorted(name for name, d in results.items()
                   if d and (d.get("meta", {}).get("quick") or any(
                       w.get("meta", {}).get("quick")
                       for w in d.get("workers", {}).values())))
    modes = sorted({"quick" if m.get("quick") else "full" for m in metas}
                   | ({"quick"} if quick else set()))
    # the GPU rows come from a machine of their own (bench/gpu_bench.sh):
    # the line describes the other runs' machine, and that one apart
    gpu = results.get("gpu")
    gm = gpu.get("meta") if isinstance(gpu, dict) else None
    here = [x for x in metas if x is not gm] or metas
    loads = [x.get("loadavg_at_start", 0) for x in here]
    m = max(here, key=lambda x: x["date"])
    note = (f"Runs from {dates[0]} to {dates[-1]}, commit {m['commit']}, "
            f"{'/'.join(modes)} mode, {m['host_cpus']} CPUs ({m['cpu']}), "
            f"kernel {m['kernel']}; 1-minute load average when the first "
            f"benchmark started: {first_load(here):.1f} (later ones include "
            f"their predecessors': {min(loads):.1f} to {max(loads):.1f}).")
    if gm in metas and len(here) < len(metas):
        names = ", ".join(gpu.get("gpu_names") or []) or "GPUs"
        note += (f" The gpu rows: {gm['date']}, commit {gm['commit']}, on "
                 f"another machine ({gm['host_cpus']} CPUs, {gm['cpu']}, "
                 f"{names}).")
    # the load average decays over a minute, so a benchmark started after
    # another sees its predecessor's processes: only the first one tells
    # whether something else was running
    first = min(here, key=lambda x: x["date"])
    busy = first.get("loadavg_at_start", 0) > 0.5 * (m["host_cpus"] or 1)
    if "quick" in modes or busy:
        note += (" **Preliminary:** " +
                 ("quick mode (fewer sizes and repetitions)" +
                  (f" for {', '.join(quick)}" if quick else "")
                  if "quick" in modes else "") +
                 ("; " if "quick" in modes and busy else "") +
                 ("the machine was busy with other work" if busy else "") +
                 ". Rerun `make bench` on a quiet machine for the "
                 "measurement.")
    return note


def update_docs(table, note):
    """Replace the table between the markers in docs/benchmarks.md."""
    try:
        with open(DOCS) as f:
            text = f.read()
    except FileNotFoundError:
        return
    a, b = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if a < 0 or b < a:
        return
    text = (text[:a + len(TABLE_BEGIN)] + "\n" + note + "\n\n" + table
            + text[b:])
    with open(DOCS, "w") as f:
        f.write(text)
