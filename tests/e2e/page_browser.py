#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""page_browser.py - the status page of dlaunch-rdzv in headless Chromium
(driven by cdp.py), for rdzv_page.sh, which started the servers and the
agents. Prints "ok - ..." / "not ok - ..." lines.

  page_browser.py --chromium BIN --profile DIR --url URL --job JOB
      --fail-file PATH --token-url URL --token-job JOB --token TOKEN
      [--screenshot PNG]

URL serves a running 3-agent job JOB; creating PATH makes one of its
workers fail with markup in its stderr. TOKEN_URL is a server that wants
TOKEN and has the job TOKEN_JOB."""

import argparse
import json
import os
import sys
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


def api(url, token=None):
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
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


def main():
    p = argparse.ArgumentParser()
    for opt in ("chromium", "profile", "url", "job", "fail-file", "token-url",
                "token-job", "token", "xss-job"):
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
        job_scenario(b, a)
        token_scenario(b, a)
    except (CdpError, OSError, ValueError) as e:
        check("the browser session ran to its end (%s)" % e, False)
    finally:
        b.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
