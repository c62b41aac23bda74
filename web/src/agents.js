// The Agents tab: start a prompt with an agent, watch the run live, stop it; past runs
// with their logs.
import { get, post, enc } from "./api.js";
import { h, clear, table, when, toast, field } from "./dom.js";
import { ndjson } from "./stream.js";

export function agentsTab(panel, box) {
  const agentSel = h("select", { name: "agent" }, h("option", { value: "" }, "default"));
  const instruction = h("textarea", { name: "instruction", rows: 3, required: true, placeholder: "make the failing test pass" });
  const workdir = h("input", { name: "workdir", placeholder: "/config (default)" });
  const runs = h("div.listing");
  const log = h("pre.log", { "aria-live": "off", tabindex: "0", "aria-label": "Run log" });
  const logTitle = h("h2", {}, "Run log");
  let abort = null;
  const form = h("form.runform", { on: { submit: async (e) => {
    e.preventDefault();
    try {
      const run = await post(`/boxes/${enc(box.name)}/runs`, { instruction: instruction.value, agent: agentSel.value || null, workdir: workdir.value || null });
      toast(`run ${run.id} started`);
      instruction.value = "";
      await refresh();
      watch(run);
    } catch (err) { toast(err.message, "err"); }
  } } }, field("Agent", agentSel), field("Instruction", instruction), field("Folder", workdir), h("button.primary", { type: "submit" }, "Start"));
  clear(panel, h("h2", {}, "Start a run"), form, h("h2", {}, "Runs"), runs, logTitle, log);

  function watch(run) {
    abort?.abort();
    abort = new AbortController();
    log.textContent = "";
    logTitle.textContent = `Run log: ${run.id} (${run.agent})`;
    ndjson("GET", `/runs/${enc(run.id)}/log?follow=true`, undefined, (e) => {
      if (e.data !== undefined) log.append(e.data);  // text, never markup
      if (e.status) { log.append(`\n[${e.status}${e.exit_code != null ? `, exit ${e.exit_code}` : ""}]\n`); refresh(); }
      log.scrollTop = log.scrollHeight;
    }, abort.signal).catch((err) => log.append(`\n[${err.message}]\n`));
  }

  async function refresh() {
    const list = await get(`/boxes/${enc(box.name)}/runs`);
    clear(runs, table([
      { label: "Run", cell: (r) => h("button.link", { type: "button", on: { click: () => watch(r) } }, r.id) },
      { label: "Agent", cell: (r) => r.agent },
      { label: "Instruction", cell: (r) => r.instruction.length > 80 ? r.instruction.slice(0, 80) + "…" : r.instruction },
      { label: "Status", cell: (r) => h(`span.state.s-${r.status}`, {}, r.status) },
      { label: "Started", cell: (r) => when(r.started_at) },
      { label: "", cell: (r) => r.status === "running"
        ? h("button.small.danger", { type: "button", on: { click: async () => { try { await post(`/runs/${enc(r.id)}/stop`); } catch (err) { toast(err.message, "err"); } refresh(); } } }, "Stop") : "" },
    ], list.runs, { empty: "No runs yet." }));
  }

  get("/agents").then(({ agents }) => agentSel.append(...agents.filter((a) => a.version).map((a) =>
    h("option", { value: a.name }, `${a.name}${a.credentials ? "" : " (no key set)"}`)))).catch(() => {});
  refresh().catch((err) => clear(runs, h("p.err", {}, err.message)));
  return () => abort?.abort();
}
