// The console's pages: the task list (#/), the board (#/board), a new task (#/new), one task
// (#/tasks/<id>) and the inbox (#/inbox); and the keys that work on them.

import { getJSON, postJSON, taskPath, newKey, EventStream, LiveList } from "./api.js";
import { h, append, clear, money, tokens, ago, statusBadge, pre, safeHref } from "./dom.js";
import { Timeline } from "./render.js";
import { changesPage, changesHref } from "./changes.js";
import { Status, STATUSES, FINAL_STATUSES, WAITING_STATUSES, Mode, MODES, Kind } from "./enums.js";

// The lists (tasks, approvals) come pushed by the API as they change; their relative times
// ("2m ago") are written again this often, from what the page holds, without a request.
const CLOCK_MS = 30000;
// How often the page looks whether a running task has gone quiet.
const STALL_CHECK_MS = 1000;
// A running task that has written nothing for this long is shown as possibly stalled.
const STALL_MS = 90000;
// The stored events a task's page reads and shows at first; the earlier ones come on request,
// EARLIER_PAGE at a time.
const WINDOW = 500;
const EARLIER_PAGE = 5000;

const main = document.getElementById("main");
const PAGE_TITLE = document.title;
let view = null; // the current page: {stop(), items?() → elements j/k move among, key?(key, item) → handled}

function route() {
  if (view && view.stop) view.stop();
  view = null;
  clear(main);
  document.title = PAGE_TITLE;
  const hash = location.hash || "#/";
  const c = hash.match(/^#\/tasks\/([^/]+)\/changes(?:\/(\d+))?$/);
  const m = !c && hash.match(/^#\/tasks\/(.+)$/);
  if (c) view = changesPage(main, decodeURIComponent(c[1]), Number(c[2] || 0));
  else if (m) view = taskPage(decodeURIComponent(m[1]));
  else if (hash === "#/inbox") view = inboxPage();
  else if (hash === "#/new") view = newTaskPage();
  else if (hash === "#/board") view = boardPage();
  else view = listPage();
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.getAttribute("href") === (m || c ? "#/" : hash));
}

function poller(fn, ms) {
  let timer = null, stopped = false;
  const tick = async () => {
    try { await fn(); } catch (err) { /* fn shows its own errors */ }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return { stop() { stopped = true; clearTimeout(timer); } };
}

function errorBox(el, err) {
  clear(el);
  if (err) append(el, [h("div", { className: "alert" }, String(err.message || err))]);
}

function temporalLink(task) {
  const href = task.temporal_url && safeHref(task.temporal_url);
  if (!href || href.startsWith("#")) return null;
  return h("a", { href, target: "_blank", rel: "noopener noreferrer", className: "temporal" }, "workflow ↗");
}

// ---- the task list ----

// ---- pages past the first, by cursor ----

// morePages offers the pages of a listing past its live first page: each click (or scroll to
// the button) reads the next page after the last cursor (GET path?…&after=), and shows the items
// read so far with show. reset forgets them (a new filter); live hands it the first page's next
// cursor each time the first page changes.
function morePages(label, path, field, params, show) {
  let items = [], cursor = "", loading = false, firstNext = "";
  const b = h("button", { type: "button", className: "more-pages", hidden: true }, label);
  const more = async () => {
    const after = items.length ? cursor : firstNext;
    if (loading || !after) return;
    loading = true;
    try {
      const p = new URLSearchParams(params());
      p.set("after", after);
      const data = await getJSON(path + "?" + p);
      items = items.concat(data[field] || []);
      cursor = data.next || "";
      b.hidden = !cursor;
      show(items);
      // An observer reports changes only: if the new rows left the button in view (the page
      // kept it anchored, or they were too few to push it out), watching it afresh reports it
      // once more (after loading is cleared), so reading goes on while the button is seen.
      if (seer) { seer.unobserve(b); seer.observe(b); }
    } catch (e) { /* the button stays; a click tries again */ } finally { loading = false; }
  };
  b.addEventListener("click", more);
  let seer = null;
  if ("IntersectionObserver" in window) {
    seer = new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting) && !b.hidden) more(); });
    seer.observe(b);
  }
  return {
    button: b,
    live(next) {
      firstNext = next || "";
      if (!items.length) b.hidden = !firstNext;
    },
    reset() { items = []; cursor = ""; b.hidden = true; show(items); },
  };
}

function listPage() {
  const statusSel = h("select", { ariaLabel: "status" }, h("option", { value: "" }, "any status"), STATUSES.map((s) => h("option", { value: s }, s.replace(/_/g, " "))));
  const q = h("input", { type: "search", placeholder: "search (/)", className: "search", ariaLabel: "search the tasks" });
  const awaiting = h("input", { type: "checkbox" });
  const board = h("a", { href: "#/board", className: "view-switch" }, "Board");
  const err = h("div");
  const body = h("tbody");
  const table = h("table", { className: "tasks" },
    h("thead", null, h("tr", null, ["task", "status", "mode", "model", "turns", "cost", "waiting", "updated", ""].map((c) => h("th", null, c)))),
    body);
  const filters = () => {
    const params = new URLSearchParams();
    if (statusSel.value) params.set("status", statusSel.value);
    if (q.value.trim()) params.set("q", q.value.trim());
    if (awaiting.checked) params.set("awaiting_approval", "true");
    return params;
  };
  const query = () => {
    const params = filters();
    return params.toString() ? "?" + params : "";
  };
  // The first page follows the API's pushes; the pages past it are read by cursor as the
  // person scrolls (morePages), and shown below it.
  let first = { tasks: [] }, older = [];
  const draw = () => {
    const keep = keptItem(body);
    const seen = new Set((first.tasks || []).map((t) => t.id));
    const rows = (first.tasks || []).concat(older.filter((t) => !seen.has(t.id))).map(taskRow);
    clear(body);
    if (!rows.length) body.append(h("tr", null, h("td", { className: "muted" }, "no tasks")));
    append(body, rows);
    refocus(body, keep);
  };
  const pages = morePages("More tasks", "/api/v1/tasks", "tasks", filters, (items) => { older = items; draw(); });
  append(main, [h("div", { className: "task-head" }, h("h1", null, "Tasks"), board, h("a", { href: "#/new", className: "button new-task" }, "New task")),
    h("div", { className: "filters" }, statusSel, q, h("label", null, awaiting, " awaiting approval")),
    err, table, pages.button]);
  const show = (data) => {
    first = data;
    pages.live(data.next);
    draw();
  };
  const live = liveTasks(query, show, err);
  const refilter = () => { pages.reset(); live.restart(); };
  for (const c of [statusSel, awaiting]) c.addEventListener("change", refilter);
  q.addEventListener("input", refilter);
  return { stop: live.stop, items: () => [...body.querySelectorAll("tr[data-task-id]")] };
}

// liveTasks follows the tasks that query() selects, pushed by the API as they change (no
// timer reads them), showing each list with show; restart follows a new query. The list is
// shown again every CLOCK_MS from what the page holds, so that its relative times move on.
function liveTasks(query, show, err) {
  let feed = null, last = null;
  const start = () => {
    if (feed) feed.stop();
    feed = new LiveList("/api/v1/tasks" + query(), (data) => { last = data; show(data); }, (e) => errorBox(err, e));
  };
  start();
  const clock = setInterval(() => { if (last) show(last); }, CLOCK_MS);
  return { restart: start, stop() { feed.stop(); clearInterval(clock); } };
}

// keptItem is what a list drawn again must keep of its items: the task whose item has the focus,
// and the one chosen with j/k.
function keptItem(root) {
  const focused = document.activeElement && root.contains(document.activeElement) && document.activeElement.closest("[data-task-id]");
  const chosen = root.querySelector(".selected[data-task-id]");
  return { focused: focused && focused.dataset.taskId, chosen: chosen && chosen.dataset.taskId };
}

// refocus gives the items of a list drawn again what keptItem kept: the focus and the choice.
function refocus(root, keep) {
  const item = (id) => id && root.querySelector('[data-task-id="' + CSS.escape(id) + '"]');
  const chosen = item(keep.chosen);
  if (chosen) chosen.classList.add("selected");
  const focused = item(keep.focused);
  const link = focused && focused.querySelector("a");
  if (link) link.focus();
}

// ---- the board: tasks grouped by what they wait for ----

// BOARD is the board's columns, in order; columnOf puts each task in one.
const BOARD = [
  ["working", "Running"], ["you", "Waiting for you"], ["limit", "Waiting for a limit"],
  ["resting", "Idle"], ["broken", "Failed"], ["done", "Done"],
];

function columnOf(t) {
  if (t.pending_approvals > 0 || t.status === Status.NEEDS_ATTENTION) return "you";
  if (t.status === Status.FAILED) return "broken";
  if (FINAL_STATUSES.includes(t.status)) return "done";
  if (WAITING_STATUSES.includes(t.status) || t.status === Status.BUDGET_EXHAUSTED) return "limit";
  if (t.status === Status.RUNNING || t.status === Status.CLOSING) return "working";
  return "resting";
}

function boardPage() {
  const q = h("input", { type: "search", placeholder: "search (/)", className: "search", ariaLabel: "search the tasks" });
  const err = h("div");
  const cols = new Map(BOARD.map(([key, title]) => {
    const list = h("ol", { className: "cards" });
    const count = h("span", { className: "muted" });
    const col = h("section", { className: "column", dataset: { column: key }, ariaLabel: title }, h("h2", null, title, " ", count), list);
    return [key, { col, list, count }];
  }));
  append(main, [h("div", { className: "task-head" }, h("h1", null, "Board"), h("a", { href: "#/", className: "view-switch" }, "List"),
    h("a", { href: "#/new", className: "button new-task" }, "New task")),
  h("div", { className: "filters" }, q), err, h("div", { className: "board" }, [...cols.values()].map((c) => c.col))]);
  const show = (data) => {
    const keep = keptItem(main.querySelector(".board"));
    for (const c of cols.values()) clear(c.list);
    for (const t of data.tasks || []) cols.get(columnOf(t)).list.append(boardCard(t));
    for (const c of cols.values()) c.count.textContent = String(c.list.children.length);
    refocus(main.querySelector(".board"), keep);
  };
  const live = liveTasks(() => (q.value.trim() ? "?q=" + encodeURIComponent(q.value.trim()) : ""), show, err);
  q.addEventListener("input", live.restart);
  return { stop: live.stop, items: () => [...main.querySelectorAll(".board li[data-task-id]")] };
}

function boardCard(t) {
  const facts = [];
  if (t.pending_approvals) facts.push(t.pending_approvals + " waiting" + (t.waiting_since ? " for " + ago(t.waiting_since) : ""));
  if (t.wait) facts.push(waitText(t.wait));
  if (t.last_error) facts.push("error: " + t.last_error);
  return h("li", { className: "card", dataset: { taskId: t.id, status: t.status || "" } },
    taskLink(t), " ", statusBadge(t.status),
    h("div", { className: "muted" }, [t.mode, money(t.cost_usd), t.updated_at ? ago(t.updated_at) + " ago" : ""].filter(Boolean).join(" · ")),
    facts.length ? h("div", { className: t.pending_approvals ? "attn" : "bad" }, facts.join(" · ")) : null);
}

// taskLink is a link to a task's page, named by its title (its id when it has none).
function taskLink(t) {
  return h("a", { href: "#/tasks/" + encodeURIComponent(t.id), className: "task-link", title: t.id }, t.title || t.id);
}

function taskRow(t) {
  const waiting = [];
  if (t.pending_approvals) waiting.push(t.pending_approvals + " waiting" + (t.waiting_since ? " for " + ago(t.waiting_since) : ""));
  if (t.wait) waiting.push(waitText(t.wait));
  if (t.budget_exhausted) waiting.push("budget spent (" + (t.budget_exhausted.bound || "") + ")");
  if (t.attention) waiting.push("needs attention: the session could not be resumed");
  if (t.last_error) waiting.push("error: " + t.last_error);
  const tr = h("tr", { dataset: { taskId: t.id, status: t.status || "" } },
    h("td", { className: "task-name" }, taskLink(t), t.title ? h("div", { className: "muted task-id" }, t.id) : null),
    h("td", null, statusBadge(t.status)),
    h("td", null, t.mode || ""),
    h("td", null, t.model || ""),
    h("td", { className: "num" }, String(turnCount(t))),
    h("td", { className: "num" }, money(t.cost_usd)),
    h("td", { className: t.pending_approvals ? "attn" : "" }, waiting.join(" · ")),
    h("td", { title: t.updated_at || "" }, t.updated_at ? ago(t.updated_at) + " ago" : ""),
    h("td", null, temporalLink(t)));
  return tr;
}

// ---- a new task ----

// WORKSPACE_KEY keeps the workspace of the last task started from this browser, to offer it again.
const WORKSPACE_KEY = "drover.workspace";
// What each permission mode means, for the new task's form; a mode without one shows its name.
const MODE_HELP = {
  [Mode.AUTONOMOUS]: "the agent runs its tools itself",
  [Mode.SUPERVISED]: "a person approves each tool that changes something",
  [Mode.PLAN]: "the agent plans first; a person approves the plan",
};

function newTaskPage() {
  const titleBox = h("input", { type: "text", name: "title", maxLength: 120, placeholder: "the first line of the prompt" });
  const promptBox = h("textarea", { name: "prompt", rows: 6, placeholder: "What should the agent do?" });
  promptBox.required = true;
  const workspace = h("input", { type: "text", name: "workspace", placeholder: "/absolute/path/of/the/folder/on/the/workers" });
  workspace.value = localStorage.getItem(WORKSPACE_KEY) || "";
  const repo = h("input", { type: "text", name: "repo", placeholder: "https://host/owner/repo.git or /path/on/the/workers" });
  const base = h("input", { type: "text", name: "base", placeholder: "the repository's default branch" });
  // A task runs in a folder of its own (workspace) or in a managed worktree of a repository
  // (repo), not both: filling one in sets the other aside.
  const exclusive = () => {
    const managed = repo.value.trim() !== "";
    workspace.disabled = managed;
    workspace.required = !managed;
    base.disabled = !managed;
  };
  repo.addEventListener("input", exclusive);
  exclusive();
  const mode = h("select", { name: "mode" }, MODES.map((m) => h("option", { value: m }, MODE_HELP[m] ? m + ": " + MODE_HELP[m] : m)));
  const model = h("input", { type: "text", name: "model", placeholder: "the CLI's default" });
  const id = h("input", { type: "text", name: "id", placeholder: "a new uuid" });
  const maxCost = h("input", { type: "number", name: "max_cost_usd", placeholder: "none" });
  maxCost.min = "0";
  maxCost.step = "any";
  const submit = h("button", { type: "submit", className: "approve" }, "Start task");
  const err = h("div");
  const field = (label, input, help) => h("label", { className: "field" }, h("span", { className: "label" }, label), input,
    help ? h("span", { className: "muted" }, help) : null);
  const form = h("form", { className: "new-task" },
    field("Prompt", promptBox),
    field("Title", titleBox, "optional: the task's name in the lists"),
    field("Workspace", workspace, "the folder the agent works in, as the workers' hosts see it: unmanaged (no isolation, checkpoint or move)"),
    field("Repository", repo, "or: a git repository the task works on in a worktree and branch of its own, checkpointed every turn"),
    field("Base", base, "with a repository: the branch, tag or commit to start from"),
    field("Mode", mode),
    field("Model", model),
    field("Task id", id, "optional"),
    field("Budget (USD)", maxCost, "optional: the task stops when it has cost this much"),
    err, h("div", { className: "prompt-actions" }, submit));
  append(main, [h("h1", null, "New task"), form]);
  if (!workspace.value) {
    // Offer the workspace of the most recently updated task.
    getJSON("/api/v1/tasks").then((data) => {
      const t = (data.tasks || [])[0];
      if (t && t.workspace && !workspace.value) workspace.value = t.workspace;
    }, () => {});
  }
  // One key per filled-in form: a creation sent again (a double click, a retry after a dropped
  // answer) starts the task once.
  let key = newKey();
  for (const type of ["input", "change"]) form.addEventListener(type, () => { if (!submit.disabled) key = newKey(); });
  promptBox.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const body = { prompt: promptBox.value, mode: mode.value };
    if (repo.value.trim()) {
      body.repo = repo.value.trim();
      if (base.value.trim()) body.base = base.value.trim();
    } else {
      body.workspace = workspace.value.trim();
    }
    if (titleBox.value.trim()) body.title = titleBox.value.trim();
    if (model.value.trim()) body.model = model.value.trim();
    if (id.value.trim()) body.id = id.value.trim();
    if (maxCost.value !== "") body.budget = { max_cost_usd: Number(maxCost.value) };
    submit.disabled = true;
    try {
      const res = await postJSON("/api/v1/tasks", body, { "Idempotency-Key": key });
      if (body.workspace) localStorage.setItem(WORKSPACE_KEY, body.workspace);
      const created = (res.task && res.task.id) || (res.prompt && res.prompt.task_id) || body.id;
      started.add(created);
      location.hash = "#/tasks/" + encodeURIComponent(created);
    } catch (e) {
      errorBox(err, e);
      submit.disabled = false;
    }
  });
  promptBox.focus();
  return { stop() {} };
}

// turnCount reads a task's turns: a number in a listing, the list of turns in a task's details.
function turnCount(t) {
  return Array.isArray(t.turns) ? t.turns.length : (Number(t.turns) || 0);
}

function waitText(w) {
  let s = "waits for account" + (w.reason ? " (" + String(w.reason).replace(/_/g, " ") + ")" : "");
  if (w.position) s += ", #" + w.position + " in queue";
  if (w.retry_at) s += ", retries at " + new Date(w.retry_at).toLocaleTimeString();
  else if (w.resets_at) s += ", resets at " + new Date(w.resets_at).toLocaleTimeString();
  return s;
}

// ---- one task ----

const RUNNING_HINT = "A turn is running: a prompt sent now is queued and runs next.";

// started holds the tasks this tab created: until the API lists one, its page says that it is
// starting rather than that it is unknown.
const started = new Set();

// notFoundText says, in a browser user's words, why a task's page shows nothing.
function notFoundText(id) {
  return started.has(id) ? "Starting the task…" : "No task " + id + " is known: check the link, or pick one from the list.";
}

function taskPage(id) {
  const title = h("h1", null, id);
  const idLine = h("div", { className: "muted task-id", hidden: true }, "task " + id);
  const status = h("span");
  const facts = h("div", { className: "facts" });
  const gauge = contextGauge();
  const stream = h("span", { className: "stream-state" });
  const stall = h("div", { className: "alert stall", hidden: true });
  const err = h("div");
  const list = h("ol", { className: "timeline", id: "timeline" });
  const box = promptBox(id);
  const changes = h("a", { href: changesHref(id, 0), className: "view-switch changes-link", hidden: true }, "Changes");
  append(main, [h("div", { className: "task-head" }, title, status, stream, changes), idLine, facts, gauge.el, err, stall, list, box.form]);

  let task = null, lastEventAt = Date.now(), stopped = false;
  const timeline = new Timeline(list, {
    decide: (pendingID, body) => postJSON(taskPath(id) + "/approvals/" + encodeURIComponent(pendingID), body),
    onContext: gauge.set,
    onActivity: () => { lastEventAt = Date.now(); catchUp(0); },
    // A new request: read the task again at once for its choices and deadline.
    onRequest: () => { refresh(); },
    refreshPending: () => refresh(),
    turnActions: (n) => turnActions(id, n),
  });
  const showTask = (t) => {
    task = t;
    if (t.title && title.textContent !== t.title) {
      title.textContent = t.title;
      document.title = t.title + " · drover";
    }
    idLine.hidden = !t.title;
    clear(status).append(statusBadge(t.status));
    changes.hidden = !t.repo;
    list.classList.toggle("managed", !!t.repo);
    clear(facts);
    append(facts, factsOf(t));
    if (t.context_window) gauge.set(t.context_window);
    timeline.setPending(t.pending || []);
    box.show(t);
  };

  // refresh reads the task's details once; calls made while one is in flight share it. A row
  // the stream pushed while the read was on its way may be newer than the read's answer, and the
  // stream brings every later change: that answer is dropped, not shown over the pushed row.
  let inflight = null, pushes = 0, reads = 0;
  const refresh = () => {
    if (!inflight) {
      const at = pushes;
      inflight = getJSON(taskPath(id)).then((t) => {
        if (!stopped && pushes === at) showTask(t);
        errorBox(err, null);
      }, (e) => {
        if (e.status !== 404) return errorBox(err, e);
        clear(err).append(h("div", { className: started.has(id) ? "muted starting" : "alert" }, notFoundText(id)));
      }).finally(() => {
        inflight = null;
        document.body.dataset.taskReads = String(++reads);
      });
    }
    return inflight;
  };
  // behind says whether what the API said of the task is older than the timeline: a turn the
  // timeline has seen end is still running, or the requests waiting differ in number.
  const behind = (t) => !follow.loading() && ((t.status === Status.RUNNING && timeline.turnEnded) ||
    (t.pending_approvals || 0) !== timeline.waiting());
  // catchUp reads the task after its events changed, and again, backing off, until the header
  // agrees with the timeline (the task's row may be written just after its event).
  let catchTimer = null;
  const catchUp = (tries) => {
    clearTimeout(catchTimer);
    catchTimer = null;
    refresh().then(() => {
      if (stopped || !task || !behind(task) || tries >= 8) return;
      catchTimer = setTimeout(() => catchUp(tries + 1), 100 * 2 ** tries);
    });
  };
  // The task's row, pushed by the API whenever it changes (what changes with no event too: an
  // account's wait, a budget).
  const live = new LiveList(taskPath(id), (t) => {
    pushes++;
    if (!stopped) showTask(t);
  }, (e) => {
    if (!e) return errorBox(err, null);
    if (e.status !== 404) return errorBox(err, e);
    clear(err).append(h("div", { className: started.has(id) ? "muted starting" : "alert" }, notFoundText(id)));
  });
  const stallCheck = poller(async () => {
    const quiet = Date.now() - lastEventAt;
    // A turn that waits for a person writes nothing until the person answers: that is no stall.
    const waitsForYou = task && (task.pending_approvals > 0 || (task.pending || []).length > 0 || timeline.waiting() > 0);
    stall.hidden = !(task && task.status === Status.RUNNING && !waitsForYou && quiet > STALL_MS);
    if (!stall.hidden) stall.textContent = "No event for " + Math.round(quiet / 1000) + "s while the turn runs: it may be stalled. Interrupt it, or look at its workflow.";
    stall.dataset.checkedAt = String(Date.now());
  }, STALL_CHECK_MS);
  const follow = followTimeline(id, timeline, list, stream, () => stopped, () => catchUp(0));
  return { stop() { stopped = true; live.stop(); stallCheck.stop(); clearTimeout(catchTimer); follow.stop(); } };
}

// turnActions are what a person may do with a managed task's finished turn: see its changes, take
// the task back to its end. The timeline shows them only once the task is known to be managed.
function turnActions(id, n) {
  const said = h("span", { className: "muted turn-said" });
  said.setAttribute("role", "status");
  const rewind = h("button", { type: "button", className: "rewind", title: "take the task back to the end of turn " + n + ": its next prompt continues from here, in this turn's files" }, "Rewind to here");
  rewind.addEventListener("click", async () => {
    if (!confirm("Take the task back to the end of turn " + n + "? Its conversation and files go back; the later turns' files are kept aside.")) return;
    rewind.disabled = true;
    said.textContent = "Rewinding…";
    try {
      const res = await postJSON(taskPath(id) + "/rewind", { turn: n });
      said.textContent = "Back at the end of turn " + res.turn + (res.set_aside && res.set_aside.length ? "; turns " + res.set_aside.join(", ") + " kept aside" : "") + ".";
    } catch (e) {
      said.textContent = String(e.message || e);
    } finally {
      rewind.disabled = false;
    }
  });
  const fork = h("button", { type: "button", className: "fork", title: "start a new task from the end of turn " + n + ": its files and conversation; this task goes on untouched" }, "Fork from here");
  fork.addEventListener("click", async () => {
    const name = prompt("The new task's id (empty: a new one):", "");
    if (name === null) return;
    fork.disabled = true;
    said.textContent = "Forking…";
    try {
      const body = { turn: n };
      if (name.trim()) body.id = name.trim();
      const res = await postJSON(taskPath(id) + "/fork", body);
      started.add(res.task_id);
      location.hash = "#/tasks/" + encodeURIComponent(res.task_id);
    } catch (e) {
      said.textContent = String(e.message || e);
      fork.disabled = false;
    }
  });
  return h("li", { className: "turn-actions", dataset: { turnActions: String(n) } },
    h("a", { href: changesHref(id, n), className: "changes-of-turn" }, "Changes of turn " + n), " ", rewind, " ", fork, " ", said);
}

// attentionBox is the red box of a task whose session could not be resumed, with the two
// choices a person has: resume it again, or start a new session seeded with a summary.
function attentionBox(t) {
  const note = h("span", { className: "note" });
  const choose = (choice) => async (ev) => {
    ev.target.disabled = true;
    try {
      const res = await postJSON(taskPath(t.id) + "/resolve", { choice });
      note.textContent = " Chosen: " + choice + "; the waiting prompt runs as turn " + res.turn + ".";
    } catch (e) {
      note.textContent = " Not taken: " + (e.message || e);
      ev.target.disabled = false;
    }
  };
  const retry = h("button", { type: "button", className: "resolve-retry" }, "Retry the session");
  const fresh = h("button", { type: "button", className: "resolve-new" }, "Start a new session with a summary");
  retry.addEventListener("click", choose("retry"));
  fresh.addEventListener("click", choose("new_session"));
  return h("div", { className: "alert needs-attention" },
    "Needs attention: the session of turn " + t.attention.turn + " could not be resumed (" + (t.attention.error || "") +
    "). Nothing runs until you choose. ", retry, " ", fresh, note);
}

// factsOf is what a task's header says of it besides its status.
function factsOf(t) {
  const parts = [];
  if (t.mode) parts.push(h("span", null, "mode " + t.mode));
  if (t.model) parts.push(h("span", null, "model " + t.model));
  parts.push(h("span", { className: "cost" }, "cost " + money(t.cost_usd)));
  parts.push(h("span", { className: "turns" }, turnCount(t) + (turnCount(t) === 1 ? " turn" : " turns")));
  if (t.repo) parts.push(h("span", { className: "repo" }, "repo ", h("code", null, t.repo + (t.base ? " @ " + t.base : ""))));
  if (t.workspace) parts.push(h("span", null, h("code", null, t.workspace)));
  if (t.pending_approvals) parts.push(h("span", { className: "attn" }, t.pending_approvals + " waiting for you" + (t.waiting_since ? " for " + ago(t.waiting_since) : "")));
  if (t.wait) parts.push(h("span", { className: "attn" }, waitText(t.wait)));
  if (t.budget_by) parts.push(h("span", { className: "budget-by" }, "budget set by " + t.budget_by));
  if (t.cancelled_by) parts.push(h("span", { className: "cancelled-by" }, "cancelled by " + t.cancelled_by + (t.cancelled_at ? " " + ago(t.cancelled_at) + " ago" : "")));
  if (t.budget_exhausted) parts.push(h("span", { className: "attn" }, "budget spent: " + (t.budget_exhausted.bound || "")));
  if (t.attention) parts.push(attentionBox(t));
  if (t.last_error) parts.push(h("span", { className: "bad" }, "last error: " + t.last_error));
  parts.push(temporalLink(t));
  return parts;
}

// contextGauge shows how full the task's context window is.
function contextGauge() {
  const gauge = h("div", { className: "gauge", title: "context window" }, h("div", { className: "gauge-fill" }));
  const text = h("span", { className: "muted gauge-text" }, "context: —");
  const set = (cw) => {
    const size = cw.context_window_size || cw.limit || 0, used = cw.context_window_used || cw.used || 0;
    if (!size) return;
    const pct = Math.min(100, Math.round(used / size * 100));
    gauge.firstChild.style.width = pct + "%";
    gauge.classList.toggle("high", pct >= 80);
    text.textContent = "context: " + tokens(used) + " / " + tokens(size) + " (" + pct + "%)";
  };
  return { el: h("div", { className: "ctx" }, gauge, text), set };
}

// followTimeline reads the task's events into the timeline and follows its stream, saying the
// stream's state in `stream`; loaded() is called once the stored events are in.
function followTimeline(id, timeline, list, stream, stopped, loaded) {
  // While the stored events load, the page is not laid out between pages (a long task would be
  // laid out once per page); once they are in, it scrolls to the end once.
  let loading = true;
  // A long task first reads and shows only its last WINDOW stored events: the earlier ones are
  // read, EARLIER_PAGE at a time, when asked for (the log's seqs have no gaps, so the first seq
  // shown says how many come before it).
  const all = [];
  const earlier = h("button", { type: "button", className: "earlier", hidden: true });
  list.before(earlier);
  const offerEarlier = () => {
    const before = all.length ? all[0].seq - 1 : 0;
    earlier.hidden = before <= 0;
    earlier.disabled = false;
    earlier.textContent = before <= EARLIER_PAGE ? "Show the " + before.toLocaleString() + " earlier events"
      : "Show " + EARLIER_PAGE.toLocaleString() + " earlier events (of " + before.toLocaleString() + ")";
  };
  earlier.addEventListener("click", async () => {
    earlier.disabled = true;
    let older;
    try {
      older = await events.earlier(all[0].seq, EARLIER_PAGE);
    } catch (err) {
      earlier.disabled = false;
      earlier.textContent = "Earlier events could not be read: " + String(err.message || err) + " (try again)";
      return;
    }
    all.unshift(...older);
    timeline.reset();
    timeline.add(all);
    document.body.dataset.lastSeq = String(timeline.lastSeq);
    offerEarlier();
  });
  // The first screen: the next frame once the stored events read at first are laid out (or once
  // the log turned out empty), marked for the benchmark (figure C2).
  let shown = false;
  const firstScreen = () => {
    if (shown) return;
    shown = true;
    requestAnimationFrame(() => setTimeout(() => performance.mark("drover-first-screen")));
  };
  const events = new EventStream(id, (recs) => {
    if (stopped()) return;
    const atEnd = !loading && window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    for (const r of recs) all.push(r);
    if (loading) offerEarlier();
    timeline.add(recs);
    document.body.dataset.lastSeq = String(timeline.lastSeq);
    firstScreen();
    if (atEnd) window.scrollTo(0, document.body.scrollHeight);
  }, (state, detail, status) => {
    if (status === 404) detail = started.has(id) ? "the task is starting" : "no such task";
    stream.textContent = state === "live" ? "● live" : state === "loading" ? "loading…" : "○ " + state + (detail ? ": " + detail : "");
    stream.className = "stream-state stream-" + state;
    if (state !== "loading" && loading) {
      loading = false;
      loaded();
      window.scrollTo(0, document.body.scrollHeight);
    }
    if (state !== "loading") firstScreen();
    if (state !== "loading" && !document.body.dataset.timelineReady) {
      document.body.dataset.timelineReady = "1";
      // The stored events are in the page; the next frame shows them (read by the benchmark).
      performance.mark("drover-timeline-ready");
      requestAnimationFrame(() => setTimeout(() => performance.mark("drover-timeline-painted")));
    }
  }, WINDOW);
  events.start();
  return { stop: () => events.stop(), loading: () => loading };
}

// promptBox is the task's prompt box and Interrupt button; show(task) sets them for its status.
function promptBox(id) {
  const prompt = h("textarea", { rows: 3, placeholder: "Prompt the agent (Ctrl+Enter to send)", ariaLabel: "prompt" });
  const send = h("button", { type: "submit" }, "Send");
  const interrupt = h("button", { type: "button", className: "deny" }, "Interrupt");
  const note = h("span", { className: "muted prompt-note" });
  const form = h("form", { className: "prompt" }, prompt, h("div", { className: "prompt-actions" }, send, interrupt, note));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = prompt.value;
    if (!text.trim()) return;
    send.disabled = true;
    try {
      const res = await postJSON(taskPath(id) + "/prompts", { text });
      prompt.value = "";
      const queued = res.queued !== undefined ? res.queued : (res.prompt && res.prompt.queued);
      note.textContent = queued ? "Queued: " + (typeof queued === "number" ? queued + " ahead of it; " : "") + "it runs when the current turn ends." : "Sent.";
    } catch (e) {
      note.textContent = "Not sent: " + (e.message || e);
    } finally {
      send.disabled = false;
    }
  });
  prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) form.requestSubmit();
  });
  interrupt.addEventListener("click", async () => {
    interrupt.disabled = true;
    try {
      await postJSON(taskPath(id) + "/interrupt", {});
      note.textContent = "Interrupt sent.";
    } catch (e) {
      note.textContent = "Interrupt failed: " + (e.message || e);
    }
  });
  const show = (t) => {
    const running = t.status === Status.RUNNING;
    // The hint gives way to what the last prompt or interrupt got, and goes when the turn ends.
    if (running && !note.textContent) note.textContent = RUNNING_HINT;
    else if (!running && note.textContent === RUNNING_HINT) note.textContent = "";
    interrupt.disabled = !running;
    prompt.disabled = send.disabled = FINAL_STATUSES.includes(t.status);
  };
  return { form, show };
}

// ---- the inbox: what waits for a person, across tasks ----

function inboxPage() {
  const err = h("div");
  const reqs = h("ol", { className: "inbox", id: "inbox-list" });
  const empty = h("p", { className: "muted", hidden: true }, "Nothing waits for you.");
  const items = new Map(); // "task/request" → its item
  const attn = h("ul", { className: "attention", id: "attention-list" });
  // The first page of requests follows the API's pushes; the pages past it are read by cursor.
  let firstList = [], older = [];
  const pages = morePages("More requests", "/api/v1/approvals", "approvals", () => new URLSearchParams(),
    (items) => { older = items; showRequests(firstList); });
  append(main, [h("h1", null, "Inbox"), err,
    h("h2", null, "Waiting for a decision"), empty, reqs, pages.button,
    h("h2", null, "Tasks that need a look"), attn]);
  // Items stay as they are while listed (a reason being typed keeps its text and focus); new
  // requests, the newest, go at the end.
  const showRequests = (first) => {
    firstList = first;
    pages.live(approvalsNext);
    const keysFirst = new Set(first.map((p) => (p.task_id || "") + "/" + p.request_id));
    const list = first.concat(older.filter((p) => !keysFirst.has((p.task_id || "") + "/" + p.request_id)));
    const keys = new Set(list.map((p) => (p.task_id || "") + "/" + p.request_id));
    for (const [key, el] of items) if (!keys.has(key)) { el.remove(); items.delete(key); }
    for (const p of list) {
      const key = (p.task_id || "") + "/" + p.request_id;
      if (!items.has(key)) {
        const el = inboxItem(p);
        items.set(key, el);
        reqs.append(el);
      }
    }
    empty.hidden = list.length > 0;
  };
  const showTasks = (data) => {
    clear(attn);
    const bad = (data.tasks || []).filter((t) => [Status.FAILED, Status.BUDGET_EXHAUSTED, Status.WAITING_FOR_SPEND_CAP, Status.NEEDS_ATTENTION].includes(t.status) || t.last_error);
    if (!bad.length) attn.append(h("li", { className: "muted" }, "No failed or stopped task."));
    for (const t of bad) {
      attn.append(h("li", { dataset: { taskId: t.id } }, taskLink(t), " ", statusBadge(t.status),
        t.last_error ? h("span", { className: "bad" }, " " + t.last_error) : null,
        t.budget_exhausted ? h("span", null, " budget spent (" + (t.budget_exhausted.bound || "") + ")") : null));
    }
  };
  const unwatch = watchApprovals(showRequests);
  const live = liveTasks(() => "", showTasks, err);
  return {
    stop() { unwatch(); live.stop(); },
    items: () => [...reqs.querySelectorAll(".inbox-item")],
    // a approves the chosen request, d denies it (with the reason typed, else asks for one).
    key: (key, item) => {
      const b = item && (key === "a" || key === "d") && item.querySelector(key === "a" ? "button.approve" : "button.deny");
      if (b) b.click();
      return !!b;
    },
  };
}

function inboxItem(p) {
  const taskID = p.task_id || "";
  const state = h("span", { className: "muted" });
  const reason = h("input", { type: "text", placeholder: "reason (needed to deny)", className: "reason" });
  const act = (decision) => async () => {
    const body = { decision };
    if (reason.value.trim()) body.message = reason.value;
    if (decision === "deny" && !body.message) {
      state.textContent = "say why: the agent reads the reason";
      reason.focus();
      return;
    }
    state.textContent = "sending…";
    try {
      await postJSON(taskPath(taskID) + "/approvals/" + encodeURIComponent(p.request_id), body);
      state.textContent = "sent";
    } catch (e) {
      state.textContent = "not sent: " + (e.message || e);
    }
  };
  const kind = p.kind || Kind.TOOL;
  return h("li", { className: "inbox-item", dataset: { requestId: p.request_id || "", taskId: taskID } },
    h("div", null, taskLink({ id: taskID, title: p.task_title }), " · ", h("strong", null, kind === Kind.QUESTION ? "Question" : kind === Kind.PLAN ? "Plan" : (p.tool || Kind.TOOL)),
      p.since ? h("span", { className: "muted" }, " · waiting " + ago(p.since)) : null,
      p.deadline ? h("span", { className: "muted" }, " · denied at " + new Date(p.deadline).toLocaleString() + " if nobody answers") : null),
    p.summary ? h("div", null, h("code", null, p.summary)) : null,
    kind === Kind.TOOL ? h("div", { className: "actions" },
      h("button", { type: "button", className: "approve", onclick: act("allow") }, "Approve"),
      h("button", { type: "button", className: "deny", onclick: act("deny") }, "Deny"), reason,
      h("a", { href: "#/tasks/" + encodeURIComponent(taskID) }, "see the whole input"), " ", state)
      : h("div", { className: "actions" }, h("a", { href: "#/tasks/" + encodeURIComponent(taskID) }, "answer on the task's page")));
}

// ---- everywhere: keys ----

// onKey: j and k move among the page's items (rows, cards, requests), / goes to the search, and
// the page may take more keys (a and d in the inbox). Keys typed into a field are the field's.
function onKey(ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) return;
  const t = ev.target;
  if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) {
    if (ev.key === "Escape") t.blur();
    return;
  }
  if (ev.key === "/") {
    const search = main.querySelector("input.search");
    if (search) {
      ev.preventDefault();
      search.focus();
    }
    return;
  }
  if (!view || !view.items) return;
  const items = view.items();
  const at = items.findIndex((el) => el.classList.contains("selected"));
  if (ev.key === "j" || ev.key === "k") {
    if (!items.length) return;
    ev.preventDefault();
    const next = at < 0 ? 0 : Math.max(0, Math.min(items.length - 1, at + (ev.key === "j" ? 1 : -1)));
    select(items, next);
  } else if (view.key && at >= 0 && view.key(ev.key, items[at])) {
    // The key did something: its character goes nowhere (not into a box it focused).
    ev.preventDefault();
  }
}

// select marks one item as chosen and moves the focus to its first control, so that Enter opens
// or presses it.
function select(items, i) {
  for (const el of items) el.classList.remove("selected");
  const el = items[i];
  el.classList.add("selected");
  const target = el.querySelector("a, button, input");
  if (target) target.focus();
  el.scrollIntoView({ block: "nearest" });
}

// ---- everywhere: the inbox count and browser notifications ----

const NOTIFY_KEY = "drover.notify";
const known = new Set();
let firstInboxPoll = true;

function setupNotifications() {
  const toggle = document.getElementById("notify-toggle");
  const supported = "Notification" in window;
  toggle.disabled = !supported;
  toggle.checked = supported && localStorage.getItem(NOTIFY_KEY) === "1" && Notification.permission === "granted";
  toggle.addEventListener("change", async () => {
    if (!toggle.checked) { localStorage.removeItem(NOTIFY_KEY); return; }
    const perm = await Notification.requestPermission();
    toggle.checked = perm === "granted";
    if (toggle.checked) localStorage.setItem(NOTIFY_KEY, "1");
  });
  const count = document.getElementById("inbox-count");
  watchApprovals((list) => {
    count.hidden = !list.length;
    count.textContent = String(list.length) + (approvalsNext ? "+" : "");
    for (const p of list) {
      const key = (p.task_id || "") + "/" + p.request_id;
      if (known.has(key)) continue;
      known.add(key);
      if (!firstInboxPoll && toggle.checked && Notification.permission === "granted") {
        const n = new Notification("drover: " + (p.task_title || p.task_id || "a task") + " waits for you", { body: (p.tool ? p.tool + ": " : "") + (p.summary || ""), tag: key });
        n.onclick = () => { window.focus(); location.hash = "#/tasks/" + encodeURIComponent(p.task_id || ""); };
      }
    }
    firstInboxPoll = false;
  });
}

// The requests waiting for a person, pushed by the API as they change: one stream for the whole
// page (the header's count, the notifications, the inbox), started on first use.
const approvalWatchers = new Set();
let approvals = null, approvalFeed = null;
// approvalsNext is the cursor of the page after the pushed first page of requests ("": none).
let approvalsNext = "";

// watchApprovals calls fn with every list of waiting requests, the latest at once if there is
// one; it returns the call that stops it.
function watchApprovals(fn) {
  approvalWatchers.add(fn);
  if (approvals) fn(approvals);
  if (!approvalFeed) {
    approvalFeed = new LiveList("/api/v1/approvals", (data) => {
      approvals = data.approvals || [];
      approvalsNext = data.next || "";
      for (const w of approvalWatchers) w(approvals);
    });
  }
  return () => approvalWatchers.delete(fn);
}

window.addEventListener("hashchange", route);
document.addEventListener("keydown", onKey);
setupNotifications();
route();
