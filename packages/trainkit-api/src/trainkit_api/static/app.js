/* The trainkit dashboard: a small single-page app over the /v1 API.
 *
 * Routes (in the URL's hash, so the server serves one page):
 *   #/                  runs table, filtered by status and sweep group
 *   #/runs/<id>         one run: live loss and learning-rate curves, events, checkpoints, stop/resume
 *   #/sweeps            sweep groups;  #/sweeps/<group>  overlaid loss curves and a comparison table
 *   #/models            trained models; #/models/<run id>  one model and its playground
 *   #/evals/<report id> an eval report, base vs tuned
 * Run and model pages hold a playground: a prompt, the tuned and base answers streamed side by side.
 *   #/app               the provider's app: status, Deploy and Stop (providers with an app lifecycle)
 *
 * The bearer token is asked only when the server answers 401, once, and kept in sessionStorage. The live stream is read with
 * fetch() rather than EventSource, because EventSource cannot send an Authorization header
 * and the token must never go into a URL.
 */
(function () {
"use strict";

const TOKEN_KEY = "trainkit.token";
const TERMINAL = new Set(["succeeded", "failed", "stopped"]);
const STATUSES = ["pending", "running", "succeeded", "failed", "stopped", "preempted"];
const { LineChart } = window.TrainkitChart;

const app = {
  token: sessionStorage.getItem(TOKEN_KEY),
  cleanups: [], // run when leaving a view: abort streams, clear timers
  filters: { status: "", group: "" },
};

/* ------------------------------------------------------------------ helpers */

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return el;
}

/* Dollars: "$0.0123", "$1.23"; "–" when unpriced (null). */
function fmtCost(v) {
  if (v === undefined || v === null || !isFinite(Number(v))) return "–";
  const n = Number(v);
  return n < 1 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

/* A group's total cost: null when a run of it is unpriced. */
function totalCost(runs) {
  if (runs.some((r) => r.cost_usd === undefined || r.cost_usd === null)) return null;
  return runs.reduce((sum, r) => sum + Number(r.cost_usd), 0);
}

function fmtNum(v, digits) {
  if (v === undefined || v === null || v === "" || !isFinite(Number(v))) return "–";
  const n = Number(v);
  if (Number.isInteger(n) && digits === undefined) return n.toLocaleString("en");
  const a = Math.abs(n);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return n.toExponential(2);
  const text = n.toFixed(digits === undefined ? 4 : digits);
  return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text; // 0.4000 -> 0.4
}

function fmtDuration(seconds) {
  if (seconds === undefined || seconds === null || !isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

function fmtTime(epoch) {
  if (!epoch) return "–";
  const d = new Date(epoch * 1000);
  return d.toLocaleString("en-GB", { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function fmtBytes(n) {
  if (!isFinite(n)) return "–";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/* A message whose `quoted` parts are commands: those become <code>, the rest stays text (never HTML). */
function withCode(text) {
  return String(text).split("`").map((part, i) => (i % 2 ? h("code", {}, part) : part)).filter((part) => part !== "");
}

function statusBadge(status) {
  return h("span", { class: `badge status-${status || "unknown"}`, dataset: { status: status || "" } }, status || "unknown");
}

/* Lists may come bare or wrapped ({jobs: [...]}, {data: [...]}, ...). */
function listOf(data, ...keys) {
  if (Array.isArray(data)) return data;
  for (const k of [...keys, "items", "data", "results"]) if (data && Array.isArray(data[k])) return data[k];
  return [];
}

function runPreset(run) {
  const c = run.config || {};
  return c.preset || c.model_size || (run.metadata || {}).preset || run.base_model || "–";
}

/* How the run trains: sft, dpo or grpo (records from before methods are sft). */
function runMethod(run) {
  return String(run.method || (run.config || {}).method || "sft");
}

function runGroup(run) {
  return (run.metadata || {}).group_id || run.group_id || "";
}

function runDuration(run) {
  if (run.duration_seconds !== undefined && run.duration_seconds !== null) return run.duration_seconds;
  const start = run.started_at || run.created_at;
  if (!start) return null;
  const end = run.ended_at || run.completed_at || (TERMINAL.has(run.status) ? run.updated_at : Date.now() / 1000);
  return end - start;
}

function runFinalLoss(run) {
  const m = run.metrics || {};
  for (const k of ["final_loss", "train_loss", "loss", "last_loss"]) if (m[k] !== undefined && m[k] !== null) return m[k];
  return null;
}

function progressBar(step, total) {
  const frac = total ? Math.min(1, (step || 0) / total) : 0;
  return h("div", { class: "progress", title: total ? `${step || 0} / ${total}` : `${step || 0}` },
    h("div", { class: "progress-fill", style: `width:${(frac * 100).toFixed(1)}%` }),
    h("span", { class: "progress-text" }, total ? `${step || 0} / ${total}` : String(step || 0)));
}

/* ------------------------------------------------------------------ API access */

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function authHeaders(extra) {
  const headers = Object.assign({ Accept: "application/json" }, extra || {});
  if (app.token) headers.Authorization = `Bearer ${app.token}`;
  return headers;
}

async function api(path, options) {
  const opts = options || {};
  const sent = app.token;
  const headers = authHeaders(opts.body !== undefined ? { "Content-Type": "application/json" } : {});
  const resp = await fetch(path, {
    method: opts.method || "GET", headers, signal: opts.signal,
    body: opts.body !== undefined ? JSON.stringify(opts.body) : undefined,
  });
  if (resp.status === 401) refused(sent);
  const text = await resp.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch (e) { data = text; } }
  if (!resp.ok) {
    let message = resp.statusText || `HTTP ${resp.status}`;
    if (data && data.error && data.error.message) message = data.error.message;
    else if (data && data.detail) message = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    throw new ApiError(resp.status, message);
  }
  return data;
}

/* Every page of a run's events after `after`, in order. */
async function allEvents(runId, after, signal) {
  const out = [];
  let seq = after || 0;
  for (let i = 0; i < 10000; i++) {
    const page = listOf(await api(`/v1/runs/${encodeURIComponent(runId)}/events?after=${seq}`, { signal }), "events");
    if (page.length === 0) break;
    out.push(...page);
    seq = page[page.length - 1].seq;
  }
  return out;
}

/* Read the server-sent-event stream of a run with fetch (so the token goes in a header).
 * Calls onEvent(event) for each event; resolves when the server ends the stream. */
async function streamEvents(runId, lastSeq, onEvent, signal) {
  const sent = app.token;
  const headers = authHeaders({ Accept: "text/event-stream" });
  if (lastSeq) headers["Last-Event-ID"] = String(lastSeq);
  const resp = await fetch(`/v1/runs/${encodeURIComponent(runId)}/events/stream`, { headers, signal, cache: "no-store" });
  if (resp.status === 401) refused(sent);
  if (!resp.ok || !resp.body) throw new ApiError(resp.status, `event stream answered ${resp.status}`);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const event = parseSseBlock(block);
      if (event) onEvent(event);
    }
  }
}

function parseSseBlock(block) {
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  let event;
  try { event = JSON.parse(data.join("\n")); } catch (e) { return null; }
  if (event && typeof event === "object" && event.seq === undefined && id !== null) event.seq = Number(id);
  return event;
}

/* ------------------------------------------------------------------ token */

/* A 401 to a request sent with `sent` as the token. The page sends several requests at
 * once (the header's info and the view), so after the dialog asked and was answered, the
 * others' 401s, sent before there was a token, still arrive: they must not ask again,
 * or the dialog reopens over a page that now works. Only a 401 to the token in use asks. */
function refused(sent) {
  if (sent === app.token) askToken(sent ? "The server refused this token." : "");
  throw new ApiError(401, sent ? "the server refused this token" : "a valid API token is needed");
}

function askToken(message) {
  const dialog = document.getElementById("token-dialog");
  const err = document.getElementById("token-error");
  err.hidden = !message;
  err.textContent = message || "";
  if (!dialog.open) dialog.showModal();
  document.getElementById("token-input").focus();
}

function setupToken() {
  const form = document.getElementById("token-form");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = document.getElementById("token-input").value.trim();
    if (!value) return;
    app.token = value;
    sessionStorage.setItem(TOKEN_KEY, value);
    document.getElementById("token-input").value = "";
    document.getElementById("token-dialog").close();
    route();
  });
  document.getElementById("token-dialog").addEventListener("cancel", (ev) => ev.preventDefault());
  const signout = document.getElementById("signout");
  signout.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    app.token = null;
    signout.hidden = true;
    route();
  });
}

/* ------------------------------------------------------------------ views */

function setView(...children) {
  const view = document.getElementById("view");
  view.replaceChildren(...children);
  return view;
}

function showError(where, err) {
  if (err instanceof ApiError && err.status === 401) return;
  if (err && err.name === "AbortError") return;
  where.replaceChildren(h("div", { class: "alert" }, String((err && err.message) || err)));
}

function every(ms, fn) {
  const id = setInterval(fn, ms);
  app.cleanups.push(() => clearInterval(id));
}

function controller() {
  const c = new AbortController();
  app.cleanups.push(() => c.abort());
  return c;
}

/* Every run, newest first, following the list's pages (`next_after`). */
async function fetchRuns(filters) {
  const runs = [];
  let after = null;
  for (let page = 0; page < 20; page++) {
    const query = new URLSearchParams(Object.assign({ limit: "500" }, filters || {}));
    if (after) query.set("after", after);
    const answer = await api(`/v1/runs?${query}`);
    runs.push(...listOf(answer, "jobs", "runs"));
    if (!answer || !answer.has_more || !answer.next_after) break;
    after = answer.next_after;
  }
  return runs;
}

/* ---- runs table */

async function viewRuns() {
  const statusSel = h("select", { id: "filter-status", "aria-label": "status" },
    h("option", { value: "" }, "all statuses"), STATUSES.map((s) => h("option", { value: s }, s)));
  const groupSel = h("select", { id: "filter-group", "aria-label": "sweep group" }, h("option", { value: "" }, "all groups"));
  statusSel.value = app.filters.status;
  const body = h("div", { id: "runs-body" }, h("p", { class: "muted" }, "loading…"));
  setView(
    h("div", { class: "page-head" }, h("h1", {}, "Runs"),
      h("div", { class: "filters" }, h("label", {}, "Status ", statusSel), h("label", {}, "Sweep group ", groupSel))),
    body);

  let runs = [];
  const render = () => {
    const groups = [...new Set(runs.map(runGroup).filter(Boolean))].sort();
    const chosen = app.filters.group;
    groupSel.replaceChildren(h("option", { value: "" }, "all groups"), ...groups.map((g) => h("option", { value: g }, g)));
    if (chosen && !groups.includes(chosen)) groupSel.appendChild(h("option", { value: chosen }, chosen));
    groupSel.value = chosen;
    const shown = runs.filter((r) => (!app.filters.status || r.status === app.filters.status) && (!chosen || runGroup(r) === chosen));
    body.replaceChildren(runsTable(shown, runs.length));
  };
  statusSel.addEventListener("change", () => { app.filters.status = statusSel.value; render(); });
  groupSel.addEventListener("change", () => { app.filters.group = groupSel.value; render(); });

  const refresh = async () => {
    try { runs = await fetchRuns(); render(); } catch (err) { showError(body, err); }
  };
  await refresh();
  every(3000, refresh);
}

function runsTable(runs, total) {
  if (runs.length === 0) {
    return h("p", { class: "muted empty-state" }, total ? "No run matches these filters." : withCode("No runs yet. Start one with `trainkit train --dataset NAME`."));
  }
  const rows = runs.map((r) => h("tr", { dataset: { runId: r.id, status: r.status } },
    h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.id)}`, class: "mono" }, r.id)),
    h("td", {}, statusBadge(r.status)),
    h("td", { class: "col-method" }, h("span", { class: `badge method method-${runMethod(r)}` }, runMethod(r).toUpperCase())),
    h("td", {}, r.phase || "–"),
    h("td", {}, runPreset(r)),
    h("td", {}, r.dataset_id || "–"),
    h("td", { class: "col-progress" }, progressBar(r.step, r.total_steps)),
    h("td", { class: "num" }, fmtDuration(runDuration(r))),
    h("td", { class: "num" }, fmtNum(runFinalLoss(r))),
    h("td", { class: "num col-cost" }, fmtCost(r.cost_usd)),
    h("td", {}, runGroup(r) ? h("a", { href: `#/sweeps/${encodeURIComponent(runGroup(r))}` }, runGroup(r)) : "–")));
  return h("table", { class: "table", id: "runs-table" },
    h("thead", {}, h("tr", {}, ["Run", "Status", "Method", "Phase", "Preset", "Dataset", "Progress", "Duration", "Final loss", "Cost", "Sweep group"]
      .map((t, i) => h("th", { class: i >= 7 && i <= 9 ? "num" : "" }, t)))),
    h("tbody", {}, rows));
}

/* ---- one run */

/* Fields of an event as short labelled values: "loss 0.41", "lr 2e-4", "ETA 1m 05s". */
const EVENT_FIELD_LABELS = {
  learning_rate: "lr", tokens_per_s: "tok/s", eta_s: "ETA", eval_s: "eval time", grad_norm: "grad norm", rewards_chosen: "reward of chosen",
  rewards_rejected: "reward of rejected", reward_margin: "margin", reward_accuracy: "accuracy", reward_mean: "mean reward",
};

/* "reward_accuracy" -> "accuracy", "train_runtime_s" -> "train runtime", "reward_polite_mean" -> "reward polite (mean)". */
function fieldLabel(key) {
  return EVENT_FIELD_LABELS[key] || key.replace(/^reward_(.+)_mean$/, "reward $1 (mean)").replace(/_(s|seconds)$/, "").replace(/_/g, " ");
}

function fieldValue(key, v) {
  if (typeof v === "number" && /_(s|seconds)$/.test(key) && key !== "tokens_per_s") return v < 60 ? `${fmtNum(v, 1)} s` : fmtDuration(v);
  if (typeof v === "number") return fmtNum(v);
  if (Array.isArray(v)) return v.map((x) => (x && typeof x === "object" ? JSON.stringify(x) : String(x))).join(", ");
  if (v && typeof v === "object") return Object.entries(v).map(([k, x]) => `${k.replace(/_/g, " ")} ${fieldValue(k, x)}`).join(", ");
  return String(v);
}

function eventFields(e, skip) {
  return Object.entries(e)
    .filter(([k, v]) => !skip.has(k) && v !== undefined && v !== null && v !== "")
    .map(([k, v]) => `${fieldLabel(k)} ${fieldValue(k, v)}`);
}

/* One readable line per event: what happened first, then its other fields labelled ("step 3 · loss 0.41 · lr 2e-4"),
 * never a raw key=value dump. */
function describeEvent(e) {
  const skip = new Set(["seq", "time", "type"]);
  const head = [];
  if (e.type === "progress") {
    if (e.step !== undefined) head.push(e.total_steps ? `step ${e.step} / ${e.total_steps}` : `step ${e.step}`);
    for (const k of ["step", "total_steps"]) skip.add(k);
    for (const k of ["loss", "learning_rate", "grad_norm"]) {
      if (typeof e[k] === "number") head.push(`${EVENT_FIELD_LABELS[k] || k} ${fmtNum(e[k])}`);
      skip.add(k);
    }
  } else if (e.type === "checkpoint") {
    head.push(`saved at step ${e.step ?? "?"}${e.path ? `: ${e.path}` : ""}`);
    skip.add("step").add("path");
  } else if (e.type === "status" && e.status) {
    head.push([e.status, e.reason || e.error].filter(Boolean).join(": "));
    skip.add("status").add("reason").add("error");
  } else if (e.type === "phase" && e.phase) {
    head.push(String(e.phase).replace(/_/g, " "));
    skip.add("phase");
  } else if (e.type === "eval") {
    for (const side of ["tuned", "base"]) {
      if (e[side] && typeof e[side] === "object") head.push(`${side}: ${eventFields(e[side], new Set()).join(", ")}`);
      skip.add(side);
    }
  } else if (e.type === "rollout") {
    head.push(`${(e.samples || []).length} sample answers at step ${e.step ?? "?"}`);
    skip.add("samples").add("step");
  }
  if (e.message !== undefined) { head.unshift(String(e.message)); skip.add("message"); }
  return [...head, ...eventFields(e, skip)].join(" · ");
}

/* A DPO or GRPO run's own figures in its progress events (trainkit_core.training.methods.dpo / grpo), by label. */
const METHOD_CURVES = {
  rewards_chosen: "reward of chosen", rewards_rejected: "reward of rejected", reward_margin: "margin",
  reward_accuracy: "accuracy", reward_mean: "mean reward",
};

function methodCurves(e) {
  const found = [];
  for (const [key, label] of Object.entries(METHOD_CURVES)) {
    if (typeof e[key] === "number") found.push([label, e[key]]);
  }
  for (const [key, value] of Object.entries(e)) { // one per GRPO grader: reward_<name>_mean
    if (key.startsWith("reward_") && key.endsWith("_mean") && key !== "reward_mean" && typeof value === "number") {
      found.push([key.slice("reward_".length, -"_mean".length), value]);
    }
  }
  return found;
}

/* A run's metrics, one small table per kind: a DPO or GRPO run's rewards at the latest step (from its progress
 * events, as they arrive), training, the eval after training, the adapter check. Null when there is none yet. */
function metricsCard(latest, metrics) {
  const groups = [["Rewards (latest step)", "rewards", []], ["Training", "training", []], ["Eval after training", "eval", []],
    ["Adapter check", "gate", []]];
  for (const [key, value] of Object.entries(latest)) groups[0][2].push([key, value]);
  for (const [key, value] of Object.entries(metrics)) {
    if (key in latest || value === null || value === undefined || typeof value === "object") continue;
    const group = /^(base_)?eval_/.test(key) ? 2 : key.startsWith("gate_") ? 3 : 1;
    groups[group][2].push([key, value]);
  }
  const shown = groups.filter(([, , rows]) => rows.length);
  if (!shown.length) return null;
  return h("section", { class: "card", id: "metrics-card" }, h("h2", {}, "Metrics"),
    h("div", { class: "metrics-groups", id: "run-metrics" }, shown.map(([title, kind, rows]) =>
      h("table", { class: "table metrics", dataset: { group: kind } },
        h("thead", {}, h("tr", {}, h("th", {}, title), h("th", { class: "num" }, ""))),
        h("tbody", {}, rows.map(([key, value]) => h("tr", { dataset: { metric: key }, title: key },
          h("td", {}, fieldLabel(key)), h("td", { class: "num" }, fieldValue(key, value)))))))));
}

/* The latest rollout: GRPO's scored group, or the sample answers at a checkpoint. Text only (no HTML). */
function rolloutTable(rollout) {
  const samples = (rollout && rollout.samples) || [];
  if (!samples.length) return null;
  const rewardText = (r) => r && typeof r === "object"
    ? Object.entries(r).map(([k, v]) => `${k} ${fmtNum(v)}`).join(", ") : "–";
  return h("section", { class: "card", id: "rollout-card" },
    h("h2", {}, `Latest rollout (step ${rollout.step ?? "?"})`),
    h("table", { class: "table", id: "rollout-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Prompt"), h("th", {}, "Answer"), h("th", {}, "Rewards"))),
      h("tbody", {}, samples.map((s) => h("tr", {},
        h("td", {}, String(s.prompt ?? "")), h("td", { class: "mono" }, String(s.completion ?? s.output ?? "")),
        h("td", {}, rewardText(s.rewards)))))));
}

async function viewRun(runId) {
  const ctl = controller();
  const title = h("h1", {}, h("span", { class: "muted" }, "Run "), h("span", { class: "mono" }, runId));
  const badge = h("span", { id: "run-status" });
  const stopBtn = h("button", { id: "stop-btn", type: "button", class: "danger" }, "Stop");
  const resumeBtn = h("button", { id: "resume-btn", type: "button" }, "Resume");
  const actionMsg = h("span", { class: "muted", id: "action-msg" });
  const errorBox = h("div", { id: "run-error" });
  const summary = h("dl", { class: "summary", id: "run-summary" });
  const lossBox = h("div", { class: "chart-box", id: "loss-chart" });
  const lrBox = h("div", { class: "chart-box", id: "lr-chart" });
  const methodBox = h("div", { class: "chart-box", id: "method-chart" });
  const methodCard = h("section", { class: "card", id: "method-card", hidden: true }, h("h2", {}, "Rewards"), methodBox);
  const rolloutBox = h("div", { id: "rollout" });
  const metricsBox = h("div", { id: "run-metrics-box" });
  const checkpointsBox = h("div", { id: "checkpoints" }, h("p", { class: "muted" }, "loading…"));
  const componentsBox = h("div", { id: "components" });
  const evalBox = h("div", { id: "run-eval" });
  const playgroundBox = h("div", { id: "run-playground" });
  const showProgress = h("input", { type: "checkbox", id: "show-progress" });
  const logBody = h("tbody", {});
  const logCount = h("span", { class: "muted" });
  const logEmpty = h("p", { class: "muted small log-empty" }, "No event to show yet (progress events are hidden: tick the box to see them).");
  setView(
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "← Runs")),
    h("div", { class: "page-head" }, h("div", { class: "title-row" }, title, badge),
      h("div", { class: "actions" }, actionMsg, stopBtn, resumeBtn)),
    errorBox, summary,
    h("div", { class: "charts" },
      h("section", { class: "card" }, h("h2", {}, "Training loss"), lossBox),
      h("section", { class: "card" }, h("h2", {}, "Learning rate"), lrBox), methodCard),
    metricsBox, evalBox, rolloutBox, playgroundBox,
    h("section", { class: "card" }, h("h2", {}, "Checkpoints"), checkpointsBox),
    componentsBox,
    h("section", { class: "card" },
      h("div", { class: "card-head" }, h("h2", {}, "Events "), logCount,
        h("label", { class: "toggle" }, showProgress, " show progress events")),
      h("div", { class: "log-wrap", id: "event-log-wrap" },
        h("table", { class: "table log", id: "event-log" },
          h("thead", {}, h("tr", {}, h("th", { class: "num" }, "#"), h("th", {}, "Time"), h("th", {}, "Type"), h("th", {}, "Details"))),
          logBody)), logEmpty));

  const lossChart = new LineChart(lossBox, { xLabel: "step", yLabel: "loss" });
  const lrChart = new LineChart(lrBox, { xLabel: "step", yLabel: "learning rate" });
  lossChart.setSeries("loss", [], "#1f6feb");
  lrChart.setSeries("learning rate", [], "#9a6700");
  const methodChart = new LineChart(methodBox, { xLabel: "step", yLabel: "reward" });
  let run = null;
  let lastSeq = 0;
  let latestLoss = null;
  let renderPending = false;
  const scheduleRender = () => {
    if (renderPending) return;
    renderPending = true;
    requestAnimationFrame(() => { renderPending = false; if (run) renderRun(); });
  };
  let streaming = false;
  const events = [];
  const latestMethod = {}; // a DPO or GRPO run's latest figures from its progress events, by key

  /* The run's metrics: the record's (final loss, speed, ...) and a DPO or GRPO run's latest rewards. */
  const renderMetrics = () => metricsBox.replaceChildren(...[metricsCard(latestMethod, (run && run.metrics) || {})].filter(Boolean));

  const logRow = (e) => h("tr", { class: `ev-${e.type}`, dataset: { seq: e.seq, type: e.type } },
    h("td", { class: "num mono" }, e.seq), h("td", { class: "nowrap" }, fmtTime(e.time)),
    h("td", {}, h("span", { class: `tag tag-${e.type}` }, e.type)), h("td", {}, describeEvent(e)));
  const visible = (e) => showProgress.checked || e.type !== "progress";
  const renderLog = () => {
    const shown = events.filter(visible).slice(-500);
    logBody.replaceChildren(...shown.map(logRow));
    logCount.textContent = `(${events.length})`;
    logEmpty.hidden = logBody.children.length > 0;
  };
  showProgress.addEventListener("change", renderLog);

  const handle = (e) => {
    if (!e || typeof e.seq !== "number" || e.seq <= lastSeq) return; // exactly once, in order
    lastSeq = e.seq;
    events.push(e);
    if (e.type === "progress" && e.step !== undefined) {
      if (e.loss !== undefined && e.loss !== null) {
        lossChart.addPoint("loss", Number(e.step), Number(e.loss));
        latestLoss = Number(e.loss);
      }
      if (e.learning_rate !== undefined && e.learning_rate !== null) lrChart.addPoint("learning rate", Number(e.step), Number(e.learning_rate));
      for (const [label, value] of methodCurves(e)) {
        methodChart.addPoint(label, Number(e.step), Number(value));
        methodCard.hidden = false;
      }
      let rewards = false;
      for (const [key, value] of Object.entries(e)) {
        if ((key in METHOD_CURVES || /^reward_.+_mean$/.test(key)) && typeof value === "number") { latestMethod[key] = value; rewards = true; }
      }
      if (rewards) renderMetrics();
      if (run && !TERMINAL.has(run.status)) { // the record is saved less often than events arrive
        run.step = Math.max(run.step || 0, Number(e.step));
        if (e.total_steps) run.total_steps = e.total_steps;
        scheduleRender();
      }
    }
    if (visible(e)) {
      const wrap = document.getElementById("event-log-wrap");
      const atBottom = wrap && wrap.scrollHeight - wrap.scrollTop - wrap.clientHeight < 40;
      logBody.appendChild(logRow(e));
      while (logBody.children.length > 500) logBody.removeChild(logBody.firstChild);
      if (wrap && atBottom) wrap.scrollTop = wrap.scrollHeight;
    }
    logCount.textContent = `(${events.length})`;
    logEmpty.hidden = logBody.children.length > 0;
    if (e.type === "eval" && (e.tuned || e.base)) {
      evalBox.replaceChildren(h("section", { class: "card" },
        h("h2", {}, `Eval after training${e.tuned && e.tuned.examples ? ` (${e.tuned.examples} held-out examples)` : ""}`),
        evalMetricsTable(e.tuned, e.base, "run-eval-metrics"),
        e.report_id ? h("p", {}, h("a", { href: `#/evals/${encodeURIComponent(e.report_id)}` }, "Examples and answers →")) : null));
    }
    if (e.type === "status" || e.type === "phase" || e.type === "checkpoint") refreshRun();
  };

  const renderRun = () => {
    badge.replaceChildren(statusBadge(run.status));
    const done = TERMINAL.has(run.status);
    stopBtn.disabled = done;
    resumeBtn.disabled = !done || run.status === "succeeded" && run.step >= (run.total_steps || 0);
    if (run.error_message) {
      errorBox.replaceChildren(h("div", { class: "alert", id: "error-text" },
        h("strong", {}, run.status === "failed" ? "Failed: " : "Note: "), h("pre", {}, run.error_message)));
    } else errorBox.replaceChildren();
    const cfg = run.config || {};
    const items = [
      ["Status", run.status], ["Phase", run.phase || "–"], ["Method", runMethod(run)],
      ["Preset", runPreset(run)],
      ["Dataset", run.dataset_id || "–"], ["Progress", progressBar(run.step, run.total_steps)],
      ["Duration", fmtDuration(runDuration(run))],
      ["GPUs", `${cfg.gpus ?? 1} per node x ${cfg.nodes ?? 1} node(s)${cfg.gpu ? ` (${cfg.gpu})` : ""}`],
      ["GPU time", `${fmtNum(run.gpu_seconds, 0)} GPU-s`], ["Cost", fmtCost(run.cost_usd)],
      done ? ["Final loss", fmtNum(runFinalLoss(run) ?? latestLoss)] : ["Latest loss", fmtNum(latestLoss ?? runFinalLoss(run))],
      ["Learning rate", fmtNum(cfg.learning_rate ?? cfg.lr)], ["LoRA r", cfg.lora_r ?? "–"],
      ["Backend", run.framework || "–"], ["Provider", run.provider || "–"], ["Created", fmtTime(run.created_at)],
    ];
    const group = runGroup(run);
    if (group) items.push(["Sweep group", h("a", { href: `#/sweeps/${encodeURIComponent(group)}` }, group)]);
    if (run.attempt > 1) items.push(["Attempt", run.attempt]);
    if (run.call_attempts > 1 || run.max_attempts > 1) items.push(["Job attempts", `${run.call_attempts} of ${run.max_attempts}`]);
    if (run.provider_app_id) {
      const appId = run.provider_app_url && /^https:\/\//.test(run.provider_app_url)
        ? h("a", { href: run.provider_app_url, target: "_blank", rel: "noopener" }, run.provider_app_id) : run.provider_app_id;
      items.push(["App", h("span", {}, `${run.app_name || ""} `, appId)]);
    }
    if (run.deployment_id) items.push(["Deployment", h("span", { class: "mono" }, run.deployment_id)]);
    if (cfg.from_model) items.push(["From", h("span", { class: "mono" }, cfg.from_model)]);
    rolloutBox.replaceChildren(...[rolloutTable(run.latest_rollout)].filter(Boolean));
    summary.replaceChildren(...items.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", { dataset: { field: k } }, v))));
    renderMetrics();
    renderComponents(componentsBox, run);
    // A run that succeeded, or was stopped, saved its adapter: trained/<id> answers.
    if ((run.status === "succeeded" || run.status === "stopped") && !playgroundBox.firstChild) {
      playgroundBox.replaceChildren(playground(`trained/${runId}`, ctl));
    }
  };

  const refreshCheckpoints = async () => {
    try {
      const cps = listOf(await api(`/v1/runs/${encodeURIComponent(runId)}/checkpoints`, { signal: ctl.signal }), "checkpoints");
      checkpointsBox.replaceChildren(cps.length === 0 ? h("p", { class: "muted" }, "No checkpoint saved yet.") :
        h("table", { class: "table", id: "checkpoints-table" },
          h("thead", {}, h("tr", {}, h("th", { class: "num" }, "Step"), h("th", {}, "Path"))),
          h("tbody", {}, cps.map((c) => h("tr", {}, h("td", { class: "num" }, fmtNum(c.step)), h("td", { class: "mono" }, c.path || c.model_path || ""))))));
    } catch (err) { showError(checkpointsBox, err); }
  };

  let refreshing = null;
  async function refreshRun() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const fresh = await api(`/v1/runs/${encodeURIComponent(runId)}`, { signal: ctl.signal });
        if (run && !TERMINAL.has(fresh.status)) fresh.step = Math.max(fresh.step || 0, run.step || 0);
        run = fresh;
        renderRun();
      } catch (err) { if (!run) showError(errorBox, err); }
    })();
    try { await refreshing; } finally { refreshing = null; }
  }

  /* Follow the stream until the run ends; reconnect with Last-Event-ID after a break. */
  const follow = async () => {
    if (streaming) return;
    streaming = true;
    try {
      while (!ctl.signal.aborted && run && !TERMINAL.has(run.status)) {
        try {
          await streamEvents(runId, lastSeq, handle, ctl.signal);
        } catch (err) {
          if (ctl.signal.aborted || (err instanceof ApiError && err.status === 401)) return;
          await new Promise((r) => setTimeout(r, 1500));
        }
        await refreshRun();
      }
      // the stream ended with the run: pick up anything written after the last read
      // (leaving the page aborts these reads: not an error to show, nor to leave unhandled)
      try {
        if (!ctl.signal.aborted) for (const e of await allEvents(runId, lastSeq, ctl.signal)) handle(e);
        await refreshCheckpoints();
      } catch (err) { if (!ctl.signal.aborted) showError(errorBox, err); }
    } finally { streaming = false; }
  };

  stopBtn.addEventListener("click", async () => {
    stopBtn.disabled = true;
    actionMsg.textContent = "stopping…";
    try {
      await api(`/v1/runs/${encodeURIComponent(runId)}/stop`, { method: "POST" });
      actionMsg.textContent = "stop requested; the run saves its adapter and ends";
      await refreshRun();
    } catch (err) { actionMsg.textContent = `stop failed: ${err.message}`; stopBtn.disabled = false; }
  });
  resumeBtn.addEventListener("click", async () => {
    resumeBtn.disabled = true;
    actionMsg.textContent = "resuming…";
    try {
      const answer = await api(`/v1/runs/${encodeURIComponent(runId)}/resume`, { method: "POST" });
      const newId = answer && (answer.id || (answer.job && answer.job.id));
      if (newId && newId !== runId) { location.hash = `#/runs/${encodeURIComponent(newId)}`; return; }
      actionMsg.textContent = "resumed from the latest checkpoint";
      await refreshRun();
      follow();
    } catch (err) { actionMsg.textContent = `resume failed: ${err.message}`; resumeBtn.disabled = false; }
  });

  await refreshRun();
  if (!run) return;
  try {
    for (const e of await allEvents(runId, 0, ctl.signal)) handle(e);
  } catch (err) { if (!ctl.signal.aborted) showError(errorBox, err); }
  renderLog();
  await refreshCheckpoints();
  follow();
  every(4000, () => { if (run && !TERMINAL.has(run.status)) { refreshRun(); refreshCheckpoints(); } });
}

/* Components the run attached (TrainingRun.add_dashboard_component): fetched with the token,
 * shown as images, pretty JSON, or HTML in a sandboxed frame (no script, its own origin);
 * the server inlines an HTML component's other files, which the frame could not fetch. */
const shownComponents = new WeakMap(); // box -> key of what it shows

async function componentView(runId, c) {
  const resp = await fetch(`/v1/runs/${encodeURIComponent(runId)}/components/${encodeURIComponent(c.name)}`, { headers: authHeaders({ Accept: "*/*" }) });
  if (!resp.ok) return h("p", { class: "error-text" }, `could not load ${c.name}: HTTP ${resp.status}`);
  if (c.type === "png" || c.type === "svg") {
    const url = URL.createObjectURL(await resp.blob());
    return h("img", { src: url, alt: c.name, class: "component-img" });
  }
  const text = await resp.text();
  if (c.type === "json") {
    let pretty = text;
    try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* shown as is */ }
    return h("pre", { class: "component-json" }, pretty);
  }
  const frame = h("iframe", { sandbox: "", class: "component-html", title: c.name });
  frame.srcdoc = text;
  return frame;
}

function renderComponents(box, run) {
  const comps = run.dashboard_components || [];
  const key = comps.map((c) => `${c.name}:${c.manifest || c.added_at}`).join("|");
  if (shownComponents.get(box) === key) return;
  shownComponents.set(box, key);
  if (comps.length === 0) { box.replaceChildren(); return; }
  const items = comps.map((c) => {
    const holder = h("div", { class: "component-body" }, h("p", { class: "muted" }, "loading…"));
    componentView(run.id, c).then((el) => holder.replaceChildren(el)).catch((err) => holder.replaceChildren(h("p", { class: "error-text" }, String(err))));
    return h("figure", { class: "component", dataset: { component: c.name } },
      h("figcaption", {}, h("strong", {}, c.name), h("span", { class: "muted" }, ` ${c.type} · ${c.files > 1 ? `${c.files} files · ` : ""}${fmtBytes(c.size)}${c.version > 1 ? ` · version ${c.version}` : ""}`)), holder);
  });
  box.replaceChildren(h("section", { class: "card" }, h("h2", {}, "Attached components"), h("div", { class: "components" }, items)));
}

/* ---- sweeps */

async function viewSweeps() {
  const body = h("div", {}, h("p", { class: "muted" }, "loading…"));
  setView(h("div", { class: "page-head" }, h("h1", {}, "Sweeps")), body);
  try {
    const runs = await fetchRuns();
    const groups = new Map();
    for (const r of runs) {
      const g = runGroup(r);
      if (!g) continue;
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(r);
    }
    if (groups.size === 0) {
      body.replaceChildren(h("p", { class: "muted empty-state", id: "sweeps-empty" }, withCode("No sweep yet. Start one with `trainkit sweep --dataset NAME --grid lr=1e-3,1e-2`.")));
      return;
    }
    body.replaceChildren(h("table", { class: "table", id: "sweeps-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Group"), h("th", { class: "num" }, "Runs"), h("th", {}, "Statuses"), h("th", { class: "num" }, "Best final loss"), h("th", { class: "num" }, "Total cost"))),
      h("tbody", {}, [...groups.entries()].map(([g, rs]) => {
        const losses = rs.map(runFinalLoss).filter((v) => v !== null);
        const counts = {};
        for (const r of rs) counts[r.status] = (counts[r.status] || 0) + 1;
        return h("tr", {}, h("td", {}, h("a", { href: `#/sweeps/${encodeURIComponent(g)}` }, g)), h("td", { class: "num" }, rs.length),
          h("td", {}, Object.entries(counts).map(([s, n]) => h("span", { class: "badge-line" }, statusBadge(s), ` ${n}`))),
          h("td", { class: "num" }, losses.length ? fmtNum(Math.min(...losses)) : "–"), h("td", { class: "num" }, fmtCost(totalCost(rs))));
      }))));
  } catch (err) { showError(body, err); }
}

/* Config keys whose values differ between the runs: what the sweep varied. */
function variedKeys(runs) {
  const keys = new Set(runs.flatMap((r) => Object.keys(r.config || {})));
  return [...keys].filter((k) => new Set(runs.map((r) => JSON.stringify((r.config || {})[k]))).size > 1).sort();
}

async function viewSweep(group) {
  const ctl = controller();
  const chartBox = h("div", { class: "chart-box", id: "sweep-chart" });
  const tableBox = h("div", { id: "sweep-compare" }, h("p", { class: "muted" }, "loading…"));
  setView(
    h("p", { class: "crumbs" }, h("a", { href: "#/sweeps" }, "← Sweeps")),
    h("div", { class: "page-head" }, h("h1", {}, h("span", { class: "muted" }, "Sweep "), group)),
    h("section", { class: "card" }, h("h2", {}, "Loss curves"), chartBox),
    h("section", { class: "card" }, h("h2", {}, "Comparison"), tableBox));
  const chart = new LineChart(chartBox, { xLabel: "step", yLabel: "loss", height: 320 });
  const seen = new Map(); // run id -> {lastSeq, losses: [[step, loss]]}

  const refresh = async () => {
    try {
      const runs = (await fetchRuns({ group_id: group })).filter((r) => runGroup(r) === group).sort((a, b) => (a.id < b.id ? -1 : 1));
      const varied = variedKeys(runs);
      for (const r of runs) {
        const s = seen.get(r.id) || { lastSeq: 0, losses: [], done: false };
        seen.set(r.id, s);
        if (s.done) continue;
        for (const e of await allEvents(r.id, s.lastSeq, ctl.signal)) {
          s.lastSeq = e.seq;
          if (e.type === "progress" && e.loss !== undefined && e.loss !== null && e.step !== undefined) {
            s.losses = s.losses.filter((p) => p[0] < e.step);
            s.losses.push([Number(e.step), Number(e.loss)]);
          }
        }
        s.done = TERMINAL.has(r.status);
        const label = varied.length ? varied.map((k) => `${k}=${(r.config || {})[k]}`).join(", ") : r.id;
        chart.setSeries(label, s.losses);
      }
      tableBox.replaceChildren(sweepTable(runs, varied, seen));
    } catch (err) { showError(tableBox, err); }
  };
  await refresh();
  every(4000, () => { if ([...seen.values()].some((s) => !s.done)) refresh(); });
}

function sweepTable(runs, varied, seen) {
  const finals = runs.map((r) => {
    const losses = (seen.get(r.id) || { losses: [] }).losses;
    return runFinalLoss(r) ?? (losses.length ? losses[losses.length - 1][1] : null);
  });
  const best = Math.min(...finals.filter((v) => v !== null));
  return h("table", { class: "table", id: "sweep-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Run"), h("th", {}, "Status"), varied.map((k) => h("th", {}, k)),
      h("th", { class: "num" }, "Steps"), h("th", { class: "num" }, "Final loss"), h("th", { class: "num" }, "Min loss"), h("th", { class: "num" }, "Duration"), h("th", { class: "num" }, "Cost"))),
    h("tbody", {}, runs.map((r, i) => {
      const losses = (seen.get(r.id) || { losses: [] }).losses;
      const min = losses.length ? Math.min(...losses.map((p) => p[1])) : null;
      return h("tr", { class: finals[i] === best ? "best" : "" },
        h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(r.id)}`, class: "mono" }, r.id)), h("td", {}, statusBadge(r.status)),
        varied.map((k) => h("td", { class: "mono" }, JSON.stringify((r.config || {})[k]))),
        h("td", { class: "num" }, r.total_steps ? `${r.step} / ${r.total_steps}` : fmtNum(r.step)),
        h("td", { class: "num" }, fmtNum(finals[i])), h("td", { class: "num" }, fmtNum(min)), h("td", { class: "num" }, fmtDuration(runDuration(r))), h("td", { class: "num" }, fmtCost(r.cost_usd)));
    })),
    h("tfoot", {}, h("tr", { id: "sweep-total" }, h("td", { colspan: String(6 + varied.length) }, `Sweep total (${runs.length} runs)`),
      h("td", { class: "num" }, fmtCost(totalCost(runs))))));
}

/* ---- playground: a prompt, the tuned and the base answer side by side */

/* Stream one chat completion (`content`: the prompt's text, or OpenAI's parts: text, image_url, input_audio) (OpenAI's chunks over SSE, read with fetch so the token
 * stays in a header); calls onText(piece, kind) per delta, kind "answer" or "thinking" (a Gemma 4 model's
 * `reasoning_content`). `think` asks the model to think (`reasoning_effort`). Resolves with the finish reason. */
async function streamChat(model, content, onText, signal, think = false) {
  const sent = app.token;
  const headers = authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" });
  const body = { model, messages: [{ role: "user", content }], stream: true, max_tokens: PLAYGROUND_MAX_TOKENS };
  if (think) body.reasoning_effort = "high";
  const resp = await fetch("/v1/chat/completions", { method: "POST", headers, body: JSON.stringify(body), signal, cache: "no-store" });
  if (resp.status === 401) refused(sent);
  if (!resp.ok || !resp.body) {
    let message = `HTTP ${resp.status}`;
    try { const data = await resp.json(); message = (data.error && data.error.message) || (typeof data.detail === "string" ? data.detail : message); } catch (e) { /* keep the status */ }
    throw new ApiError(resp.status, message);
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finish = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const chunk = parseSseBlock(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (!chunk) continue; // "[DONE]" or a comment
      if (chunk.error) throw new ApiError(500, chunk.error.message || "generation failed");
      for (const choice of chunk.choices || []) {
        if (choice.delta && choice.delta.reasoning_content) onText(choice.delta.reasoning_content, "thinking");
        if (choice.delta && choice.delta.content) onText(choice.delta.content, "answer");
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
  }
  return finish;
}

const PLAYGROUND_MAX_TOKENS = 64;

/* The largest picture the playground sends (the server's default `image_max_bytes`). */
const PLAYGROUND_IMAGE_MAX_BYTES = 20 * 1024 * 1024;
/* The largest sound it sends (the server's default `audio_max_bytes`). */
const PLAYGROUND_AUDIO_MAX_BYTES = 12 * 1024 * 1024;
const ATTACH_HINT = "Vision or audio model? Attach a picture or a sound (.wav, .mp3), or drop one here.";

/* The `input_audio` format of a sound file ("wav" or "mp3", from its type, else its name); null for anything else. */
function audioFormat(file) {
  const type = (file.type || "").toLowerCase();
  if (["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"].includes(type)) return "wav";
  if (["audio/mpeg", "audio/mp3"].includes(type)) return "mp3";
  if (type && type !== "application/octet-stream") return null;
  const ext = /\.([a-z0-9]+)$/i.exec(file.name || "");
  return ext && ["wav", "mp3"].includes(ext[1].toLowerCase()) ? ext[1].toLowerCase() : null;
}

/* A card to talk to `modelPath` (trained/<run id>): both answers stream at once. */
function playground(modelPath, ctl) {
  const prompt = h("textarea", { id: "pg-prompt", rows: "3", placeholder: "Type a prompt, e.g. one like the training data", "aria-label": "prompt" });
  const send = h("button", { type: "submit", class: "primary", id: "pg-send" }, "Send");
  // A picture for a vision model or a sound for an audio model: picked or dropped, read in the browser, sent in the
  // message as OpenAI's parts (a data: URL `image_url`, or base64 `input_audio`); nothing is uploaded elsewhere.
  let attached = null; // the part sent beside the text: image_url or input_audio
  const fileInput = h("input", { type: "file", id: "pg-file", accept: "image/*,audio/wav,audio/mpeg,.wav,.mp3", "aria-label": "picture or sound" });
  const thumb = h("img", { class: "pg-thumb", id: "pg-thumb", alt: "the attached picture", hidden: true });
  const sound = h("audio", { class: "pg-audio", id: "pg-audio", controls: true, preload: "metadata", hidden: true });
  const pictureNote = h("span", { id: "pg-picture-note" }, ATTACH_HINT); // the note on what is attached, picture or sound
  const removeBtn = h("button", { type: "button", class: "small-btn", id: "pg-remove", hidden: true }, "Remove");
  // `url`: the file as a data: URL; `format`: "wav" or "mp3" for a sound, undefined for a picture.
  const setAttached = (url, file, format) => {
    attached = !url ? null : format ? { type: "input_audio", input_audio: { data: url.slice(url.indexOf(",") + 1), format } }
      : { type: "image_url", image_url: { url } };
    thumb.hidden = !url || !!format;
    sound.hidden = !url || !format;
    removeBtn.hidden = !url;
    if (url && !format) thumb.src = url; else thumb.removeAttribute("src");
    if (url && format) sound.src = url; else sound.removeAttribute("src");
    pictureNote.classList.remove("error-text");
    pictureNote.textContent = !url ? ATTACH_HINT
      : format ? `${file.name} (${format}, ${fmtBytes(file.size)}): sent with the prompt` : `${file.name}: sent with the prompt`;
  };
  const refuse = (message) => { setAttached(null); pictureNote.textContent = message; pictureNote.classList.add("error-text"); };
  const attach = (file) => {
    if (!file) return;
    const format = /^image\//.test(file.type) ? undefined : audioFormat(file);
    if (format === null) { refuse(`${file.name} is not a picture or a .wav or .mp3 sound (${file.type || "unknown type"})`); return; }
    const most = format ? PLAYGROUND_AUDIO_MAX_BYTES : PLAYGROUND_IMAGE_MAX_BYTES;
    if (file.size > most) { refuse(`${file.name} is ${fmtBytes(file.size)}: the most is ${fmtBytes(most)}`); return; }
    const reader = new FileReader();
    reader.onload = () => setAttached(String(reader.result), file, format);
    reader.onerror = () => refuse(`could not read ${file.name}`);
    reader.readAsDataURL(file);
  };
  fileInput.addEventListener("change", () => { attach(fileInput.files[0]); fileInput.value = ""; });
  removeBtn.addEventListener("click", () => setAttached(null));
  const drop = h("div", { class: "pg-drop", id: "pg-drop" },
    h("label", { class: "file-btn", for: "pg-file" }, "Attach a picture or sound"), fileInput, pictureNote, thumb, sound, removeBtn);
  // Gemma 4 models think when asked: their thought arrives apart from the answer and is shown apart.
  const think = h("input", { type: "checkbox", id: "pg-think" });
  const thinkLabel = h("label", { class: "small", for: "pg-think" }, think, " Ask the model to think (Gemma 4)");
  const side = (id, label, model) => {
    const out = h("pre", { class: "pg-answer", id: `pg-${id}`, dataset: { model } });
    const thought = h("pre", { class: "pg-answer muted", id: `pg-${id}-thinking` });
    const thinking = h("details", { class: "pg-thinking", id: `pg-${id}-thought`, open: true, hidden: true }, h("summary", { class: "small" }, "Thinking"), thought);
    const note = h("span", { class: "muted small", id: `pg-${id}-status` });
    return { out, thought, thinking, note, model, box: h("div", { class: "pg-side" }, h("h3", {}, label, " ", h("span", { class: "mono muted small" }, model)), thinking, out, note) };
  };
  const tuned = side("tuned", "Tuned", modelPath);
  const base = side("base", "Base", `${modelPath}:base`);
  const ask = async (s, content) => {
    s.out.textContent = "";
    s.thought.textContent = "";
    s.thinking.hidden = true;
    s.out.classList.remove("error-text");
    s.note.textContent = "generating…";
    const shown = (piece, kind) => {
      if (kind === "thinking") { s.thinking.hidden = false; s.thought.textContent += piece; } else s.out.textContent += piece;
    };
    try {
      const finish = await streamChat(s.model, content, shown, ctl.signal, think.checked);
      s.note.textContent = finish === "length" ? `stopped at ${PLAYGROUND_MAX_TOKENS} tokens`
        : s.out.textContent ? "done" : "done (an empty answer: the model ended its turn at once)";
    } catch (err) {
      if (ctl.signal.aborted) return;
      s.out.classList.add("error-text");
      s.out.textContent = err.message;
      s.note.textContent = "failed";
    }
  };
  const form = h("form", { id: "pg-form", class: "pg-form", onsubmit: async (ev) => {
    ev.preventDefault();
    const text = prompt.value.trim();
    if (!text || send.disabled) return;
    const content = attached ? [{ type: "text", text }, attached] : text;
    send.disabled = true;
    try { await Promise.all([ask(tuned, content), ask(base, content)]); } finally { send.disabled = false; }
  } }, h("div", { class: "pg-input" }, prompt, drop, thinkLabel), send);
  // Drop anywhere on the form: the browser would otherwise open the file in place of the dashboard.
  const dragging = (on) => (ev) => { ev.preventDefault(); drop.classList.toggle("dragover", on); };
  form.addEventListener("dragover", dragging(true));
  form.addEventListener("dragleave", dragging(false));
  form.addEventListener("drop", (ev) => {
    dragging(false)(ev);
    const files = ev.dataTransfer ? ev.dataTransfer.files : [];
    if (files.length) attach(files[0]);
  });
  return h("section", { class: "card", id: "playground" },
    h("h2", {}, "Playground"),
    h("p", { class: "muted small" }, "The tuned model and its base answer the same prompt (with the picture or sound, if one is attached), streamed through ",
      h("code", {}, "/v1/chat/completions"), " (greedy)."),
    form, h("div", { class: "pg-answers" }, tuned.box, base.box));
}

/* ---- models and eval reports */

async function viewModels() {
  const body = h("div", {}, h("p", { class: "muted" }, "loading…"));
  const reportInput = h("input", { id: "report-id", placeholder: "ev-YYYYMMDD-HHMMSS-xxxxxx", "aria-label": "eval report id" });
  const open = h("form", { class: "inline-form", onsubmit: (ev) => { ev.preventDefault(); if (reportInput.value.trim()) location.hash = `#/evals/${encodeURIComponent(reportInput.value.trim())}`; } },
    reportInput, h("button", { type: "submit" }, "Open eval report"));
  setView(h("div", { class: "page-head" }, h("h1", {}, "Trained models"), open), body);
  const evaluate = async (path, button) => {
    button.disabled = true;
    button.textContent = "starting…";
    try {
      const started = await api("/v1/evals/run", { method: "POST", body: { model_path: path } });
      location.hash = `#/evals/${encodeURIComponent(started.report_id)}`;
    } catch (err) { button.textContent = "Evaluate"; button.disabled = false; showError(body, err); }
  };
  try {
    const models = listOf(await api("/v1/models"), "models");
    if (models.length === 0) { body.replaceChildren(h("p", { class: "muted empty-state" }, "No trained model yet.")); return; }
    body.replaceChildren(h("table", { class: "table", id: "models-table" },
      h("thead", {}, h("tr", {}, ["Model path", "Base model", "Preset", "Dataset", "Final loss", "Eval loss", "Checkpoints", "Created", "Size", ""]
        .map((t, i) => h("th", { class: [4, 5, 6, 8].includes(i) ? "num" : "" }, t)))),
      h("tbody", {}, models.map((m) => {
        const path = m.id || m.model_path || "";
        const runId = m.run_id || path.split("/")[1];
        const metrics = m.metrics || {};
        const button = h("button", { type: "button", class: "small-btn" }, "Evaluate");
        button.addEventListener("click", () => evaluate(path, button));
        return h("tr", { dataset: { model: path } },
          h("td", {}, runId ? h("a", { href: `#/models/${encodeURIComponent(runId)}`, class: "mono" }, path) : h("span", { class: "mono" }, path)),
          h("td", {}, m.base_model || "–"), h("td", {}, m.preset || "–"), h("td", {}, m.dataset_id || "–"),
          h("td", { class: "num" }, fmtNum(metrics.final_loss ?? metrics.train_loss)),
          h("td", { class: "num" }, fmtNum(metrics.eval_mean_loss)),
          h("td", { class: "num" }, (m.checkpoints || []).length),
          h("td", { class: "nowrap" }, fmtTime(m.created)), h("td", { class: "num" }, fmtBytes(m.size_bytes)),
          h("td", {}, button));
      }))));
  } catch (err) { showError(body, err); }
}

/* One trained model: what it is, and the playground. */
async function viewModel(runId) {
  const ctl = controller();
  const path = `trained/${runId}`;
  const body = h("div", {}, h("p", { class: "muted" }, "loading…"));
  setView(h("p", { class: "crumbs" }, h("a", { href: "#/models" }, "← Models")),
    h("div", { class: "page-head" }, h("h1", {}, h("span", { class: "muted" }, "Model "), h("span", { class: "mono" }, path))), body);
  try {
    const model = listOf(await api("/v1/models", { signal: ctl.signal }), "models").find((m) => (m.id || m.model_path) === path);
    if (!model) { body.replaceChildren(h("p", { class: "error-text" }, `no trained model ${path}`)); return; }
    const metrics = model.metrics || {};
    const items = [
      ["Base model", model.base_model || "–"], ["Preset", model.preset || "–"], ["Dataset", model.dataset_id || "–"],
      ["Final loss", fmtNum(metrics.final_loss ?? metrics.train_loss)], ["Eval loss", fmtNum(metrics.eval_mean_loss)],
      ["Size", fmtBytes(model.size_bytes)], ["Created", fmtTime(model.created)],
      ["Run", h("a", { href: `#/runs/${encodeURIComponent(runId)}`, class: "mono" }, runId)],
    ];
    body.replaceChildren(h("dl", { class: "summary", id: "model-summary" }, items.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v)))),
      playground(path, ctl));
  } catch (err) { if (!ctl.signal.aborted) showError(body, err); }
}

function contentText(content) {
  if (!Array.isArray(content)) return String(content);
  return content.map((p) => (p && p.type === "text" ? p.text : p && p.type === "input_audio" ? "[sound]" : "[image]")).join("\n");
}

/* The pictures of an eval example's prompt (stored in the report as small data: URLs). */
function promptImages(messages) {
  if (!Array.isArray(messages)) return [];
  return messages.flatMap((m) => (m && Array.isArray(m.content) ? m.content : []))
    .filter((p) => p && p.type === "image_url" && typeof p.image_url?.url === "string" && p.image_url.url.startsWith("data:image/"))
    .map((p) => h("img", { class: "eval-image", src: p.image_url.url, alt: "the example's image" }));
}

function messagesText(x) {
  if (x === undefined || x === null) return "";
  if (typeof x === "string") return x;
  if (Array.isArray(x)) return x.map((m) => (m && m.content !== undefined ? `${m.role ? m.role + ": " : ""}${contentText(m.content)}` : JSON.stringify(m))).join("\n");
  if (typeof x === "object" && x.content !== undefined) return String(x.content);
  return JSON.stringify(x);
}

const EVAL_METRICS = ["mean_loss", "perplexity", "exact_match", "f1"];
const LOWER_IS_BETTER = new Set(["mean_loss", "perplexity"]);

/* Base vs tuned, one row per metric, with the change and whether it is for the better. */
function evalMetricsTable(tuned, base, id) {
  const t = tuned || {};
  const b = base || {};
  const names = [...EVAL_METRICS.filter((k) => k in t || k in b),
    ...Object.keys({ ...b, ...t }).filter((k) => !EVAL_METRICS.includes(k) && k !== "examples" && typeof (t[k] ?? b[k]) === "number")];
  return h("table", { class: "table narrow", id },
    h("thead", {}, h("tr", {}, h("th", {}, "Metric"), h("th", { class: "num" }, "Base"), h("th", { class: "num" }, "Tuned"), h("th", { class: "num" }, "Change"))),
    h("tbody", {}, names.map((k) => {
      const bv = b[k];
      const tv = t[k];
      const delta = typeof bv === "number" && typeof tv === "number" ? tv - bv : null;
      const better = delta === null || delta === 0 ? "" : (delta < 0) === LOWER_IS_BETTER.has(k) ? "better" : "worse";
      return h("tr", { dataset: { metric: k } }, h("td", {}, k.replace(/_/g, " ")), h("td", { class: "num" }, fmtNum(bv)),
        h("td", { class: "num" }, fmtNum(tv)), h("td", { class: `num ${better}` }, delta === null ? "–" : `${delta > 0 ? "+" : ""}${fmtNum(delta)}`));
    })));
}

function exampleCell(side) {
  if (!side || typeof side !== "object") return h("td", { class: "muted" }, "–");
  const parts = [];
  if (side.exact_match !== undefined) parts.push(side.exact_match ? "exact match" : "no match");
  if (side.f1 !== undefined) parts.push(`F1 ${fmtNum(side.f1, 2)}`);
  if (side.loss_sum !== undefined && side.loss_tokens) parts.push(`loss ${fmtNum(side.loss_sum / side.loss_tokens, 3)}`);
  if (side.stopped === false) parts.push("did not stop");
  return h("td", { class: side.exact_match ? "match" : "" }, h("pre", {}, side.answer ?? ""), h("div", { class: "muted small" }, parts.join(" · ")));
}

async function viewEval(reportId) {
  const ctl = controller();
  const body = h("div", {}, h("p", { class: "muted" }, "loading…"));
  setView(h("p", { class: "crumbs" }, h("a", { href: "#/models" }, "← Models")),
    h("div", { class: "page-head" }, h("h1", {}, h("span", { class: "muted" }, "Eval report "), h("span", { class: "mono" }, reportId))), body);
  let report;
  for (;;) {
    try {
      report = await api(`/v1/evals/${encodeURIComponent(reportId)}?examples=true`, { signal: ctl.signal });
    } catch (err) { showError(body, err); return; }
    if (report.status !== "running") break;
    body.replaceChildren(h("p", { class: "muted", id: "eval-running" }, "The eval is running; this page updates when its report is stored."));
    await new Promise((r) => setTimeout(r, 3000));
    if (ctl.signal.aborted) return;
  }
  if (report.status === "failed") {
    body.replaceChildren(h("div", { class: "alert", id: "error-text" }, h("strong", {}, "The eval failed: "), h("pre", {}, report.error || "no error text")));
    return;
  }
  const runLink = report.run_id ? h("a", { href: `#/runs/${encodeURIComponent(report.run_id)}`, class: "mono" }, report.model_path || report.run_id) : (report.model_path || "–");
  const facts = [["Model", runLink], ["Base model", report.base_model || "–"],
    ["Examples from", report.eval_set ? `eval set ${report.eval_set}` : report.dataset ? `dataset ${report.dataset} (eval split)` : "–"],
    ["Examples", fmtNum(report.example_count ?? (report.examples || []).length)], ["Created", fmtTime(report.created_at)], ["Took", fmtDuration(report.eval_s)]];
  const examples = (report.examples || []).map((ex, i) => h("tr", {},
    h("td", { class: "num" }, (ex.index ?? i) + 1),
    h("td", {}, ...promptImages(ex.messages), h("pre", {}, messagesText(ex.messages ?? ex.prompt))),
    h("td", {}, h("pre", {}, messagesText(ex.reference))),
    exampleCell(ex.base), exampleCell(ex.tuned)));
  body.replaceChildren(
    h("dl", { class: "summary" }, facts.map(([k, v], i) => h("div", { class: i === 0 ? "wide" : "" }, h("dt", {}, k), h("dd", {}, v)))),
    h("section", { class: "card" }, h("h2", {}, "Base vs tuned"),
      report.base ? null : h("p", { class: "muted" }, "The base model was not scored in this report."),
      evalMetricsTable(report.tuned, report.base, "eval-metrics")),
    h("section", { class: "card" }, h("h2", {}, `Examples (${examples.length})`),
      examples.length ? h("table", { class: "table examples", id: "eval-examples" },
        h("thead", {}, h("tr", {}, h("th", { class: "num" }, "#"), h("th", {}, "Prompt"), h("th", {}, "Reference"), h("th", {}, "Base answer"), h("th", {}, "Tuned answer"))),
        h("tbody", {}, examples)) : h("p", { class: "muted" }, "This report has no examples.")));
}

/* ------------------------------------------------------------------ the provider's app */

async function viewApp() {
  const ctl = controller();
  const body = h("div", { id: "app-status" }, h("p", { class: "muted" }, "loading…"));
  const message = h("div", { id: "app-message" });
  const deployBtn = h("button", { type: "button", class: "primary", id: "app-deploy" }, "Deploy");
  const stopBtn = h("button", { type: "button", id: "app-stop" }, "Stop");
  setView(h("div", { class: "page-head" }, h("h1", {}, "App"), h("div", { class: "actions" }, deployBtn, stopBtn)), message, body);
  const render = (st) => {
    const d = st.detail || {};
    const facts = [["State", st.state], ["Provider", st.provider], ["App", d.app_name || "–"],
      ["App id", d.app_id || "–"], ["Version", d.version ?? "–"], ["Deployed", d.deployed_at || "–"],
      ["Web API", st.url ? h("a", { href: st.url, target: "_blank", rel: "noopener" }, st.url) : "–"]];
    body.replaceChildren(...[ // (replaceChildren writes a null as the text "null": none is passed)
      h("dl", { class: "summary" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", { dataset: { field: k } }, v)))),
      (d.missing || []).length ? h("div", { class: "alert" }, `Declared but not deployed: ${d.missing.join(", ")}`) : null,
      ...(d.notes || []).map((n) => h("p", { class: "muted" }, n)),
      h("section", { class: "card" }, h("h2", {}, "Functions"),
        h("p", { class: "mono" }, (d.functions || d.declared || []).join(", ") || "–"))].filter(Boolean));
    stopBtn.disabled = st.state !== "deployed";
  };
  const act = async (button, path, working) => {
    deployBtn.disabled = stopBtn.disabled = true;
    const label = button.textContent;
    button.textContent = working;
    message.replaceChildren();
    try { render(await api(path, { method: "POST", signal: ctl.signal })); }
    catch (err) { showError(message, err); }
    finally { button.textContent = label; deployBtn.disabled = false; }
  };
  deployBtn.addEventListener("click", () => act(deployBtn, "/v1/app/deploy", "deploying… (image builds take minutes)"));
  stopBtn.addEventListener("click", () => {
    if (!confirm("Stop the app? Its running containers end, new jobs are refused until the next deploy. A dashboard served by this app stops too.")) return;
    act(stopBtn, "/v1/app/stop", "stopping…");
  });
  try {
    // Only a provider with an app lifecycle (Modal) has an app to show; /v1/app refuses the others (local) with a 400.
    const info = await api("/v1/info", { signal: ctl.signal });
    if (!(info.capabilities || {}).app_lifecycle) { deployBtn.hidden = stopBtn.hidden = true; body.replaceChildren(...providerFacts(info)); return; }
    render(await api("/v1/app", { signal: ctl.signal }));
  } catch (err) { deployBtn.disabled = stopBtn.disabled = true; showError(body, err); }
}

/* What a provider without an app (local) has: what it is, what it can do, the installed packages. */
function providerFacts(info) {
  const caps = Object.entries(info.capabilities || {});
  const facts = [["Provider", info.provider], ["App", "none: nothing to deploy"], ["Python", info.python || "–"],
    ["Token", info.auth ? "required" : "not required"]];
  return [
    h("dl", { class: "summary", id: "provider-facts" }, facts.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", { dataset: { field: k } }, v)))),
    h("section", { class: "card", id: "provider-card" }, h("h2", {}, `The ${info.provider} provider`),
      h("p", {}, info.provider_description || ""),
      h("p", { class: "muted" }, withCode("It has no app to deploy or stop: jobs start as they are submitted. `trainkit app deploy` and this page's Deploy are for providers with an app, such as Modal."))),
    h("section", { class: "card" }, h("h2", {}, "Capabilities"),
      h("ul", { class: "cap-list", id: "provider-capabilities" }, caps.map(([k, on]) => h("li", { class: `cap ${on ? "yes" : "no"}`, dataset: { capability: k }, title: on ? "yes" : "no" }, k)))),
    h("section", { class: "card" }, h("h2", {}, "Installed packages"),
      h("table", { class: "table narrow", id: "provider-versions" }, h("tbody", {},
        Object.entries(info.versions || {}).map(([name, v]) => h("tr", {}, h("td", { class: "mono" }, name), h("td", { class: "mono" }, v)))))),
  ];
}

/* ------------------------------------------------------------------ router */

async function loadInfo() {
  try {
    const info = await api("/v1/info");
    const provider = info && (info.provider && (info.provider.name || info.provider));
    document.getElementById("server-info").textContent = provider ? `provider: ${provider}` : "";
    document.getElementById("signout").hidden = !app.token;
  } catch (err) { /* shown by the view */ }
}

function route() {
  for (const fn of app.cleanups.splice(0)) { try { fn(); } catch (e) { /* ignore */ } }
  const parts = (location.hash.replace(/^#\/?/, "") || "").split("/").map(decodeURIComponent);
  const section = parts[0] || "runs";
  for (const a of document.querySelectorAll("[data-nav]")) {
    const nav = a.dataset.nav;
    a.classList.toggle("active", nav === section || (nav === "runs" && section === "runs") || (nav === "models" && section === "evals"));
  }
  // No token asked up front: a server without TRAINKIT_API_TOKEN (loopback) needs none,
  // and one that needs it answers 401, which opens the token dialog (see api()).
  loadInfo();
  if (section === "runs" && parts[1]) return viewRun(parts[1]);
  if (section === "sweeps" && parts[1]) return viewSweep(parts[1]);
  if (section === "sweeps") return viewSweeps();
  if (section === "models" && parts[1]) return viewModel(parts[1]);
  if (section === "models") return viewModels();
  if (section === "evals" && parts[1]) return viewEval(parts[1]);
  if (section === "app") return viewApp();
  return viewRuns();
}

setupToken();
window.addEventListener("hashchange", route);
route();
})();
