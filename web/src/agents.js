// The Agents tab: start a prompt with an agent, watch the run live, stop it; past runs
// with their logs.
import { get, post, enc } from "./api.js";
import { h, clear, table, when, toast, field } from "./dom.js";
import { ndjson } from "./stream.js";
import { useTable } from "./pages.js";

/** What the box's commands get: attached keys (gateway: a placeholder; env: the key) and
 * secrets, and what they were used for. */
async function showKeys(panel, box) {
  const [attached, providers, secrets, uses] = await Promise.all([
    get(`/boxes/${enc(box.name)}/auth`), get("/auth"), get(`/boxes/${enc(box.name)}/secrets`),
    get(`/auth/log?box=${enc(box.name)}&limit=10`),
  ]);
  const mode = Object.fromEntries(providers.providers.map((p) => [p.provider, p.mode]));
  clear(panel, table([
    { label: "Attached", cell: (row) => row.name },
    { label: "How the box has it", cell: (row) => row.how },
  ], [
    ...attached.providers.map((p) => ({ name: p, how: mode[p] === "env" ? "env: the key itself" : "gateway: a placeholder" })),
    ...secrets.secrets.map((s) => ({ name: `$${s}`, how: "secret: a placeholder" })),
  ], { empty: "Nothing attached: runs get their agent's key for as long as they run." }), useTable(uses.uses));
}

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
  const keys = h("div.listing");
  clear(panel, h("h2", {}, "Start a run"), form, h("h2", {}, "Keys and secrets"), keys, h("h2", {}, "Runs"), runs, logTitle, log);
  showKeys(keys, box).catch((err) => clear(keys, h("p.err", {}, err.message)));

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
