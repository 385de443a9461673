// The HTTP API of the same origin: JSON calls and the event stream, with the bearer token the
// API may ask for. The token lives in sessionStorage and travels only in the Authorization header.

const TOKEN_KEY = "drover.token";
// PAGE is how many stored events one request reads: the API's largest page.
const PAGE = 5000;
let tokenPrompt = null;

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function headers(extra) {
  const h = new Headers(extra || {});
  const t = token();
  if (t) h.set("Authorization", "Bearer " + t);
  return h;
}

// askToken shows the sign-in dialog once, however many calls were refused together, and
// resolves when a token was entered.
export function askToken(message) {
  if (tokenPrompt) return tokenPrompt;
  tokenPrompt = new Promise((resolve) => {
    const dlg = document.getElementById("token-dialog");
    const form = document.getElementById("token-form");
    const input = document.getElementById("token-input");
    const err = document.getElementById("token-error");
    err.hidden = !message;
    err.textContent = message || "";
    input.value = "";
    const done = (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      if (!v) return;
      sessionStorage.setItem(TOKEN_KEY, v);
      form.removeEventListener("submit", done);
      dlg.close();
      tokenPrompt = null;
      resolve();
    };
    form.addEventListener("submit", done);
    dlg.showModal();
  });
  return tokenPrompt;
}

// APIError is an answer of the API that is not a success, with the API's code and message.
export class APIError extends Error {
  constructor(status, code, message) {
    super(message || ("HTTP " + status));
    this.status = status;
    this.code = code || "";
  }
}

async function errorOf(resp) {
  let code = "", message = "";
  try {
    const body = await resp.json();
    if (body && body.error) {
      code = String(body.error.code || "");
      message = String(body.error.message || "");
    }
  } catch (_) { /* not JSON */ }
  // The API's messages may end with advice for the command line; a browser user cannot follow it.
  message = message.replace(/;\s*run drover [^;]*$/, "");
  return new APIError(resp.status, code, message || (resp.status + " " + resp.statusText));
}

// request calls the API and, when it answers 401, asks for a token and tries again.
export async function request(method, path, body, extra) {
  for (let tries = 0; ; tries++) {
    const init = { method, headers: headers(extra), cache: "no-store" };
    if (body !== undefined) {
      init.headers.set("Content-Type", "application/json");
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    if (resp.status === 401 && tries < 5) {
      await askToken(tries > 0 ? "That token was refused." : "");
      continue;
    }
    return resp;
  }
}

export async function getJSON(path) {
  const resp = await request("GET", path, undefined, { Accept: "application/json" });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

// postJSON sends body; extra holds more headers (an Idempotency-Key).
export async function postJSON(path, body, extra) {
  const resp = await request("POST", path, body === undefined ? {} : body, Object.assign({ Accept: "application/json" }, extra || {}));
  if (!resp.ok) throw await errorOf(resp);
  const text = await resp.text();
  return text ? JSON.parse(text) : {};
}

// newKey returns a random uuid (version 4) for an Idempotency-Key. crypto.randomUUID exists only
// in secure contexts; getRandomValues everywhere.
export function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return x.slice(0, 8) + "-" + x.slice(8, 12) + "-" + x.slice(12, 16) + "-" + x.slice(16, 20) + "-" + x.slice(20);
}

export function taskPath(id) {
  return "/api/v1/tasks/" + encodeURIComponent(id);
}

// LAST_SEQ is past the end of every log: a page read before it is the log's last.
const LAST_SEQ = Number.MAX_SAFE_INTEGER;

// EventStream follows a task's event log: first the stored events (JSON: the last `tail` of them
// when tail is set, else all of them in pages), then the live stream (text/event-stream) from the
// last sequence number seen, resuming with Last-Event-ID whenever the connection drops. onEvents
// receives arrays of {seq, type, turn, attempt, time, event}; onState receives "loading", "live",
// "reconnecting" or "ended", a detail, and the HTTP status of a refusal. earlier() reads the
// events before a seq.
export class EventStream {
  constructor(taskID, onEvents, onState, tail) {
    this.taskID = taskID;
    this.onEvents = onEvents;
    this.onState = onState;
    this.tail = tail || 0;
    this.after = 0;
    this.stopped = false;
    this.ctrl = null;
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async start() {
    this.onState("loading", "");
    try {
      await this.backlog();
    } catch (err) {
      this.onState("reconnecting", String(err.message || err), err.status);
    }
    let delay = 500;
    while (!this.stopped) {
      try {
        const got = await this.live();
        if (this.stopped) return;
        this.onState("reconnecting", "the stream closed");
        if (got) delay = 100;
      } catch (err) {
        if (this.stopped) return;
        this.onState("reconnecting", String(err.message || err), err.status);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(Math.max(delay * 2, 500), 10000);
    }
  }

  deliver(list) {
    const out = [];
    for (const raw of list) {
      const rec = normalizeRecord(raw, 0, "");
      if (!rec) continue;
      out.push(rec);
      if (rec.seq > this.after) this.after = rec.seq;
    }
    if (out.length) this.onEvents(out);
  }

  // backlog reads the stored events page by page and hands them over at once, so that the page
  // lays out a long task once rather than once per page.
  async backlog() {
    if (this.tail && this.after === 0) {
      // A long task opens on its end: the events before it come when asked for (earlier).
      const page = await getJSON(taskPath(this.taskID) + "/events?before=" + LAST_SEQ + "&limit=" + this.tail);
      this.deliver((page && page.events) || []);
      return;
    }
    const all = [];
    try {
      for (let after = this.after; ;) {
        const page = await getJSON(taskPath(this.taskID) + "/events?after=" + after + "&limit=" + PAGE);
        const list = (page && page.events) || [];
        for (const raw of list) {
          all.push(raw);
          if (typeof raw.seq === "number" && raw.seq > after) after = raw.seq;
        }
        if (list.length < PAGE) return;
      }
    } finally {
      this.deliver(all);
    }
  }

  // earlier reads at most limit stored events before seq, in order.
  async earlier(seq, limit) {
    const page = await getJSON(taskPath(this.taskID) + "/events?before=" + seq + "&limit=" + Math.min(limit, PAGE));
    return ((page && page.events) || []).map((raw) => normalizeRecord(raw, 0, "")).filter(Boolean);
  }

  // live reads the event stream until it ends; it reports whether any event came.
  async live() {
    this.ctrl = new AbortController();
    const extra = { Accept: "text/event-stream" };
    if (this.after > 0) extra["Last-Event-ID"] = String(this.after);
    const init = { method: "GET", headers: headers(extra), signal: this.ctrl.signal, cache: "no-store" };
    const resp = await fetch(taskPath(this.taskID) + "/events", init);
    if (resp.status === 401) {
      await askToken("");
      return false;
    }
    if (!resp.ok) throw await errorOf(resp);
    this.onState("live", "");
    let got = false;
    const batch = [];
    await readEvents(resp, (id, type, data) => {
      let parsed = null;
      try { parsed = JSON.parse(data); } catch (_) { parsed = null; }
      const rec = parsed && normalizeRecord(parsed, Number(id) || 0, type);
      if (rec && rec.seq > 0) batch.push(rec);
    }, () => {
      if (batch.length) {
        got = true;
        this.deliver(batch.splice(0));
      }
    });
    return got;
  }
}

// readEvents reads a text/event-stream answer to its end: onEvent(id, type, data) for each event
// with data, and onChunk() after each piece read (so that a caller hands over a batch at once).
async function readEvents(resp, onEvent, onChunk) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let id = "", type = "", data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (data.length) onEvent(id, type, data.join("\n"));
        id = ""; type = ""; data = [];
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "id") id = val;
      else if (field === "event") type = val;
      else if (field === "data") data.push(val);
    }
    if (onChunk) onChunk();
  }
}

// LiveList follows a list of the API (the tasks, the approvals) as it changes: the API answers
// its GET with Accept: text/event-stream by sending the list now and again at every change, so
// the page reads nothing on a timer. onList receives each list's JSON (as the GET answers it);
// onError an error while the stream is down (null once it is back). It reconnects, backing off
// from 0.5 s to 10 s.
export class LiveList {
  constructor(path, onList, onError) {
    this.path = path;
    this.onList = onList;
    this.onError = onError || (() => {});
    this.stopped = false;
    this.ctrl = null;
    this.run();
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async run() {
    let delay = 500;
    while (!this.stopped) {
      try {
        this.ctrl = new AbortController();
        const resp = await fetch(this.path, { method: "GET", headers: headers({ Accept: "text/event-stream" }), signal: this.ctrl.signal, cache: "no-store" });
        if (resp.status === 401) {
          await askToken("");
          continue;
        }
        if (!resp.ok) throw await errorOf(resp);
        await readEvents(resp, (_id, type, data) => {
          if (type === "error") return;
          let list;
          try { list = JSON.parse(data); } catch (_) { return; }
          delay = 500;
          this.onError(null);
          this.onList(list);
        });
        if (this.stopped) return;
      } catch (err) {
        if (this.stopped) return;
        this.onError(err);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }
}

// normalizeRecord accepts both forms a stored event may take on the wire: the log's record
// ({seq, turn, attempt, type, time, event}) or the agent event alone (its seq from the stream's
// id). It returns null for anything else.
export function normalizeRecord(raw, seq, type) {
  if (!raw || typeof raw !== "object") return null;
  if (raw.event && typeof raw.event === "object" && typeof raw.seq === "number") {
    return {
      seq: raw.seq, type: String(raw.type || raw.event.type || type || ""),
      turn: Number(raw.turn) || 0, attempt: Number(raw.attempt) || 0,
      time: raw.time || raw.created_at || raw.event.time || "", event: raw.event,
    };
  }
  const s = typeof raw.seq === "number" ? raw.seq : seq;
  if (!s) return null;
  return {
    seq: s, type: String(raw.type || type || ""), turn: Number(raw.turn) || 0,
    attempt: Number(raw.attempt) || 0, time: raw.time || "", event: raw,
  };
}
