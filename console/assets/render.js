// The timeline of one task: each stored event, by sequence number, rendered as a person wants to
// read it. Every event leaves one element with data-seq, so the page shows each event once and
// says which it has; events that change an earlier element (a tool's result, a decision) also
// update that element.

import { h, append, clear, money, tokens, pre, pretty, fold } from "./dom.js";
import { Outcome } from "./enums.js";

// LAZY_BATCH is the size of a batch of events (a long task's stored events: the page's first read
// of one is this long) from which the turns before its last are laid out only when unfolded: a
// folded turn shows its label, and its events are built when a person opens it (or when a later
// event needs them).
const LAZY_BATCH = 500;

export class Timeline {
  // root: the list element; hooks: {decide(pendingID, body) → Promise, onContext(cw),
  // onComplete(data), onActivity()}.
  constructor(root, hooks) {
    this.root = root;
    this.hooks = hooks || {};
    this.seen = new Set();
    this.lastSeq = 0;
    this.tools = new Map();     // tool_call_id → {el, body, children, call, status}
    this.messages = new Map();  // message_id → text element
    this.reasoning = new Map(); // message_id → pre element
    this.requests = new Map();  // pending_id → {el, actions, state}
    this.pending = new Map();   // request_id → PendingRequest from the API
    this.lastBlock = null;      // the element the last message chunk went to
    this.attempts = new Map();  // "turn/attempt" → the elements of that attempt's events
    this.turns = new Map();     // turn → {el, list, fold}: the turn's folding container
    this.lastTurn = 0;          // the latest turn the timeline holds
    this.turnEnded = false;     // whether that turn's end (complete) is in the timeline
  }

  has(seq) { return this.seen.has(seq); }

  // waiting counts the requests shown as waiting for a person.
  waiting() {
    let n = 0;
    for (const req of this.requests.values()) if (!req.settled && req.ev.pending_id) n++;
    return n;
  }

  // reset empties the timeline, to show it again from its first event.
  reset() {
    clear(this.root);
    for (const m of [this.tools, this.messages, this.reasoning, this.requests, this.attempts, this.turns]) m.clear();
    this.seen.clear();
    this.lastSeq = 0;
    this.lastBlock = null;
  }

  // add renders records it has not seen, in sequence order, and returns how many were new. In a
  // long batch, the turns that fold (all but the last, unless a request in one still waits) are
  // kept to be laid out when unfolded.
  add(records) {
    const fresh = records.filter((r) => r.seq > 0 && !this.seen.has(r.seq));
    fresh.sort((a, b) => a.seq - b.seq);
    if (!fresh.length) return 0;
    const frag = document.createDocumentFragment();
    this.frag = frag;
    const later = this.deferrable(fresh);
    for (const r of fresh) {
      this.seen.add(r.seq);
      if (r.seq > this.lastSeq) this.lastSeq = r.seq;
      if ((r.turn || 0) > this.lastTurn) {
        this.lastTurn = r.turn;
        this.turnEnded = false;
      }
      if ((r.turn || 0) === this.lastTurn && r.type === "complete") this.turnEnded = true;
      if (later.has(r.turn || 0)) this.defer(r);
      else this.show(r);
    }
    this.root.append(frag);
    this.frag = null;
    if (this.hooks.onActivity) this.hooks.onActivity(fresh[fresh.length - 1]);
    return fresh.length;
  }

  // show renders one record, or a line saying why it could not be.
  show(r) {
    try {
      this.render(r);
    } catch (err) {
      this.put(r, h("li", { className: "ev ev-broken", dataset: { seq: String(r.seq) } },
        "event " + r.seq + " (" + r.type + ") could not be shown: " + String(err.message || err)));
    }
  }

  // deferrable returns the turns of a long batch to lay out only when unfolded: new turns before
  // the batch's last that hold no request still waiting for a person.
  deferrable(recs) {
    const out = new Set();
    if (recs.length < LAZY_BATCH) return out;
    let last = 0;
    const open = new Map(); // turn → pending ids asked and not settled
    for (const r of recs) {
      const n = r.turn || 0;
      last = Math.max(last, n);
      const id = r.event && r.event.pending_id;
      if (!id) continue;
      if (!open.has(n)) open.set(n, new Set());
      if (r.type === "permission_request") open.get(n).add(id);
      else if (r.type === "permission_decision" || r.type === "permission_cancelled") open.get(n).delete(id);
    }
    for (const r of recs) {
      const n = r.turn || 0;
      if (n > 0 && n < last && !this.turns.has(n) && !(open.get(n) && open.get(n).size)) out.add(n);
    }
    return out;
  }

  // defer keeps a record of a folded turn to lay out when the turn is unfolded.
  defer(r) {
    const n = r.turn || 0;
    let t = this.turns.get(n);
    if (!t) {
      t = this.newTurn(n, false);
      t.records = [];
      t.fold.addEventListener("toggle", () => { if (t.fold.open) this.layOut(t); });
    }
    t.records.push(r);
    if (r.type === "user_message" && t.label.textContent === "Turn " + n) t.label.textContent += " · " + firstLine((r.event || {}).text);
  }

  // layOut renders the records kept for a folded turn.
  layOut(t) {
    if (!t.records) return;
    const recs = t.records;
    t.records = null;
    const frag = this.frag, lastBlock = this.lastBlock;
    this.frag = document.createDocumentFragment();
    this.lastBlock = null;
    for (const r of recs) this.show(r);
    this.frag = frag;
    this.lastBlock = lastBlock;
  }

  // put places an element at the top level, or under its subagent's tool call.
  put(r, el) {
    const parent = r.event && r.event.parent_tool_call_id;
    const tool = parent && this.tools.get(parent);
    if (tool) {
      tool.children.hidden = false;
      tool.children.append(el);
    } else {
      this.turnList(r).append(el);
    }
    return el;
  }

  // turnList is where a turn's top-level events go: a fold per turn, the latest open. A new
  // turn folds the ones before it, except one that still holds a request waiting for a person.
  turnList(r) {
    const n = r.turn || 0;
    if (!n) return this.frag;
    let t = this.turns.get(n);
    if (t) {
      this.layOut(t); // an event of a folded turn not laid out yet needs the turn's others
      return t.list;
    }
    for (const [m, old] of this.turns) {
      if (m < n && !old.el.querySelector(".request:not(.settled)")) old.fold.open = false;
    }
    return this.newTurn(n, true).list;
  }

  // newTurn adds the fold of turn n at the end of the timeline.
  newTurn(n, open) {
    const label = h("span", { className: "turn-label" }, "Turn " + n);
    const list = h("ol", { className: "turn-events" });
    const fold = h("details", { className: "turn-fold", open }, h("summary", null, label), list);
    const el = h("li", { className: "turn", dataset: { turnNo: String(n) } }, fold);
    const t = { el, list, fold, label, records: null };
    this.turns.set(n, t);
    this.frag.append(el);
    return t;
  }

  item(r, cls, ...children) {
    const el = h("li", { className: "ev ev-" + r.type + (cls ? " " + cls : ""), dataset: { seq: String(r.seq), turn: String(r.turn || 0), attempt: String(r.attempt || 0) } },
      timeOf(r), ...children);
    const key = (r.turn || 0) + "/" + (r.attempt || 0);
    let list = this.attempts.get(key);
    if (!list) this.attempts.set(key, list = []);
    list.push(el);
    return el;
  }

  // marker is an invisible element that records the seq of an event that updates another one.
  marker(r, host) {
    const m = h("span", { className: "seq-marker", hidden: true, dataset: { seq: String(r.seq) } });
    host.append(m);
  }

  render(r) {
    const ev = r.event || {};
    const type = r.type || ev.type;
    if (type !== "message_chunk" && type !== "reasoning") this.lastBlock = null;
    switch (type) {
      case "session_status":
      case "available_commands": {
        // The session's bookkeeping says nothing a person acts on: it is kept, not shown.
        const el = this.item(r, "quiet bookkeeping");
        el.hidden = true;
        this.put(r, el);
        break;
      }
      case "user_message": {
        // Who sent the prompt: the API token's name, or the command line's user.
        this.put(r, this.item(r, "", h("div", { className: "who" }, ev.by ? "Prompt by " + ev.by : "Prompt"), pre(ev.text || "", "prompt-text")));
        const t = this.turns.get(r.turn || 0);
        if (t && t.label.textContent === "Turn " + r.turn) t.label.textContent += " · " + firstLine(ev.text);
        break;
      }
      case "message_chunk":
        this.chunk(r, ev);
        break;
      case "reasoning":
        this.thinking(r, ev);
        break;
      case "tool_call":
      case "tool_update":
        this.tool(r, ev);
        break;
      case "context_window": {
        const el = this.item(r, "quiet ctx-marker");
        el.hidden = true;
        this.put(r, el);
        if (this.hooks.onContext) this.hooks.onContext(ev);
        break;
      }
      case "complete":
        this.complete(r, ev);
        // What a person may do with a finished turn (its changes, going back to it): the page's.
        if (this.hooks.turnActions && r.turn && !ev.parent_tool_call_id) {
          const acts = this.hooks.turnActions(r.turn);
          if (acts) this.put(r, acts);
        }
        break;
      case "error":
        this.failed(r, ev.error || {});
        break;
      case "rate_limit":
        this.put(r, this.item(r, "warn", rateLimitText(ev)));
        break;
      case "permission_request":
        this.request(r, ev);
        break;
      case "permission_cancelled":
        this.settle(r, ev.pending_id, Outcome.CANCELLED, "withdrawn before anybody answered");
        break;
      case "permission_decision": {
        const d = ev.decision || {};
        this.settle(r, ev.pending_id, d.outcome || "decided", decisionText(d));
        break;
      }
      case "permission_denied":
        this.denied(r, ev);
        break;
      case "compaction": {
        const c = ev.compaction || {};
        this.put(r, this.item(r, c.result === "failed" ? "warn" : "quiet", compactionText(c)));
        break;
      }
      case "interrupted":
        this.put(r, this.item(r, "warn", ev.by ? "Interrupted by " + ev.by : "Interrupted"));
        break;
      case "subagent_task":
        this.subagent(r, ev);
        break;
      case "turn_retry":
        this.retry(r, ev);
        break;
      case "workspace_restored": {
        const w = ev.workspace || {};
        this.put(r, this.item(r, "warn", "Files restored: " + (w.message || "the worktree is back at its last checkpoint")));
        break;
      }
      default:
        this.put(r, this.item(r, "quiet", fold("event " + type, () => pre(pretty(ev)))));
    }
  }

  // denied shows a tool the CLI denied, unless its card already says its request was denied.
  denied(r, ev) {
    const p = ev.permission || {};
    const t = ev.tool_call_id && this.tools.get(ev.tool_call_id);
    if (t && t.request && t.request.settled) {
      this.marker(r, t.el);
      return;
    }
    this.put(r, this.item(r, "warn", h("strong", null, "Denied: " + (ev.tool_title || ev.tool_name || "tool")), p.message ? " — " + p.message : ""));
  }

  failed(r, e) {
    this.put(r, this.item(r, "alert", h("strong", null, "Turn failed" + (e.kind ? " (" + e.kind + ")" : "")),
      e.message ? pre(e.message) : null,
      e.api_error_status ? h("div", null, "API status " + e.api_error_status) : null,
      (e.errors || []).length ? h("ul", null, e.errors.map((x) => h("li", null, String(x)))) : null));
  }

  chunk(r, ev) {
    const key = (ev.parent_tool_call_id || "") + "/" + (ev.message_id || "");
    let text = ev.message_id ? this.messages.get(key) : (this.lastBlock && this.lastBlock.kind === "text" ? this.lastBlock.el : null);
    if (text) {
      // A later chunk of the same message adds to its text and keeps its own seq.
      text.append(h("span", { className: "chunk", dataset: { seq: String(r.seq) } }, ev.text || ""));
    } else {
      text = h("div", { className: "message-text" }, h("span", { className: "chunk" }, ev.text || ""));
      this.put(r, this.item(r, "message", h("div", { className: "who" }, "Agent"), text));
      if (ev.message_id) this.messages.set(key, text);
    }
    this.lastBlock = { kind: "text", el: text };
  }

  thinking(r, ev) {
    const key = (ev.parent_tool_call_id || "") + "/" + (ev.message_id || "");
    let body = ev.message_id ? this.reasoning.get(key) : null;
    if (body) {
      body.append(h("span", { className: "chunk", dataset: { seq: String(r.seq) } }, ev.reasoning_text || ""));
      return;
    }
    body = h("pre", { className: "reasoning-text" }, h("span", { className: "chunk" }, ev.reasoning_text || ""));
    this.put(r, this.item(r, "reasoning", h("details", null, h("summary", null, "Reasoning"), body)));
    if (ev.message_id) this.reasoning.set(key, body);
  }

  tool(r, ev) {
    let t = this.tools.get(ev.tool_call_id);
    if (!t || !ev.tool_call_id) {
      const head = h("div", { className: "tool-head" });
      const body = h("div", { className: "tool-body" });
      const asks = h("div", { className: "tool-asks" });
      const children = h("ol", { className: "children", hidden: true });
      const el = this.item(r, "tool", head, body, asks, children);
      t = { el, head, body, asks, children, call: ev, request: null };
      if (ev.tool_call_id) {
        el.dataset.toolCallId = ev.tool_call_id;
        this.tools.set(ev.tool_call_id, t);
      }
      this.put(r, el);
    } else {
      this.marker(r, t.el);
    }
    const merged = Object.assign({}, t.call, ev);
    if (!ev.normalized && t.call.normalized) merged.normalized = t.call.normalized;
    t.call = merged;
    this.drawTool(t);
  }

  // drawTool shows a tool call's head and body from what is known of it and of its request: a
  // call waiting for a person says so, and a denied one shows no output (it did not run; the
  // reason is on its request).
  drawTool(t) {
    const merged = t.call;
    const req = t.request;
    const asking = req && !req.settled;
    const denied = req && req.settled && req.outcome && req.outcome !== Outcome.ALLOWED;
    let status = merged.tool_status || "running";
    if (asking && status === "running") status = "waiting";
    t.el.dataset.status = status;
    t.el.classList.toggle("asking", !!asking);
    const mark = { complete: "✓", error: "✗", waiting: "?" }[status] || "…";
    clear(t.head);
    append(t.head, [
      h("span", { className: "tool-status tool-" + status, title: status === "waiting" ? "waiting for you" : status }, mark),
      h("span", { className: "tool-name" }, merged.tool_title || merged.tool_name || "tool"),
      merged.tool_title && merged.tool_name && merged.tool_title !== merged.tool_name ? h("span", { className: "muted" }, " " + merged.tool_name) : null,
      asking ? h("span", { className: "attn" }, " · waiting for you") : null,
    ]);
    clear(t.body);
    const n = denied ? withoutOutput(merged.normalized) : merged.normalized;
    const stderr = n && n[n.kind] && n[n.kind].output && n[n.kind].output.stderr;
    const showError = merged.tool_error && !denied && merged.tool_error !== stderr;
    append(t.body, [renderPayload(n), showError ? pre(merged.tool_error, "stderr") : null]);
  }

  subagent(r, ev) {
    const s = ev.subagent || {};
    let text = (s.description || s.task_type || "subagent") + " · " + (s.phase || "").replace(/^task_/, "");
    if (s.status) text += " · " + s.status;
    if (s.last_tool_name) text += " · last tool " + s.last_tool_name;
    const el = this.item(r, "quiet subagent-progress", text, s.summary ? pre(s.summary) : null);
    const t = ev.tool_call_id && this.tools.get(ev.tool_call_id);
    if (t) {
      t.children.hidden = false;
      t.children.append(el);
    } else {
      this.put(r, el);
    }
  }

  complete(r, ev) {
    const d = ev.data || {};
    const parts = [d.is_error ? "Turn ended with an error" : "Turn complete", money(d.cost_usd)];
    if (d.duration_ms) parts.push((d.duration_ms / 1000).toFixed(1) + "s");
    parts.push(tokens(d.input_tokens) + " in / " + tokens(d.output_tokens) + " out");
    if (d.num_turns) parts.push(d.num_turns + " model calls");
    if (d.terminal_reason) parts.push(d.terminal_reason);
    if (d.checkpoint) parts.push("checkpoint " + String(d.checkpoint).slice(0, 12));
    this.put(r, this.item(r, d.is_error ? "alert" : "done", parts.join(" · ")));
    if (this.hooks.onComplete) this.hooks.onComplete(d);
  }

  retry(r, ev) {
    const tr = ev.turn_retry || {};
    // The failed attempt's events are partial output: fold them away, keep them in the page.
    for (const el of this.attempts.get((r.turn || 0) + "/" + (tr.attempt || 0)) || []) el.classList.add("dropped");
    this.put(r, this.item(r, "warn", "Attempt " + (tr.attempt || "?") + " failed" + (tr.reason ? ": " + tr.reason : "") + " — the turn runs again from its last committed point; the partial output above is set aside"));
  }

  request(r, ev) {
    const p = ev.permission || {};
    const tool = ev.tool_call_id && this.tools.get(ev.tool_call_id);
    const actions = h("div", { className: "actions" });
    const state = h("div", { className: "request-state" }, "waiting for you");
    const input = p.input !== undefined ? p.input : (ev.normalized && ev.normalized.generic && ev.normalized.generic.input);
    const deadline = p.deadline ? h("div", { className: "muted deadline" }, "Denied at " + new Date(p.deadline).toLocaleString() + " if nobody answers") : null;
    // Inside its tool call's card the payload already shows what the tool does: the request
    // adds only why it asks and what a person decides.
    const detail = h("div", { className: "request-detail" },
      !tool && p.summary ? h("div", { className: "summary" }, h("code", null, p.summary)) : null,
      p.description && !(tool && tool.body.textContent.includes(p.description)) ? h("div", { className: "muted" }, p.description) : null,
      p.decision_reason ? h("div", { className: "muted" }, "Why asked: " + p.decision_reason) : null,
      p.blocked_path ? h("div", { className: "muted" }, "Path: " + p.blocked_path) : null,
      p.diff ? diffView(p.diff) : null,
      p.plan ? h("div", null, h("div", { className: "label" }, "Plan" + (p.plan_file ? " (" + p.plan_file + ")" : "")), pre(p.plan, "plan")) : null,
      questionsView(p.questions),
      input !== undefined ? fold("Tool input", () => pre(pretty(input), "json"), "input") : null);
    const head = h("div", { className: "request-head" }, h("strong", null, tool ? "Asks to run" : "Permission: " + (p.display_name || ev.tool_title || ev.tool_name || "tool")), p.reasked ? h("span", { className: "muted" }, " (asked again)") : null);
    let el;
    if (tool) {
      el = h("div", { className: "request in-tool", dataset: { seq: String(r.seq) } }, head, detail, deadline, state, actions);
    } else {
      el = this.item(r, "request", head, detail, deadline, state, actions);
    }
    el.dataset.pendingId = ev.pending_id || "";
    const req = { el, actions, state, detail, deadline, ev, tool, settled: false };
    if (ev.pending_id) {
      const old = this.requests.get(ev.pending_id);
      if (old && old.settled) {
        req.settled = true;
        req.outcome = old.outcome;
        state.textContent = old.state.textContent;
      }
      this.requests.set(ev.pending_id, req);
    }
    if (tool) {
      tool.asks.append(el);
      tool.request = req;
      this.drawTool(tool);
    } else {
      this.put(r, el);
    }
    this.refreshRequest(req);
    if (!req.settled && this.hooks.onRequest) this.hooks.onRequest(ev.pending_id);
  }

  // settle records a request's end. A request in the page folds to one line that says who
  // decided what; its event leaves a marker in it. One not in the page gets a line of its own.
  settle(r, pendingID, outcome, text) {
    const req = this.requests.get(pendingID);
    if (req && req.ev.pending_id) {
      this.marker(r, req.el);
      req.settled = true;
      req.outcome = outcome;
      req.el.dataset.outcome = outcome;
      req.state.textContent = text;
      this.refreshRequest(req);
      if (req.tool) this.drawTool(req.tool);
      return;
    }
    this.put(r, this.item(r, outcome === Outcome.ALLOWED ? "done" : "warn", "Request " + text));
    if (pendingID) {
      const stub = { el: h("li"), actions: h("div"), state: h("div", null, text), ev: {}, settled: true, outcome };
      this.requests.set(pendingID, stub);
    }
  }

  // requestButtons makes a waiting request's buttons: Approve (or Answer), Deny, and one per
  // "allow always" choice.
  requestButtons(req, id, p, suggestions) {
    const reason = req.reason;
    const decide = (body) => {
      req.sent = true;
      for (const b of req.buttons.querySelectorAll("button")) b.disabled = true;
      req.state.textContent = "sending…";
      Promise.resolve(this.hooks.decide && this.hooks.decide(id, body)).then(() => {
        // The agent's answer may have come through the stream first: it says more.
        if (!req.settled) req.state.textContent = "sent: " + body.decision + " — waiting for the agent";
      }, (err) => {
        req.sent = false;
        if (req.settled) return;
        req.state.textContent = "not sent: " + String(err.message || err);
        for (const b of req.buttons.querySelectorAll("button")) b.disabled = false;
      });
    };
    const questions = p.questions || [];
    const approve = h("button", { className: "approve", type: "button" }, questions.length ? "Answer" : "Approve");
    approve.addEventListener("click", () => {
      const body = { decision: "allow" };
      if (reason.value) body.message = reason.value;
      if (questions.length) body.answers = chosenAnswers(req.el, questions);
      decide(body);
    });
    const deny = h("button", { className: "deny", type: "button" }, "Deny");
    deny.addEventListener("click", () => {
      // The API refuses a denial without a reason: it is what the agent reads.
      if (!reason.value.trim()) {
        req.state.textContent = "say why in the reason box: the agent reads it";
        reason.focus();
        return;
      }
      decide({ decision: "deny", message: reason.value });
    });
    const buttons = [approve, deny];
    if (suggestions.length) {
      for (const s of suggestions) {
        const b = h("button", { className: "always", type: "button", title: "Allow, and for the rest of the task: " + (s.label || s.key) }, "Always " + ruleText(s.label || s.key));
        b.addEventListener("click", () => decide({ decision: "allow_always", always: s.key }));
        buttons.push(b);
      }
    } else if (p.allow_always && !p.requires_user_interaction) {
      // The API's list of the request's choices has not come yet: fetch it, then let the person
      // pick among them; with none listed, the API grants the only one there is.
      const b = h("button", { className: "always", type: "button", title: "Allow, and allow this for the rest of the task" }, "Allow always…");
      b.addEventListener("click", async () => {
        b.disabled = true;
        try {
          if (this.hooks.refreshPending) await this.hooks.refreshPending();
        } catch (_) { /* decided below */ }
        const now = this.pending.get(id);
        if (now && (now.suggestions || []).length) return; // setPending showed the choices
        decide({ decision: "allow_always" });
      });
      buttons.push(b);
    }
    return buttons;
  }

  // setPending tells which requests the API lists as waiting (their suggestions and deadlines).
  setPending(list) {
    this.pending = new Map((list || []).map((p) => [p.request_id, p]));
    for (const req of this.requests.values()) this.refreshRequest(req);
  }

  // refreshRequest draws a request's buttons from what the API lists for it. Only the buttons and
  // the deadline are redrawn, and only when they change: the reason box stays as it is, with what
  // a person is typing and its focus.
  refreshRequest(req) {
    const id = req.ev.pending_id;
    if (req.settled || !id) {
      req.el.classList.add("settled");
      clear(req.actions);
      if (req.deadline) req.deadline.remove();
      if (req.detail && !req.folded && req.detail.childNodes.length) {
        // A decided request folds: what was asked stays a click away.
        req.folded = true;
        const d = h("details", { className: "asked" }, h("summary", null, "What was asked"));
        req.detail.replaceWith(d);
        d.append(req.detail);
      }
      return;
    }
    const pend = this.pending.get(id);
    const p = req.ev.permission || {};
    const suggestions = (pend && pend.suggestions) || [];
    const drawn = JSON.stringify([suggestions, pend && pend.deadline]);
    if (req.drawn === drawn) return;
    req.drawn = drawn;
    if (!req.buttons) {
      req.buttons = h("span", { className: "buttons" });
      req.reason = h("input", { type: "text", placeholder: "reason (the agent reads it; needed to deny)", className: "reason" });
      req.note = h("span", { className: "muted" });
      append(req.actions, [req.buttons, req.reason, req.note]);
    }
    const buttons = this.requestButtons(req, id, p, suggestions);
    clear(req.buttons);
    append(req.buttons, buttons);
    // A decision on its way keeps the buttons off, whatever redrew them.
    if (req.sent) for (const b of buttons) b.disabled = true;
    req.note.textContent = pend && pend.deadline && !p.deadline ? " denied at " + new Date(pend.deadline).toLocaleString() + " if nobody answers" : "";
  }
}

function chosenAnswers(root, questions) {
  const out = {};
  questions.forEach((q, i) => {
    const picked = [];
    for (const box of root.querySelectorAll('input[data-q="' + i + '"]')) if (box.checked) picked.push(box.value);
    out[q.question] = picked;
  });
  return out;
}

function questionsView(questions) {
  if (!questions || !questions.length) return null;
  return h("div", { className: "questions" }, questions.map((q, i) =>
    h("fieldset", null, h("legend", null, (q.header ? q.header + ": " : "") + q.question),
      (q.options || []).map((o) => {
        const box = h("input", { type: q.multi_select ? "checkbox" : "radio", name: "q" + i, value: o.label });
        box.dataset.q = String(i);
        return h("label", { className: "option" }, box, " " + o.label, o.description ? h("span", { className: "muted" }, " — " + o.description) : null);
      }))));
}

// renderPayload shows a tool call's normalized payload by its kind.
export function renderPayload(n) {
  if (!n || !n.kind) return null;
  const v = n[n.kind] || {};
  const box = h("div", { className: "payload payload-" + n.kind, dataset: { kind: n.kind } });
  switch (n.kind) {
    case "read_file": {
      let where = v.file_path || "";
      if (v.offset || v.limit) where += " (lines " + (v.offset || 1) + (v.limit ? "–" + ((v.offset || 1) + v.limit - 1) : "") + ")";
      append(box, [h("div", null, h("span", { className: "label" }, "Read "), h("code", null, where))]);
      if (v.output) {
        const o = v.output;
        let info = o.line_count + " lines";
        if (o.total_lines) info += " of " + o.total_lines;
        if (o.truncated) info += ", truncated";
        box.append(fold(info, () => pre(o.content || "", "file")));
      }
      break;
    }
    case "modify_file": {
      box.append(h("div", null, h("span", { className: "label" }, "Edit "), h("code", null, v.file_path || "")));
      for (const m of v.mutations || []) box.append(mutationView(m));
      break;
    }
    case "shell_exec": {
      if (v.description) box.append(h("div", { className: "muted" }, v.description));
      if (v.command) box.append(pre("$ " + v.command, "command"));
      const meta = [];
      if (v.work_dir) meta.push("in " + v.work_dir);
      if (v.background) meta.push("in the background");
      if (v.shell_id) meta.push("shell " + v.shell_id);
      if (v.timeout) meta.push("timeout " + Math.round(v.timeout / 1000) + "s");
      if (meta.length) box.append(h("div", { className: "muted" }, meta.join(" · ")));
      const o = v.output;
      if (o) {
        if (o.stdout) box.append(pre(o.stdout, "stdout"));
        if (o.stderr) box.append(pre(o.stderr, "stderr"));
        const end = [];
        if (o.exit_code !== undefined && o.exit_code !== null) end.push("exit " + o.exit_code);
        if (o.interrupted) end.push("interrupted");
        if (end.length) box.append(h("div", { className: o.exit_code ? "exit bad" : "exit" }, end.join(" · ")));
      }
      break;
    }
    case "code_search": {
      const what = [v.pattern || v.query || ""];
      if (v.path) what.push("in " + v.path);
      if (v.glob) what.push("files " + v.glob);
      box.append(h("div", null, h("span", { className: "label" }, "Search "), h("code", null, what.join(" "))));
      const o = v.output;
      if (o) {
        box.append(h("div", { className: "muted" }, (o.file_count || 0) + " files" + (o.truncated ? ", truncated" : "")));
        if ((o.files || []).length) box.append(h("ul", { className: "files" }, o.files.map((f) => h("li", null, h("code", null, f)))));
        if (o.content) box.append(pre(o.content, "file"));
      }
      break;
    }
    case "http_request": {
      box.append(h("div", null, h("span", { className: "label" }, (v.method || (v.url ? "GET" : "Search")) + " "), h("code", null, v.url || v.query || "")));
      if (v.status_code) box.append(h("div", { className: v.is_error ? "exit bad" : "muted" }, "status " + v.status_code));
      if (v.prompt) box.append(fold("Prompt", () => pre(v.prompt)));
      if (v.response) box.append(fold("Response", () => pre(v.response)));
      break;
    }
    case "subagent_task": {
      box.append(h("div", null, h("span", { className: "label" }, "Subagent" + (v.subagent_type ? " (" + v.subagent_type + ")" : "") + " "), v.description || ""));
      if (v.status) box.append(h("div", { className: "muted" }, v.status));
      if (v.prompt) box.append(fold("Its prompt", () => pre(v.prompt)));
      if (v.result) box.append(h("details", { open: true }, h("summary", null, "Its result"), pre(v.result)));
      break;
    }
    case "create_task":
      box.append(h("div", null, h("span", { className: "label" }, "New task "), h("strong", null, v.title || ""), v.task_id ? h("span", { className: "muted" }, " #" + v.task_id) : null));
      if (v.description) box.append(pre(v.description));
      break;
    case "manage_todos": {
      box.append(h("div", { className: "label" }, "Todos (" + (v.operation || "") + ")"));
      box.append(h("ul", { className: "todos" }, (v.items || []).map((it) =>
        h("li", { className: "todo todo-" + String(it.status || "").replace(/[^a-z_]/g, "") },
          h("span", { className: "todo-mark" }, it.status === "completed" ? "☑" : it.status === "in_progress" ? "◐" : "☐"), " ", it.description || it.id || ""))));
      break;
    }
    case "generic": {
      const name = v.server ? v.server + " · " + (v.tool || v.name) : v.name;
      box.append(h("div", null, h("span", { className: "label" }, "Tool "), h("code", null, name || "")));
      if (v.input !== undefined) box.append(fold("Input", () => pre(pretty(v.input), "json")));
      if (v.output) box.append(pre(v.output, v.is_error ? "stderr" : "stdout"));
      break;
    }
    case "misc":
      box.append(h("div", { className: "label" }, v.label || ""));
      if (v.details) box.append(pre(v.details));
      break;
    default:
      box.append(pre(pretty(n), "json"));
  }
  return box;
}

function mutationView(m) {
  const head = h("div", { className: "muted" }, m.type + (m.replace_all ? " (all occurrences)" : ""));
  if (m.diff) return h("div", { className: "mutation" }, head, diffView(m.diff));
  const lines = [];
  if (m.type === "replace" || m.type === "notebook_cell") {
    for (const l of splitLines(m.old_content)) lines.push("-" + l);
    for (const l of splitLines(m.new_content)) lines.push("+" + l);
  } else {
    for (const l of splitLines(m.content || m.new_content)) lines.push("+" + l);
  }
  return h("div", { className: "mutation" }, head, diffView(lines.join("\n")));
}

function splitLines(s) {
  if (!s) return [];
  const out = String(s).split("\n");
  if (out.length > 1 && out[out.length - 1] === "") out.pop();
  return out;
}

// diffView colours a unified diff line by line.
export function diffView(text) {
  const box = h("pre", { className: "diff" });
  for (const line of String(text).replace(/\n$/, "").split("\n")) {
    let cls = "ctx";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    box.append(h("span", { className: "dl " + cls }, line + "\n"));
  }
  return box;
}

// timeOf shows when an event was stored, as the time of day; the full time is its title.
function timeOf(r) {
  const ms = Date.parse(r.time || "");
  if (!r.time || isNaN(ms)) return null;
  const el = h("time", { className: "ev-time", title: r.time }, new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" }));
  el.dateTime = r.time;
  return el;
}

// withoutOutput is a payload without what running the tool gave: a denied tool did not run.
function withoutOutput(n) {
  if (!n || !n.kind || !n[n.kind] || !n[n.kind].output) return n;
  const v = Object.assign({}, n[n.kind]);
  delete v.output;
  return Object.assign({}, n, { [n.kind]: v });
}

// ruleText says in words what an "allow always" choice grants: "allow Edit(//srv/app/**)" reads
// "allow editing files in /srv/app/". What it cannot read it shows as it is.
export function ruleText(label) {
  const s = String(label || "");
  const m = s.match(/^(allow|deny|ask)\s+(.*)$/);
  const behavior = m ? m[1] : "allow";
  const rules = (m ? m[2] : s).split(/,\s*(?=[A-Za-z_][\w-]*(?:\(|,|$))/);
  const words = rules.map(ruleWords);
  if (words.some((w) => w === null)) return s;
  return behavior + " " + words.join(", ");
}

const RULE_VERBS = {
  Edit: "editing files", Write: "writing files", MultiEdit: "editing files", NotebookEdit: "editing notebooks",
  Read: "reading files", Glob: "listing files", Grep: "searching files",
};

function ruleWords(rule) {
  const m = String(rule).trim().match(/^([A-Za-z_][\w-]*)(?:\((.*)\))?$/);
  if (!m) return null;
  const [, tool, content] = m;
  if (content === undefined || content === "") return "every use of " + tool;
  if (tool === "Bash") {
    const prefix = content.match(/^(.*):\*$/);
    return prefix ? "commands starting with “" + prefix[1] + "”" : "the command “" + content + "”";
  }
  if (tool === "WebFetch" && content.startsWith("domain:")) return "fetching from " + content.slice(7);
  if (RULE_VERBS[tool]) {
    // A rule's path: "//x" is the absolute path /x; "/x" is relative to the project's settings.
    let path = content.startsWith("//") ? content.slice(1) : content;
    const all = path.match(/^(.*\/)\*\*$/);
    return RULE_VERBS[tool] + (all ? " in " + all[1] : " " + path);
  }
  return tool + " with “" + content + "”";
}

function firstLine(text) {
  const line = String(text || "").trim().split("\n")[0];
  return line.length > 80 ? line.slice(0, 79) + "…" : line;
}

function rateLimitText(ev) {
  const rl = ev.rate_limit || {};
  const parts = [ev.rate_limit_message || "rate limit"];
  if (rl.source === "api_retry") parts.push("retry " + (rl.attempt || "?") + "/" + (rl.max_retries || "?") + (rl.retry_delay_ms ? " in " + Math.round(rl.retry_delay_ms / 1000) + "s" : ""));
  if (rl.resets_at) parts.push("resets at " + new Date(rl.resets_at * 1000).toLocaleString());
  if (rl.utilization) parts.push(Math.round(rl.utilization * 100) + "% used");
  return parts.join(" · ");
}

// decisionText says who decided a request, what, and why.
function decisionText(d) {
  let text = d.outcome || "decided";
  if (d.by) text += " by " + d.by;
  if (d.grant) text += " · always: " + d.grant;
  if (d.next_mode) text += " · continues in " + d.next_mode;
  if (d.reason) text += " — " + d.reason;
  if (d.answers) text += " · answers: " + Object.entries(d.answers).map(([q, a]) => q + ": " + a.join(", ")).join("; ");
  return text;
}

function compactionText(c) {
  let text = "Context compaction " + (c.phase || "");
  if (c.trigger) text += " (" + c.trigger + ")";
  if (c.pre_tokens) text += " · " + tokens(c.pre_tokens) + (c.post_tokens ? " → " + tokens(c.post_tokens) : "") + " tokens";
  if (c.result) text += " · " + c.result;
  if (c.error) text += " · " + c.error;
  return text;
}
