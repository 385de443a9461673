// Building the page from data: elements and text nodes only. Nothing here parses markup, so text
// an agent wrote is shown as text whatever it contains.

// h creates an element. props may hold className, dataset, title, hidden, type, value, href
// (checked by safeHref), disabled, checked, name, open and on* handlers; children are nodes,
// strings (become text nodes), numbers, or null (skipped).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "className") el.className = v;
      else if (k === "dataset") Object.assign(el.dataset, v);
      else if (k === "href") { const u = safeHref(v); if (u) el.href = u; }
      else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "ariaLabel") el.setAttribute("aria-label", v);
      else if (["id", "title", "hidden", "type", "value", "disabled", "checked", "name", "open", "placeholder", "rows", "htmlFor", "target", "rel", "maxLength"].includes(k)) el[k] = v;
      else throw new Error("h: unsupported property " + k);
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// safeHref allows same-page links and http(s) URLs only.
export function safeHref(v) {
  const s = String(v);
  if (s.startsWith("#")) return s;
  try {
    const u = new URL(s, location.href);
    if (u.protocol === "http:" || u.protocol === "https:") return u.href;
  } catch (_) { /* not a URL */ }
  return "";
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function money(v) {
  const n = Number(v) || 0;
  return "$" + (n < 1 ? n.toFixed(4) : n.toFixed(2));
}

export function tokens(n) {
  n = Number(n) || 0;
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}

// ago says how long ago an RFC 3339 time was, in words a person reads at a glance.
export function ago(t, now) {
  const ms = Date.parse(t);
  if (!t || isNaN(ms) || ms <= 0) return "";
  let s = Math.max(0, Math.round(((now || Date.now()) - ms) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

export function statusBadge(status) {
  const s = String(status || "unknown");
  return h("span", { className: "status status-" + s.replace(/[^a-z_]/g, ""), dataset: { status: s } }, s.replace(/_/g, " "));
}

// pre shows text as it is. A long one scrolls within its box (at most 32em high), so it takes
// the focus too, for the keyboard to scroll it.
export function pre(text, cls) {
  const s = String(text);
  const el = h("pre", { className: cls || "" }, s);
  if (s.length >= 1500 || s.split("\n").length >= 20) el.tabIndex = 0;
  return el;
}

export function pretty(v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "string") {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

// fold is a closed <details> whose content is built the first time it opens, so that a long
// timeline holds only what a person unfolds.
export function fold(summary, build, cls) {
  const d = h("details", { className: cls || "" }, h("summary", null, summary));
  let built = false;
  d.addEventListener("toggle", () => {
    if (d.open && !built) {
      built = true;
      append(d, [build()]);
    }
  });
  return d;
}
