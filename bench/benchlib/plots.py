# SPDX-License-Identifier: Apache-2.0
"""benchlib.plots - the PNG plots of bench/results/ drawn with gnuplot."""
import os
import subprocess

from .common import RESULTS, load, log
from .etcd import LOAD_TTL_S


def gnuplot(script):
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       capture_output=True, cwd=RESULTS)
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"gnuplot failed: {getattr(e, 'stderr', e)}")


def plots():
    """PNG plots of what the results hold (gnuplot, png terminal)."""
    made = []
    term = "set terminal png size 800,500\n"
    for name, title in (
            ("launch", "launch N trivial workers (median wall time)"),
            ("restart", "worker death to every worker of the next attempt "
             "running (median)")):
        d = load(name)
        if not (d and d.get("cases")):
            continue
        with open(os.path.join(RESULTS, f"{name}.dat"), "w") as f:
            for c in d["cases"]:
                dl = c["dlaunch"]["median"] if c.get("dlaunch") else 0
                tr = c["torchrun"]["median"] if c.get("torchrun") else 0
                fl = c["floor"]["median"] if c.get("floor") else 0
                f.write(f"{c['nproc']} {dl} {tr} {fl}\n")
        gnuplot(term + f"""set output '{name}.png'
set title '{title}'
set style data histograms
set style fill solid
set logscale y
set ylabel 'seconds (log)'
set xlabel 'workers'
set key outside bottom center horizontal
plot '{name}.dat' using 2:xtic(1) title 'dlaunch', '' using 3 title 'torchrun', '' using 4 title 'floor (minimal C spawner)'
""")
        made.append(f"{name}.png")
    d = load("nodeloss")
    if d and d.get("dlaunch"):
        with open(os.path.join(RESULTS, "nodeloss.dat"), "w") as f:
            for key, label in (("start_s", "restarted"),
                               ("ready_s", "first-all-reduce")):
                dl = d["dlaunch"].get(key)
                tr = d["torchrun"].get(key)
                f.write(f"{label} {dl['median'] if dl else 0} "
                        f"{tr['median'] if tr else 0}\n")
        gnuplot(term + f"""set output 'nodeloss.png'
set title 'node SIGKILLed: until the survivor runs again (median)'
set style data histograms
set style fill solid
set ylabel 'seconds'
set key outside bottom center horizontal
set arrow from graph 0, first {d['dlaunch_heartbeat_timeout_s']} to graph 1, first {d['dlaunch_heartbeat_timeout_s']} nohead dt 2
plot 'nodeloss.dat' using 2:xtic(1) title 'dlaunch (dashed: its heartbeat timeout)', '' using 3 title 'torchrun c10d'
""")
        made.append("nodeloss.png")
    d = load("rdzv")
    if d and d.get("cases"):
        with open(os.path.join(RESULTS, "rdzv.dat"), "w") as f:
            for c in d["cases"]:
                f.write(f"{c['nodes']} {c['join_ms']['median']} "
                        f"{c['server_hwm_bytes'] / 2**20}\n")
        gnuplot(term + """set output 'rdzv.png'
set title 'dlaunch-rdzv: N nodes joining one job'
set logscale x 2
set xlabel 'nodes'
set ylabel 'first join to all assigned (ms)'
set y2label 'server VmHWM (MiB)'
set y2tics
set ytics nomirror
plot 'rdzv.dat' using 1:2 with linespoints title 'join time', \\
     '' using 1:3 axes x1y2 with linespoints title 'server memory'
""")
        made.append("rdzv.png")
    d = load("etcd")
    if d and d.get("first"):
        with open(os.path.join(RESULTS, "etcd.dat"), "w") as f:
            for c in d["first"]:
                dl = c["dlaunch"]["median"] if c.get("dlaunch") else 0
                tr = c["torchrun"]["median"] if c.get("torchrun") else 0
                f.write(f"{c['nodes']} {dl} {tr}\n")
        gnuplot(term + """set output 'etcd.png'
set title 'N agents, one 3-member etcd: start to the last worker running'
set style data histograms
set style fill solid
set logscale y
set ylabel 'seconds (log)'
set xlabel 'agents'
set key outside bottom center horizontal
plot 'etcd.dat' using 2:xtic(1) title 'dlaunch (etcd v3)', '' using 3 title 'torchrun (etcd-v2)'
""")
        made.append("etcd.png")
    if d and any(c.get("join_ms") for c in d.get("load", [])):
        with open(os.path.join(RESULTS, "etcd_load.dat"), "w") as f:
            for c in d["load"]:
                if c.get("join_ms") and \
                        c.get("lease_ttl_s", LOAD_TTL_S) == LOAD_TTL_S:
                    f.write(f"{c['nodes']} {c['join_ms']['median'] / 1000} "
                            f"{c['requests_per_join']['median']}\n")
        gnuplot(term + """set output 'etcd_load.png'
set title 'dlaunch over etcd: N simulated agents to the first round'
set logscale x 2
set xlabel 'nodes'
set ylabel 'seconds'
set y2label 'etcd requests per join'
set y2tics
set ytics nomirror
set yrange [0:*]
set y2range [0:*]
plot 'etcd_load.dat' using 1:2 with linespoints title 'first round', \\
     '' using 1:3 axes x1y2 with linespoints title 'requests per join'
""")
        made.append("etcd_load.png")
    d = load("dist")
    if d and d.get("cases"):
        for world in d["worlds"]:
            with open(os.path.join(RESULTS, f"dist{world}.dat"), "w") as f:
                for c in d["cases"]:
                    if c["world"] != world or "ratio" not in c:
                        continue
                    f.write(f"{c['bytes']} {c['dlaunch']['latency_us']} "
                            f"{c['gloo']['latency_us']} "
                            f"{c['dlaunch']['busbw_gbps']} "
                            f"{c['gloo']['busbw_gbps']}\n")
        gnuplot(term + """set output 'dist_latency.png'
set title 'all-reduce time by size (float32 sum, loopback)'
set logscale xy
set xlabel 'bytes'
set ylabel 'microseconds'
set key left top
plot 'dist2.dat' using 1:2 with linespoints title 'dlaunch tcp, 2 ranks', \\
     'dist2.dat' using 1:3 with linespoints title 'gloo, 2 ranks', \\
     'dist4.dat' using 1:2 with linespoints title 'dlaunch tcp, 4 ranks', \\
     'dist4.dat' using 1:3 with linespoints title 'gloo, 4 ranks'
""")
        gnuplot(term + """set output 'dist_busbw.png'
set title 'all-reduce bus bandwidth 2(n-1)/n * bytes / time'
set logscale x
set xlabel 'bytes'
set ylabel 'GB/s'
set key left top
plot 'dist2.dat' using 1:4 with linespoints title 'dlaunch tcp, 2 ranks', \\
     'dist2.dat' using 1:5 with linespoints title 'gloo, 2 ranks', \\
     'dist4.dat' using 1:4 with linespoints title 'dlaunch tcp, 4 ranks', \\
     'dist4.dat' using 1:5 with linespoints title 'gloo, 4 ranks'
""")
        made += ["dist_latency.png", "dist_busbw.png"]
    return made
