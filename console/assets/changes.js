// The Changes page of a managed task (#/tasks/<id>/changes, #/tasks/<id>/changes/<turn>): the
// files its work changed, in all or in one turn, with lines added and deleted, and the coloured
// patch in pages. What it shows is what the agent wrote: built from text nodes only.

import { getJSON, taskPath } from "./api.js";
import { h, append, clear } from "./dom.js";
import { diffView } from "./render.js";

// PAGE_BYTES is how much of a patch one read brings; the rest comes with "Show more".
const PAGE_BYTES = 64 * 1024;

// changesHref is the page's address: the whole task (turn 0) or one turn.
export function changesHref(id, turn) {
  return "#/tasks/" + encodeURIComponent(id) + "/changes" + (turn ? "/" + turn : "");
}

// changesPage fills main with the task's changes and returns the page ({stop, items}).
export function changesPage(main, id, turn) {
  const title = h("h1", null, "Changes of ", h("a", { href: "#/tasks/" + encodeURIComponent(id) }, id));
  const turns = h("nav", { className: "turn-picker", ariaLabel: "turns" });
  const summary = h("p", { className: "muted diff-summary" });
  const err = h("div");
  const files = h("table", { className: "tasks diff-files" });
  const patch = h("div", { className: "patch" });
  const more = h("button", { type: "button", className: "more", hidden: true }, "Show more");
  const showing = h("p", { className: "muted patch-file", hidden: true });
  append(main, [h("div", { className: "task-head" }, title), turns, summary, err, files,
    h("h2", null, "Patch"), showing, patch, more]);
  let stopped = false, next = 0, file = "";

  const url = (offset) => {
    const q = new URLSearchParams();
    if (turn) q.set("turn", String(turn));
    if (file) q.set("file", file);
    q.set("limit", String(PAGE_BYTES));
    if (offset) q.set("offset", String(offset));
    return taskPath(id) + "/diff?" + q;
  };
  const showPage = (d) => {
    if (d.patch) patch.append(diffView(d.patch));
    next = d.next_offset || 0;
    more.hidden = !next;
    if (next) more.textContent = "Show more (" + Math.round(next * 100 / Math.max(1, d.patch_bytes)) + "% shown)";
  };
  const load = async (offset) => {
    more.disabled = true;
    try {
      const d = await getJSON(url(offset));
      if (stopped) return null;
      clear(err);
      if (!offset) clear(patch);
      showPage(d);
      return d;
    } catch (e) {
      if (!stopped) clear(err).append(h("div", { className: "alert" }, String(e.message || e)));
      return null;
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener("click", () => load(next));
  const pick = (path) => {
    file = path;
    showing.hidden = !path;
    clear(showing);
    if (path) append(showing, ["Only ", h("code", null, path), " ", h("button", { type: "button", className: "all-files", onclick: () => pick("") }, "Show every file")]);
    load(0);
  };

  load(0).then((d) => {
    if (!d) return;
    append(turns, [turnLink(id, 0, turn), d.turns.map((n) => turnLink(id, n, turn))]);
    summary.textContent = rangeText(d) + ": " + totals(d.files);
    append(files, [h("thead", null, h("tr", null, ["file", "added", "deleted"].map((c) => h("th", null, c)))),
      h("tbody", null, d.files.length ? d.files.map((f) => fileRow(f, pick)) : h("tr", null, h("td", { className: "muted" }, "no file changed")))]);
  });
  return { stop() { stopped = true; }, items: () => [...files.querySelectorAll("tr[data-path]")] };
}

function turnLink(id, n, current) {
  const label = n ? "Turn " + n : "All turns";
  const a = h("a", { href: changesHref(id, n), className: "turn-link" + (n === current ? " active" : ""), dataset: { turn: String(n) } }, label);
  if (n === current) a.setAttribute("aria-current", "page");
  return a;
}

function rangeText(d) {
  const at = (n) => (n ? "turn " + n : "the base");
  if (d.turn) return "Turn " + d.turn + " (from " + at(d.from_turn) + ")";
  return "All turns (" + at(d.from_turn) + " to " + at(d.to_turn) + ")";
}

function totals(files) {
  let added = 0, deleted = 0;
  for (const f of files) { added += f.added; deleted += f.deleted; }
  return files.length + (files.length === 1 ? " file" : " files") + " changed, +" + added + " −" + deleted;
}

function fileRow(f, pick) {
  return h("tr", { dataset: { path: f.path, binary: f.binary ? "true" : "false" } },
    h("td", null, h("button", { type: "button", className: "link file-pick", title: "show this file's patch alone", onclick: () => pick(f.path) }, f.path),
      f.binary ? h("span", { className: "status binary" }, "binary") : null),
    h("td", { className: "num added" }, f.binary ? "" : "+" + f.added),
    h("td", { className: "num deleted" }, f.binary ? "" : "−" + f.deleted));
}
