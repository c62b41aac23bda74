// The Boxes page: every box the caller sees, live (server-sent events from /v1/events),
// with CPU and memory from /v1/stats every few seconds, filter, sort, and actions.
import { get, post, del, enc, isOwner, ApiError } from "./api.js";
import { h, clear, when, duration, bytes, toast, dialog, confirmed, field, mib } from "./dom.js";
import { networkEditor } from "./netpolicy.js";

const STATS_EVERY = 5000;
const TTLS = [["", "server default"], ["0", "none"], ["3600", "1 hour"], ["28800", "8 hours"],
  ["86400", "1 day"], ["604800", "7 days"]];
const IDLE = [["", "server default"], ["0", "never"], ["900", "15 minutes"], ["3600", "1 hour"], ["14400", "4 hours"]];

export function stateBadge(state) {
  return h(`span.state.s-${state}`, {}, state);
}

function ttlLeft(box) {
  if (!box.expires_at) return "–";
  return duration((new Date(box.expires_at) - Date.now()) / 1000);
}

/** The actions on one box, shared by the list and the box page. */
export function boxActions(box, { onDeleted } = {}) {
  const act = (label, fn, cls = "") => h(`button.small${cls}`, {
    type: "button", "aria-label": `${label} ${box.name}`,
    on: { click: async (e) => {
      const button = e.currentTarget;
      button.disabled = true;
      try { await fn(); } catch (err) { toast(err.message, "err"); } finally { button.disabled = false; }
    } },
  }, label);
  const running = box.desired_state === "running";
  return h("span.actions", {},
    running
      ? act("Stop", async () => {
        if (await confirmed(`Stop ${box.name}? Its files are kept (a snapshot); running programs end.`, "Stop")) {
          await post(`/boxes/${enc(box.name)}/stop`);
          toast(`${box.name} stopped`);
        }
      })
      : act("Resume", async () => { await post(`/boxes/${enc(box.name)}/resume`); toast(`${box.name} resumed`); }),
    act("Fork", async () => {
      const v = await dialog(`Fork ${box.name}`, [field("Name of the copy", h("input", { name: "name", placeholder: "(chosen for you)" }))], { submit: "Fork" });
      if (v) { const fork = await post(`/boxes/${enc(box.name)}/fork`, { name: v.name || null }); toast(`forked: ${fork.name}`); }
    }),
    act("Snapshot", async () => {
      const v = await dialog(`Snapshot ${box.name}`, [field("Label", h("input", { name: "label", placeholder: "(optional)" }))], { submit: "Take snapshot" });
      if (v) { const s = await post(`/boxes/${enc(box.name)}/snapshots`, { label: v.label || null }); toast(`snapshot ${s.id} taken`); }
    }),
    act("Delete", async () => {
      if (await confirmed(`Delete ${box.name}, its files and all its snapshots? This cannot be undone.`)) {
        await del(`/boxes/${enc(box.name)}?force=true`);
        toast(`${box.name} deleted`);
        onDeleted?.();
      }
    }, ".danger"),
  );
}

export async function createDialog(preset = "") {
  const [types, agents, drives, templates] = await Promise.all([get("/types"), get("/agents").catch(() => ({ agents: [] })), get("/drives"),
    get("/templates").catch(() => ({ templates: [] }))]);
  const net = networkEditor({ mode: "" }, { allowDefault: true });
  const typeSel = h("select", { name: "type" }, h("option", { value: "" }, `default (${types.default}, or the template's)`),
    types.types.map((t) => h("option", { value: t.name }, `${t.name} — ${t.cpus} CPU, ${mib(t.memory_mb)}`)));
  const fields = [
    field("Name", h("input", { name: "name", placeholder: "(chosen for you)", autocomplete: "off" })),
    field("Template", h("select", { name: "template" }, h("option", { value: "" }, "none: the box image"),
      templates.templates.filter((t) => t.status === "ready").map((t) => h("option", { value: t.name, selected: t.name === preset }, t.name))),
    "start from a template's files (Templates page)"),
    field("Type", typeSel),
    field("Time to live", h("select", { name: "ttl" }, TTLS.map(([v, l]) => h("option", { value: v }, l))), "then it stops"),
    field("Idle stop", h("select", { name: "idle_stop" }, IDLE.map(([v, l]) => h("option", { value: v }, l))),
      "stop it after this long without use (commands, terminals, a desktop viewer)"),
    h("fieldset", {}, h("legend", {}, "Drives"),
      drives.drives.filter((d) => d.mine).length
        ? drives.drives.filter((d) => d.mine).map((d) => h("label.check", {}, h("input", { type: "checkbox", name: "drive:" + d.name }), ` ${d.name} (/mnt/${d.name})`))
        : h("p.empty", {}, "No drives yet (Drives page).")),
    net.element,
    field("Default agent", h("select", { name: "agent" }, h("option", { value: "" }, "server default"),
      agents.agents.filter((a) => a.version).map((a) => h("option", { value: a.name }, a.name)))),
  ];
  for (;;) {
    const v = await dialog("New box", fields, { submit: "Create" });
    if (!v) return;
    if (!net.valid()) { toast("fix the allowlist first", "err"); continue; }
    const { mode, allow } = net.value();
    const body = {
      name: v.name || null, type: v.type || null, ttl: v.ttl === "" ? null : Number(v.ttl), template: v.template || null,
      drives: Object.keys(v).filter((k) => k.startsWith("drive:")).map((k) => k.slice(6)),
      network: mode || null, allow, agent: v.agent || null,
      ...(v.idle_stop === "" ? {} : { idle_stop: Number(v.idle_stop) }),
    };
    try {
      const box = await post("/boxes", body);
      toast(`${box.name} created`);
      return box;
    } catch (err) {
      toast(err.message, "err");
      if (!(err instanceof ApiError) || err.status >= 500) return;
    }
  }
}

const COLUMNS = [
  { key: "name", label: "Name", sort: (b) => b.name, cell: (b) => h("a", { href: `#/box/${enc(b.name)}` }, b.name) },
  { key: "state", label: "State", sort: (b) => b.state, cell: (b) => stateBadge(b.state) },
  { key: "type", label: "Type", sort: (b) => b.type, cell: (b) => b.type },
  ...(isOwner ? [{ key: "owner", label: "Owner", sort: (b) => b.owner || "", cell: (b) => b.owner || "–" }] : []),
  { key: "created", label: "Created", sort: (b) => b.created_at, cell: (b) => h("time", { datetime: b.created_at }, when(b.created_at)) },
  { key: "ttl", label: "TTL", sort: (b) => b.expires_at || "9", cell: (b) => h("span.ttl", { dataset: { box: b.id } }, ttlLeft(b)) },
  { key: "cpu", label: "CPU", sort: (b, s) => s[b.id]?.cpu_percent ?? -1, cell: (b, s) => s[b.id]?.cpu_percent != null ? `${s[b.id].cpu_percent.toFixed(0)}%` : "–" },
  { key: "mem", label: "Memory", sort: (b, s) => s[b.id]?.memory_bytes ?? -1, cell: (b, s) => s[b.id]?.memory_bytes != null ? bytes(s[b.id].memory_bytes) : "–" },
];

export function boxesPage(main) {
  const boxes = new Map();
  let stats = {};
  let order = { key: "created", dir: -1 };
  const filter = h("input", { type: "search", placeholder: "name, type, owner", "aria-label": "Filter boxes" });
  const stateSel = h("select", { "aria-label": "State" }, ["all", "running", "stopped", "creating", "error"].map((s) => h("option", { value: s }, s)));
  const live = h("span.live", { role: "status" }, "connecting…");
  const body = h("div.listing");
  const newButton = h("button.primary", { type: "button", on: { click: async () => { await createDialog(); } } }, "New box");
  clear(main, h("div.titlebar", {}, h("h1", {}, "Boxes"), live, newButton),
    h("div.toolbar", {}, filter, stateSel), body);

  function visible() {
    const q = filter.value.trim().toLowerCase();
    const want = stateSel.value;
    const col = COLUMNS.find((c) => c.key === order.key) || COLUMNS[0];
    return [...boxes.values()]
      .filter((b) => (want === "all" || b.state === want) && (!q || [b.name, b.type, b.owner || ""].some((s) => s.toLowerCase().includes(q))))
      .sort((a, b) => { const x = col.sort(a, stats), y = col.sort(b, stats); return (x < y ? -1 : x > y ? 1 : 0) * order.dir; });
  }

  let pending = false;
  function render() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const focused = document.activeElement?.getAttribute("aria-label");
      const rows = visible();
      if (!rows.length) {
        clear(body, h("p.empty", {}, boxes.size ? "No box matches." : "No boxes yet: New box makes one."));
        return;
      }
      const head = h("tr", {}, COLUMNS.map((c) => h("th", { scope: "col", "aria-sort": order.key === c.key ? (order.dir > 0 ? "ascending" : "descending") : "none" },
        h("button.sort", { type: "button", "aria-label": `Sort by ${c.label}`, on: { click: () => { order = { key: c.key, dir: order.key === c.key ? -order.dir : 1 }; render(); } } }, c.label))),
        h("th", { scope: "col" }, "Actions"));
      const trs = rows.map((b) => h("tr", { dataset: { box: b.name } },
        COLUMNS.map((c) => h("td", { dataset: { label: c.label } }, c.cell(b, stats))), h("td.row-actions", {}, boxActions(b))));
      clear(body, h("table.boxes", {}, h("thead", {}, head), h("tbody", {}, trs)));
      if (focused) body.querySelector(`[aria-label="${CSS.escape(focused)}"]`)?.focus();
    });
  }
  filter.addEventListener("input", render);
  stateSel.addEventListener("change", render);

  const events = new EventSource("/v1/events");
  events.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; });
  events.addEventListener("error", () => { live.textContent = "reconnecting…"; live.className = "live"; });
  events.addEventListener("boxes", (e) => {
    boxes.clear();
    for (const b of JSON.parse(e.data).boxes) boxes.set(b.id, b);
    render();
  });
  events.addEventListener("box", (e) => { const b = JSON.parse(e.data); boxes.set(b.id, b); render(); });
  events.addEventListener("box-removed", (e) => { boxes.delete(JSON.parse(e.data).id); render(); });

  async function refreshStats() {
    if (document.hidden) return;
    try {
      stats = Object.fromEntries((await get("/stats")).boxes.map((s) => [s.id, s]));
      render();
    } catch { /* the next round tries again */ }
  }
  refreshStats();
  const statsTimer = setInterval(refreshStats, STATS_EVERY);
  // The countdown is the browser's own clock: nothing is asked of the server.
  const tick = setInterval(() => {
    for (const span of body.querySelectorAll(".ttl")) {
      const b = boxes.get(span.dataset.box);
      if (b) span.textContent = ttlLeft(b);
    }
  }, 1000);
  return () => { events.close(); clearInterval(statsTimer); clearInterval(tick); };
}
