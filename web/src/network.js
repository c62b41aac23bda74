// The Network tab: the egress policy (mode, allowlist checked as you type), the egress log
// live, and "apply suggested allowlist" from what the box used.
import { get, put, enc } from "./api.js";
import { h, clear, toast, confirmed } from "./dom.js";
import { networkEditor } from "./netpolicy.js";
import { ndjson } from "./stream.js";

const SHOWN = 500;

export function networkTab(panel, box) {
  const editor = networkEditor(box.network || { mode: "allow-all", allow: [] });
  const save = h("button.primary", { type: "submit" }, "Apply");
  const suggest = h("button", { type: "button", on: { click: applySuggested } }, "Apply suggested allowlist");
  const rows = h("tbody");
  const live = h("span.live", { role: "status" }, "");
  const form = h("form.netform", { on: { submit: async (e) => {
    e.preventDefault();
    if (!editor.valid()) { toast("fix the allowlist first", "err"); return; }
    await apply(editor.value());
  } } }, editor.element, h("div.actions", {}, save, suggest));
  clear(panel, h("h2", {}, "Egress policy"), form,
    h("h2", {}, "Egress log ", live),
    h("table.egress", {}, h("thead", {}, h("tr", {}, ["Time", "Kind", "Verdict", "Name", "Address", "Count"].map((l) => h("th", { scope: "col" }, l)))), rows));

  async function apply(spec) {
    try {
      const done = await put(`/boxes/${enc(box.name)}/network`, spec);
      editor.set(done.mode, done.allow);
      const n = done.allow.length;
      toast(`network: ${done.mode}${n ? ` (${n} ${n === 1 ? "entry" : "entries"})` : ""}`);
    } catch (err) {
      toast(err.message, "err");
    }
  }

  async function applySuggested() {
    try {
      const s = await get(`/boxes/${enc(box.name)}/network/suggest`);
      if (!s.allow.length) { toast("the log has nothing to build an allowlist from yet", "err"); return; }
      editor.set("allowlist", s.allow);
      if (await confirmed(`Allow only: ${s.allow.join(", ")} (from ${s.based_on} log entries)?`, "Apply")) await apply(editor.value());
    } catch (err) {
      toast(err.message, "err");
    }
  }

  // The policy as it is now; an edit begun before it came is not overwritten.
  let touched = false;
  for (const event of ["input", "change"]) editor.element.addEventListener(event, () => { touched = true; });
  get(`/boxes/${enc(box.name)}/network`).then((spec) => { if (!touched) editor.set(spec.mode, spec.allow); }).catch(() => {});
  const abort = new AbortController();
  live.textContent = "live";
  ndjson("GET", `/boxes/${enc(box.name)}/network/log?follow=true&limit=200`, undefined, (e) => {
    rows.prepend(h("tr", { class: e.verdict === "refused" ? "refused" : "" },
      h("td", { dataset: { label: "Time" } }, e.time), h("td", { dataset: { label: "Kind" } }, e.kind),
      h("td", { dataset: { label: "Verdict" } }, e.verdict), h("td", { dataset: { label: "Name" } }, e.name || "–"),
      h("td", { dataset: { label: "Address" } }, e.address ? `${e.address}${e.port ? ":" + e.port : ""}` : "–"),
      h("td", { dataset: { label: "Count" } }, String(e.count))));
    while (rows.children.length > SHOWN) rows.lastChild.remove();
  }, abort.signal).then(() => { live.textContent = "ended"; }).catch((err) => { live.textContent = err.message; });
  return () => abort.abort();
}
