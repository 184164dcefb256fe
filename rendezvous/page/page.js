/*
 * page.js - the status page of dlaunch-rdzv. Everything it shows comes
 * from the JSON API (docs/http-api.md) of the server that served it:
 * "/" lists the jobs, "/jobs/{job}" shows one. It keeps itself current:
 * a job's page long-polls the job's watch (answered as soon as the job
 * leaves its round, else after two seconds, longer for large jobs:
 * watchMs), the list refreshes every two seconds. A job's page also shows
 * its latest hang report (verdict, reason, every rank's stacks folded,
 * each in a <details>) and a "Dump stacks" button that asks the job's
 * agents for one (POST /v1/jobs/{job}/dump). With a token configured the
 * API answers 401 and the page asks for the token once (kept for the tab
 * in sessionStorage) and sends it as the bearer token on every call.
 * Text from nodes (stacks included) is only ever set as text
 * (textContent), never parsed as markup.
 */
"use strict";

const TOKEN_KEY = "dlaunch-rdzv-token";
const REFRESH_MS = 2000;
const WATCH_MS = 2000;
const SVG_NS = "http://www.w3.org/2000/svg";

let token = sessionStorage.getItem(TOKEN_KEY);
let wakeUp = null; /* resolves the loop's pause once a token is given */
/* the hang report last fetched for this job ({key, data}), the <details>
 * the reader opened (kept across re-renders), what the dump button said */
let hangCache = { key: null, data: null };
const openDetails = new Set();
let dumpStatus = "";

class Unauthorized extends Error {}

/* el builds an element; children are nodes, anything else is made text
 * (never markup). */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function setConn(text, error) {
  const c = document.getElementById("conn");
  c.textContent = text;
  c.className = error ? "error" : "";
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/* api GETs a path of the JSON API with the token (or POSTs post as JSON
 * when given); throws Unauthorized on 401 (the prompt is shown), Error with the
 * server's message otherwise. */
async function api(path, post) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const init = { headers, cache: "no-store" };
  if (post !== undefined) {
    init.method = "POST";
    init.body = JSON.stringify(post);
    headers["Content-Type"] = "application/json";
  }
  const r = await fetch(path, init);
  if (r.status === 401) throw new Unauthorized("token needed");
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(path + ": HTTP " + r.status);
  }
  if (!r.ok) {
    const err = new Error(body && body.error ? body.error : "HTTP " + r.status);
    err.status = r.status;
    throw err;
  }
  return body;
}

/* askToken hides every datum and shows only the prompt; it resolves
 * once a token was entered. */
function askToken(wrong) {
  document.getElementById("main").replaceChildren();
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-error").textContent = wrong
    ? "The server refused that token."
    : "";
  setConn("");
  document.getElementById("token-input").focus();
  return new Promise((resolve) => {
    wakeUp = resolve;
  });
}

document.getElementById("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token-input");
  token = input.value.trim();
  input.value = "";
  sessionStorage.setItem(TOKEN_KEY, token);
  document.getElementById("token-form").hidden = true;
  if (wakeUp) {
    const w = wakeUp;
    wakeUp = null;
    w();
  }
});

/* --- formatting --- */

function age(ms) {
  if (ms === null || ms === undefined) return "-";
  const s = ms / 1000;
  if (s < 10) return s.toFixed(1) + " s";
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function clock(wallMs) {
  return new Date(wallMs).toLocaleString();
}

const REASONS = {
  failure: "a worker failed",
  heartbeat_timeout: "a node stopped heartbeating",
  scale_up: "a node joined (scale up)",
  node_restarted: "a node's agent restarted",
  leave: "a node left",
  all_succeeded: "every node succeeded",
  restart_budget_exhausted: "failed past the restart budget",
  join_timeout: "too few nodes before the join timeout",
};

function reasonText(r) {
  if (!r.end_reason) return r.formed_ms_ago === null ? "forming" : "running";
  const why = REASONS[r.end_reason] || r.end_reason;
  return r.end_node ? why + " (" + r.end_node + ")" : why;
}

function badge(state) {
  return el("span", { class: "badge s-" + state, "data-state": state }, state);
}

function table(cls, headers, rows, emptyText) {
  if (!rows.length) return el("p", { class: "empty " + cls }, emptyText);
  const head = el("tr", {}, ...headers.map((h) => el("th", {}, h)));
  const body = el("tbody", {});
  for (const cells of rows) {
    const tr = el("tr", {});
    for (const [k, v, wrap] of cells)
      tr.appendChild(el("td", { class: k + (wrap ? " wrap" : "") }, v));
    body.appendChild(tr);
  }
  return el("div", { class: "scroll" },
    el("table", { class: cls }, el("thead", {}, head), body));
}

function fact(label, value, id) {
  return el("div", {}, el("dt", {}, label), el("dd", { id }, String(value)));
}

/* --- the job list --- */

function renderJobs(data) {
  const rows = data.jobs.map((j) => {
    const link = el("a", { href: "/jobs/" + encodeURIComponent(j.job) }, j.job);
    return [
      ["job", link],
      ["state", badge(j.state)],
      ["round", String(j.round)],
      ["nnodes", String(j.nnodes)],
      ["world_size", String(j.world_size)],
      ["restarts", j.restart_count + " of " + j.max_restarts],
    ];
  });
  document.getElementById("main").replaceChildren(
    el("h1", {}, "Jobs"),
    table("jobs", ["job", "state", "round", "nodes", "world size",
      "restarts used"], rows, "No jobs yet."));
}

/* --- one job --- */

/* how a member's workers entered the round (docs/worker-protocol.md) */
const ENTERED = {
  started: "started",
  in_place: "kept, re-formed in place",
  restarted: "stopped and started again",
};

function memberRows(job) {
  const stale = job.heartbeat_timeout_ms || 5000;
  return job.members.map((m) => {
    const ranks = m.nproc > 1
      ? m.rank_offset + "-" + (m.rank_offset + m.nproc - 1)
      : String(m.rank_offset);
    const hb = el("span", m.last_seen_ms_ago > stale ? { class: "stale" } : {},
      age(m.last_seen_ms_ago));
    return [
      ["node_rank", String(m.node_rank)],
      ["node_id", m.node_id, true],
      ["addr", m.addr],
      ["ranks", ranks],
      ["status", m.status],
      ["heartbeat", hb],
      ["entered", m.recovery ? ENTERED[m.recovery.how] || m.recovery.how : "-"],
    ];
  });
}

function renderFailures(job) {
  const box = el("div", { id: "failures" });
  if (!job.failures.length) {
    box.appendChild(el("p", { class: "empty" }, "No failures."));
    return box;
  }
  job.failures.forEach((f, i) => {
    const how = f.signal ? "signal " + f.signal
      : f.exitcode !== undefined && f.exitcode !== null
        ? "exit code " + f.exitcode : "no exit status";
    const when = typeof f.time_ms === "number" ? clock(f.time_ms) : "time unknown";
    const what = "round " + f.round + ", node " + f.node_id + ", rank " +
      (f.rank !== undefined ? f.rank : "?") +
      (f.local_rank !== undefined ? " (local " + f.local_rank + ")" : "") +
      ": " + how;
    const item = el("div", { class: "failure" + (i === 0 ? " first" : "") },
      i === 0 ? el("span", { class: "badge root" }, "root cause") : null,
      i === 0 ? " " : null,
      el("span", { class: "what" }, what),
      el("div", { class: "when" }, when),
      f.message ? el("pre", { class: "message" }, String(f.message)) : null);
    box.appendChild(item);
  });
  return box;
}

/* renderTimeline draws the rounds as bars on one time axis: grey while
 * the round was forming, coloured while it ran (by why it ended). */
function renderTimeline(job) {
  const rounds = job.rounds || [];
  const wrap = el("div", { id: "timeline" });
  if (!rounds.length) return wrap;
  const W = 720, left = 92, right = 12, rowH = 22, top = 8;
  const H = top + rounds.length * rowH + 22;
  const span = Math.max(1000, ...rounds.map((r) => r.opened_ms_ago));
  const x = (ago) => left + (W - left - right) * (1 - ago / span);
  const s = svg("svg", { class: "timeline", viewBox: "0 0 " + W + " " + H,
    role: "img", "aria-label": "timeline of the job's rounds" });
  rounds.forEach((r, i) => {
    const y = top + i * rowH;
    const end = r.ended_ms_ago === null ? 0 : r.ended_ms_ago;
    const formed = r.formed_ms_ago;
    s.appendChild(svg("text", { x: 4, y: y + 14 },
      "round " + r.round + (r.nnodes ? " · " + r.nnodes + "n" : "")));
    const wEnd = formed === null ? end : formed;
    s.appendChild(svg("rect", { class: "waiting", x: x(r.opened_ms_ago),
      y: y + 3, width: Math.max(1, x(wEnd) - x(r.opened_ms_ago)), height: 14 }));
    if (formed !== null) {
      const bar = svg("rect", { class: "ran r-" + (r.end_reason || "running"),
        x: x(formed), y: y + 3, width: Math.max(2, x(end) - x(formed)),
        height: 14 });
      bar.appendChild(svg("title", {}, "round " + r.round + ": " + reasonText(r)));
      s.appendChild(bar);
    }
  });
  const axisY = top + rounds.length * rowH + 4;
  s.appendChild(svg("line", { class: "axis", x1: left, x2: W - right,
    y1: axisY, y2: axisY }));
  s.appendChild(svg("text", { x: left, y: axisY + 14 }, "-" + age(span)));
  s.appendChild(svg("text", { x: W - right - 24, y: axisY + 14 }, "now"));
  wrap.appendChild(s);
  return wrap;
}

function roundRows(job, fetchedAt) {
  return (job.rounds || []).slice().reverse().map((r) => {
    const formed = r.formed_ms_ago === null ? "-" : clock(fetchedAt - r.formed_ms_ago);
    const ran = r.formed_ms_ago === null ? "-"
      : age(r.formed_ms_ago - (r.ended_ms_ago === null ? 0 : r.ended_ms_ago));
    return [
      ["round", String(r.round) + (r.recovered ? " (recovered)" : "")],
      ["formed", formed],
      ["nnodes", r.nnodes ? r.nnodes + " / " + r.world_size : "-"],
      ["ran", ran],
      ["end", reasonText(r), true],
    ];
  });
}

/* --- the hang report --- */

/* rangesText: "0,2-4" for sorted rank numbers */
function rangesText(ranks) {
  const out = [];
  for (let i = 0; i < ranks.length; i++) {
    let j = i;
    while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
    out.push(j === i ? String(ranks[i]) : ranks[i] + "-" + ranks[j]);
    i = j;
  }
  return out.join(",");
}

/* stackKey: a rank's stacks without addresses and process or thread ids,
 * so that ranks blocked in the same place fold into one (as the server's
 * text version does) */
function stackKey(w) {
  const norm = (t) => typeof t === "string"
    ? t.replace(/0x[0-9a-fA-F]+/g, "0x").replace(/\b(PID|TID|LWP|pid) \d+/g, "$1 #")
    : "";
  return norm(w.python) + "\u0000" + norm(w.native);
}

/* hangWorkers: every worker of the reports, one per rank, by rank */
function hangWorkers(hang) {
  const seen = new Map();
  for (const rep of (hang && hang.reports) || []) {
    for (const w of Array.isArray(rep.workers) ? rep.workers : []) {
      if (!w || typeof w.rank !== "number" || seen.has(w.rank)) continue;
      seen.set(w.rank, Object.assign({}, w, { node: String(rep.node) }));
    }
  }
  return [...seen.values()].sort((a, b) => a.rank - b.rank);
}

function workerLine(w) {
  const parts = ["rank " + w.rank, "node " + w.node];
  if (w.state) parts.push(String(w.state) + (w.wchan ? " in " + w.wchan : ""));
  if (typeof w.step === "number") parts.push("step " + w.step);
  if (typeof w.cpu_ms === "number" && typeof w.interval_ms === "number")
    parts.push("cpu " + w.cpu_ms + " of " + w.interval_ms + " ms");
  const flight = Array.isArray(w.flight) ? w.flight : [];
  const last = flight[flight.length - 1];
  if (last && typeof last === "object")
    parts.push("last collective #" + last.seq + " " + (last.op || "?") +
      " " + (last.state || "?"));
  return parts.join(", ");
}

/* details: a <details> whose open state survives the page's re-renders */
function details(key, summary, ...content) {
  const d = el("details", { "data-key": key }, el("summary", {}, summary),
    ...content);
  if (openDetails.has(key)) d.open = true;
  d.addEventListener("toggle", () => {
    if (d.open) openDetails.add(key);
    else openDetails.delete(key);
  });
  return d;
}

/* renderStacks: the ranks' stacks, ranks with the same stacks in one
 * <details>; the groups holding a stuck rank (stuck: its ranks) first and
 * marked */
function renderStacks(hang, stuck) {
  const workers = hangWorkers(hang);
  const box = el("div", { id: "hang-ranks" });
  const groups = new Map();
  for (const w of workers) {
    const k = stackKey(w);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(w);
  }
  const isStuck = (g) => g.some((w) => stuck.includes(w.rank));
  const ordered = [...groups.values()].sort((x, y) => isStuck(y) - isStuck(x));
  for (const g of ordered) {
    const lead = g[0];
    const same = g.slice(1).map((w) => w.rank);
    const content = [];
    for (const w of g)
      content.push(el("p", { class: "worker" }, workerLine(w)));
    for (const w of g)
      for (const n of Array.isArray(w.notes) ? w.notes : [])
        content.push(el("p", { class: "note" }, "rank " + w.rank + ": " + n));
    if (typeof lead.python === "string" && lead.python)
      content.push(el("h4", {}, "Python"), el("pre", { class: "stack python" },
        lead.python));
    if (typeof lead.native === "string" && lead.native)
      content.push(el("h4", {}, "native"), el("pre", { class: "stack native" },
        lead.native));
    if (!lead.python && !lead.native)
      content.push(el("p", { class: "empty" }, "No stacks (see the notes)."));
    const title = "rank " + lead.rank + " (node " + lead.node + ")" +
      (same.length ? "; " + (same.length === 1 ? "rank " : "ranks ") +
        rangesText(same) + ": same as rank " + lead.rank : "");
    const d = details("rank-" + lead.rank, (isStuck(g) ? "stuck: " : "") +
      title, ...content);
    if (isStuck(g)) d.classList.add("stuck");
    box.appendChild(d);
  }
  return box;
}

function renderHang(job, hang) {
  const base = "/v1/jobs/" + encodeURIComponent(job.job);
  const button = el("button", { type: "button", id: "dump-button" },
    "Dump stacks");
  button.disabled = job.state !== "RUNNING";
  button.addEventListener("click", async () => {
    button.disabled = true;
    dumpStatus = "asking the agents...";
    document.getElementById("dump-status").textContent = dumpStatus;
    try {
      const t = await api(base + "/dump", { kind: "dump", by: "cli" });
      dumpStatus = (t.opened ? "dump requested: trigger " : "a dump is " +
        "already under way: trigger ") + t.id;
    } catch (e) {
      if (e instanceof Unauthorized) throw e;
      dumpStatus = "cannot dump: " + e.message;
    }
    document.getElementById("dump-status").textContent = dumpStatus;
  });
  const box = el("section", { id: "hang" },
    el("h2", {}, "Hang report"),
    el("div", { class: "hang-actions" }, button, " ",
      el("span", { id: "dump-status" }, dumpStatus)));
  const h = job.hang;
  if (!h || !h.trigger) {
    box.appendChild(el("p", { class: "empty", id: "hang-none" },
      "No hang report. Dump stacks collects every rank's stacks, states " +
      "and collectives without stopping the job."));
    return box;
  }
  const t = h.trigger;
  box.appendChild(el("p", { id: "hang-trigger" },
    "trigger " + t.id + ": " + t.kind + " by " + t.by + " at " +
    clock(t.time_ms) + "; " + h.reported + " of " + h.asked +
    " nodes reported" + (t.open ? " (collecting)" : "")));
  const a = h.analysis;
  if (a) {
    box.appendChild(el("div", { class: "verdict v-" + a.verdict, id: "hang-verdict" },
      el("span", { class: "badge v-" + a.verdict, id: "hang-verdict-badge" }, a.verdict),
      " ", el("span", { id: "hang-reason" }, a.reason)));
    box.appendChild(el("p", { id: "hang-stuck" },
      "stuck ranks: " + (a.stuck.length ? rangesText(a.stuck) : "none") +
      "; stragglers: " + (a.stragglers.length ? rangesText(a.stragglers) : "none") +
      (a.missing_nodes.length ? "; nodes that did not report: " +
        a.missing_nodes.join(", ") : "")));
  }
  if (hang && hang.trigger && hang.trigger.id === t.id) {
    box.appendChild(renderStacks(hang, a && Array.isArray(a.stuck) ? a.stuck : []));
    if (hang.text)
      box.appendChild(details("hang-text", "the report as text",
        el("pre", { class: "stack text" }, hang.text)));
  }
  return box;
}

function renderJob(job, fetchedAt) {
  const min = job.min_nodes === job.max_nodes ? String(job.min_nodes)
    : job.min_nodes + "-" + job.max_nodes;
  const spares = job.waiting.map((w) => [
    ["node_id", w.node_id, true], ["addr", w.addr], ["nproc", String(w.nproc)],
  ]);
  document.getElementById("main").replaceChildren(
    el("h1", {}, el("span", { id: "job-name" }, job.job), " ", badge(job.state)),
    el("dl", { class: "summary" },
      fact("state", job.state, "job-state"),
      fact("round", job.round, "job-round"),
      fact("nodes", job.members.length + " (wants " + min + ")", "job-nodes"),
      fact("world size", job.world_size, "job-world"),
      fact("restarts used", job.restart_count + " of " + job.max_restarts,
        "job-restarts"),
      fact("master", job.master_addr ? job.master_addr + ":" + job.master_port
        : "-", "job-master"),
      fact("round changed", age(job.last_change_ms_ago) + " ago", "job-changed")),
    el("h2", {}, "Members"),
    table("members", ["node rank", "node", "address", "ranks", "status",
      "last heartbeat", "workers entered the round"], memberRows(job), "No members: the round is forming."),
    el("h2", {}, "Waiting and spare nodes"),
    table("spares", ["node", "address", "workers"], spares, "None."),
    renderHang(job, hangCache.data),
    el("h2", {}, "Failures"),
    renderFailures(job),
    el("h2", {}, "Rounds"),
    renderTimeline(job),
    table("rounds", ["round", "formed", "nodes / world", "ran for",
      "ended because"], roundRows(job, fetchedAt), "No rounds."));
}

/* --- the loops --- */

/* watchMs: how long the job's page waits for a change before it fetches
 * the job again (heartbeat ages, statuses). A job's JSON grows with its
 * nodes and costs the server about 4 us a node to build, so the pace
 * slows with the size (2 ms a node, 2 s to 30 s): an open page stays
 * under half a percent of the server's core. A new round or the job's
 * end answers the watch at once, whatever the pace. */
function watchMs(job) {
  const nodes = job.members.length + job.waiting.length;
  return Math.min(30000, Math.max(WATCH_MS, nodes * 2));
}

async function jobsLoop() {
  for (;;) {
    try {
      renderJobs(await api("/v1/jobs"));
      setConn("updated " + new Date().toLocaleTimeString());
      await sleep(REFRESH_MS);
    } catch (e) {
      await trouble(e);
    }
  }
}

/* fetchHang fetches the job's latest hang report (stacks included) when
 * it changed since the last fetch: a new trigger, or more nodes reported */
async function fetchHang(base, job) {
  const h = job.hang;
  if (!h || !h.trigger) {
    hangCache = { key: null, data: null };
    return;
  }
  const key = h.trigger.id + ":" + h.reported;
  if (key === hangCache.key) return;
  const data = await api(base + "/hang?id=" + encodeURIComponent(h.trigger.id));
  hangCache = { key, data };
}

async function jobLoop(name) {
  const base = "/v1/jobs/" + encodeURIComponent(name);
  for (;;) {
    try {
      const fetchedAt = Date.now();
      const job = await api(base);
      await fetchHang(base, job);
      renderJob(job, fetchedAt);
      setConn("updated " + new Date().toLocaleTimeString());
      if (job.state === "SUCCEEDED" || job.state === "FAILED")
        await sleep(REFRESH_MS * 2);
      else
        await api(base + "/watch?round=" + job.round + "&wait_ms=" +
          watchMs(job));
    } catch (e) {
      if (e.status === 404) {
        document.getElementById("main").replaceChildren(
          el("h1", {}, name), el("p", { class: "empty" }, "No such job (yet)."));
        setConn("");
        await sleep(REFRESH_MS);
      } else {
        await trouble(e);
      }
    }
  }
}

/* trouble: a 401 asks for the token (again); anything else is shown and
 * retried. */
async function trouble(e) {
  if (e instanceof Unauthorized) {
    const wrong = !!token;
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    await askToken(wrong);
    return;
  }
  setConn("cannot reach the server: " + e.message + "; retrying", true);
  await sleep(REFRESH_MS);
}

const path = window.location.pathname;
if (path.startsWith("/jobs/"))
  jobLoop(decodeURIComponent(path.slice(6)));
else
  jobsLoop();
