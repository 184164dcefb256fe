#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""page_browser.py - the status page of dlaunch-rdzv in headless Chromium
(driven by cdp.py), for rdzv_page.sh, which started the servers and the
agents. Prints "ok - ..." / "not ok - ..." lines.

  page_browser.py --chromium BIN --profile DIR --url URL --job JOB
      --fail-file PATH --token-url URL --token-job JOB --token TOKEN
      --hang-job JOB [--screenshot PNG]

URL serves a running 3-agent job JOB; creating PATH makes one of its
workers fail with markup in its stderr. TOKEN_URL is a server that wants
TOKEN and has the job TOKEN_JOB. HANG_JOB on URL is a running job of two
nodes (joined with incarnation "inc-NODE", 2 workers each) that no agent
answers: this script posts their hang reports itself."""

import argparse
import json
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, CdpError  # noqa: E402

failed = 0


def check(what, cond):
    global failed
    if cond:
        print("ok - " + what)
    else:
        print("not ok - " + what)
        failed += 1
    sys.stdout.flush()
    return cond


def api(url, token=None, post=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if post is not None:
        req.data = json.dumps(post).encode()
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def js(value):
    return json.dumps(value)


# the members table as the page shows it: [node rank, node, address, ranks]
MEMBERS = """[...document.querySelectorAll('table.members tbody tr')].map(
  tr => [...tr.querySelectorAll('td')].slice(0, 4).map(td => td.textContent))"""


def expected_members(job):
    rows = []
    for m in job["members"]:
        first, last = m["rank_offset"], m["rank_offset"] + m["nproc"] - 1
        ranks = str(first) if first == last else "%d-%d" % (first, last)
        rows.append([str(m["node_rank"]), m["node_id"], m["addr"], ranks])
    return rows


def job_scenario(b, a):
    base = a.url.rstrip("/")
    b.navigate(base + "/")
    listed = b.wait("[...document.querySelectorAll('table.jobs td.job')]"
                    ".map(td => td.textContent).includes(%s)" % js(a.job), 15)
    check("the job list at / shows the running job %s" % a.job, listed)

    b.navigate(base + "/jobs/" + a.job)
    job = api(base + "/v1/jobs/" + a.job)
    shown = b.wait("document.querySelectorAll('table.members tbody tr')"
                   ".length === 3 && document.getElementById('job-round')"
                   ".textContent === %s" % js(str(job["round"])), 15)
    check("/jobs/%s shows 3 members at round %d" % (a.job, job["round"]), shown)
    rows = b.evaluate(MEMBERS)
    check("members, node ranks, addresses and ranks as GET /v1/jobs/%s "
          "reports them (%s)" % (a.job, rows), rows == expected_members(job))
    check("state RUNNING shown",
          b.evaluate("document.getElementById('job-state').textContent")
          == "RUNNING")
    check("restarts used of the budget shown (0 of 3)",
          b.evaluate("document.getElementById('job-restarts').textContent")
          == "0 of 3")
    check("each member shows the age of its last heartbeat",
          b.wait("[...document.querySelectorAll('table.members td.heartbeat')]"
                 ".every(td => / s$/.test(td.textContent))", 5))

    # a marker that a reload would lose
    b.evaluate("window.__no_reload = 'still here'; document.title")
    title = b.evaluate("document.title")
    round1 = job["round"]
    open(a.fail_file, "w").close()
    moved = b.wait(
        "Number(document.getElementById('job-round').textContent) > %d && "
        "document.querySelectorAll('#failures .failure').length > 0 && "
        "document.querySelectorAll('table.members tbody tr').length === 3"
        % round1, 30)
    check("after a worker failure the page shows the new round, its members "
          "and the failure", moved)
    check("... without a reload",
          b.evaluate("window.__no_reload") == "still here")
    job = api(base + "/v1/jobs/" + a.job)
    f0 = job["failures"][0] if job["failures"] else {}
    first = b.evaluate(
        "(() => { const f = document.querySelector('#failures .failure');"
        " return f ? {root: !!f.querySelector('.badge.root'),"
        " what: f.querySelector('.what').textContent,"
        " message: (f.querySelector('pre.message') || {}).textContent} :"
        " null })()") or {}
    check("the first failure is marked as the root cause", first.get("root"))
    want = "node %s, rank %s" % (f0.get("node_id"), f0.get("rank"))
    check("it names the node, the rank (%s) and the exit code %s"
          % (want, f0.get("exitcode")),
          want in (first.get("what") or "") and
          ("exit code %s" % f0.get("exitcode")) in (first.get("what") or ""))
    msg = first.get("message") or ""
    check("the failure shows the tail of the worker's stderr (its "
          "traceback's last line)", "RuntimeError: CUDA out of memory" in msg)
    check("the timeline draws both rounds as SVG, the first ended by the "
          "failure",
          b.wait("document.querySelectorAll('svg.timeline rect.ran').length "
                 ">= 2 && document.querySelector('svg.timeline "
                 "rect.r-failure') !== null", 10))
    check("the rounds table says why round %d ended" % round1,
          b.evaluate("[...document.querySelectorAll('table.rounds td.end')]"
                     ".some(td => td.textContent.startsWith('a worker "
                     "failed'))"))
    check("restarts used went to 1 of 3",
          b.wait("document.getElementById('job-restarts').textContent === "
                 "'1 of 3'", 10))

    b.viewport(1280, 800, False)
    b.wait("document.querySelectorAll('table.members tbody tr').length === 3",
           10)
    if a.screenshot:
        b.screenshot(a.screenshot)
        check("screenshot taken", os.path.getsize(a.screenshot) > 1000)
    b.viewport(390, 844, True)
    fits = b.wait("document.documentElement.scrollWidth <= "
                  "document.documentElement.clientWidth + 1", 5)
    check("on a 390 px phone screen the page needs no sideways scrolling",
          fits)


def xss_scenario(b, a):
    """A job whose failed worker wrote markup to stderr: the page shows it
    as text and runs none of it (its own job, so that the screenshot of
    the main job shows a realistic failure)."""
    base = a.url.rstrip("/")
    b.navigate(base + "/jobs/" + a.xss_job)
    shown = b.wait("document.querySelectorAll('#failures .failure pre.message')"
                   ".length > 0", 30)
    check("the markup job's failure is shown", shown)
    msg = b.evaluate("(document.querySelector('#failures .failure "
                     "pre.message') || {}).textContent") or ""
    check("the stderr tail is shown as text: <script> and <img onerror> "
          "appear literally", "<script>" in msg and "<img src=x onerror=" in msg)
    check("no element came from it: no <script> or <img> inside the page's "
          "content",
          b.evaluate("document.querySelectorAll('#main script, #main img')"
                     ".length") == 0)
    check("and nothing ran (no marker set, title not changed to 'pwned')",
          b.evaluate("window.__pwned === undefined") and
          b.evaluate("document.title") != "pwned")


def token_scenario(b, a):
    base = a.token_url.rstrip("/")
    b.viewport(1280, 800, False)
    b.navigate(base + "/jobs/" + a.token_job)
    prompt = b.wait("!document.getElementById('token-form').hidden", 15)
    check("with a token configured the page asks for it", prompt)
    hidden = b.evaluate(
        "document.getElementById('main').childElementCount === 0 && "
        "!document.body.innerText.includes(%s)" % js(a.token_job))
    check("... and shows nothing else (no job, no member)", hidden)
    b.evaluate("document.getElementById('token-input').value = 'wrong';"
               "document.getElementById('token-form').requestSubmit(); 1")
    refused = b.wait("document.getElementById('token-error').textContent "
                     "!== '' && !document.getElementById('token-form').hidden",
                     15)
    check("a wrong token is refused and the prompt stays", refused)
    check("... still showing nothing",
          b.evaluate("document.getElementById('main').childElementCount "
                     "=== 0 && !document.body.innerText.includes(%s)"
                     % js(a.token_job)))
    b.evaluate("document.getElementById('token-input').value = %s;"
               "document.getElementById('token-form').requestSubmit(); 1"
               % js(a.token))
    shown = b.wait("(document.getElementById('job-name') || {}).textContent "
                   "=== %s" % js(a.token_job), 15)
    check("with the right token the job is shown", shown)
    # the page keeps calling the API (watch, then the job again): with
    # the token on every call it keeps showing the job, never the prompt
    job = api(base + "/v1/jobs/" + a.token_job, a.token)
    b.evaluate("window.__renders = 0; new MutationObserver(() => "
               "window.__renders++).observe(document.getElementById('main'),"
               " {childList: true}); 1")
    again = b.wait("window.__renders >= 2", 15)
    check("later API calls carry the token too (the page re-rendered %s "
          "times, no prompt)" % b.evaluate("window.__renders"),
          again and b.evaluate("document.getElementById('token-form').hidden")
          and b.evaluate("document.getElementById('job-name') !== null"))
    check("the API agrees on the job", job["job"] == a.token_job)
    b.navigate(base + "/")
    check("the token is asked once: after navigating to / the job list "
          "shows without a second prompt",
          b.wait("[...document.querySelectorAll('table.jobs td.job')]"
                 ".map(td => td.textContent).includes(%s) && "
                 "document.getElementById('token-form').hidden"
                 % js(a.token_job), 15))


def hang_report(job, node, trigger, round_, first_rank, stuck, markup):
    """A node report of two workers from first_rank: every rank is inside
    all_reduce #41 since 5 s before the trigger but stuck, which finished
    #40 and sleeps; its Python stack carries markup."""
    t = trigger["time_ms"]
    workers = []
    for rank in (first_rank, first_rank + 1):
        flight = [{"seq": 40, "op": "all_reduce", "bytes": 4096,
                   "state": "finished", "t_ms": t - 6000,
                   "done_ms": t - 5990, "step": 40}]
        frame = '  File "/job/train.py", line 30 in step\n'
        if rank == stuck:
            frame = '  File "%s", line 7 in load\n' % markup
        else:
            flight.append({"seq": 41, "op": "all_reduce", "bytes": 4096,
                           "state": "entered", "t_ms": t - 5000,
                           "step": 41})
        workers.append({
            "rank": rank, "local_rank": rank - first_rank,
            "pid": 700 + rank, "state": "sleeping", "proc_state": "S",
            "wchan": "do_poll", "cpu_ms": 0, "interval_ms": 1000,
            "threads": 2, "step": 40, "step_age_ms": 5200,
            "python": "Thread 0x7f%02d (most recent call first):\n%s"
                      % (rank, frame),
            "native": "TID %d:\n#0  0x00007f%04x poll\n" % (700 + rank, rank),
            "flight": flight})
    return {"version": 1, "job": job, "node": node, "host": "host-" + node,
            "round": round_, "trigger": trigger, "time_ms": t + 800,
            "nproc": 2, "workers": workers}


def hang_scenario(b, a):
    """The hang report section: the dump button opens a trigger, reports
    arriving show the verdict naming the stuck rank and the ranks' stacks
    folded, each in a <details> that stays open across re-renders, and
    markup in a stack is text."""
    base = a.url.rstrip("/")
    b.navigate(base + "/jobs/" + a.hang_job)
    ready = b.wait("document.getElementById('hang-none') !== null && "
                   "!document.getElementById('dump-button').disabled", 15)
    check("a running job's page has a Hang report section with a Dump "
          "stacks button", ready)
    b.evaluate("document.getElementById('dump-button').click(); 1")
    deadline = time.time() + 10
    hang = {}
    while time.time() < deadline:
        hang = api(base + "/v1/jobs/%s/hang" % a.hang_job)
        if hang.get("trigger"):
            break
        time.sleep(0.1)
    trig = hang.get("trigger") or {}
    check("the button opened a trigger (kind %s by %s)"
          % (trig.get("kind"), trig.get("by")),
          trig.get("kind") == "dump" and trig.get("by") == "cli")
    check("the page shows it, collecting",
          b.wait("(document.getElementById('hang-trigger') || {})"
                 ".textContent.includes(%s) && document.getElementById("
                 "'hang-trigger').textContent.includes('0 of 2 nodes "
                 "reported')" % js(trig.get("id", "?")), 15))
    check("and says the dump was asked for",
          b.evaluate("document.getElementById('dump-status').textContent")
          .startswith("dump requested: trigger "))

    job = api(base + "/v1/jobs/" + a.hang_job)
    trigger = {k: trig.get(k) for k in ("id", "kind", "by", "time_ms")}
    markup = '<img src=x onerror="window.__pwned = 3">'
    stuck_node = None
    for m in job["members"]:
        rep = hang_report(a.hang_job, m["node_id"], trigger, job["round"],
                          m["rank_offset"], 2, markup)
        if m["rank_offset"] == 2:
            stuck_node = m["node_id"]
        api(base + "/v1/jobs/%s/hang?incarnation=inc-%s"
            % (a.hang_job, m["node_id"]), post=rep)
    want = "rank 2 (node %s)" % stuck_node
    shown = b.wait("(document.getElementById('hang-verdict-badge') || {})"
                   ".textContent === 'hang' && document.getElementById("
                   "'hang-reason').textContent.includes(%s)" % js(want), 15)
    check("the verdict and its reason name the stuck %s" % want, shown)
    check("stuck ranks: 2",
          b.evaluate("document.getElementById('hang-stuck').textContent")
          .startswith("stuck ranks: 2;"))
    groups = b.evaluate("[...document.querySelectorAll('#hang-ranks > "
                        "details > summary')].map(s => s.textContent)")
    check("identical stacks are folded, the stuck rank's first: %s"
          % groups,
          groups == ["stuck: rank 2 (node %s)" % stuck_node,
                     "rank 0 (node %s); ranks 1,3: same as rank 0"
                     % next(m["node_id"] for m in job["members"]
                            if m["rank_offset"] == 0)])
    check("every stack is inside a <details>",
          b.evaluate("[...document.querySelectorAll('#hang pre.stack')]"
                     ".every(p => p.closest('details') !== null) && "
                     "document.querySelectorAll('#hang pre.stack').length "
                     ">= 4"))
    check("markup in a stack is shown as text and nothing ran",
          b.evaluate("[...document.querySelectorAll('#hang pre.stack')]"
                     ".some(p => p.textContent.includes(%s))" % js(markup))
          and b.evaluate("document.querySelectorAll('#main img').length")
          == 0 and b.evaluate("window.__pwned === undefined"))
    b.evaluate("document.querySelector('#hang-ranks details[data-key="
               "\"rank-2\"]').open = true; window.__renders = 0; "
               "new MutationObserver(() => window.__renders++).observe("
               "document.getElementById('main'), {childList: true}); 1")
    kept = b.wait("window.__renders >= 1 && document.querySelector("
                  "'#hang-ranks details[data-key=\"rank-2\"]').open", 20)
    check("a <details> the reader opened stays open when the page updates",
          kept)


def main():
    p = argparse.ArgumentParser()
    for opt in ("chromium", "profile", "url", "job", "fail-file", "token-url",
                "token-job", "token", "xss-job", "hang-job"):
        p.add_argument("--" + opt, required=True)
    p.add_argument("--screenshot")
    a = p.parse_args()
    try:
        b = Browser(a.chromium, a.profile)
    except (CdpError, OSError) as e:
        check("headless chromium starts (%s)" % e, False)
        return 1
    try:
        xss_scenario(b, a)
        hang_scenario(b, a)
        job_scenario(b, a)
        token_scenario(b, a)
    except (CdpError, OSError, ValueError) as e:
        check("the browser session ran to its end (%s)" % e, False)
    finally:
        b.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
