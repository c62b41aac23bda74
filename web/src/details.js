// The Details tab (type, limits, runtime, TTL extend), the Logs tab and the Previews tab.
import { get, post, del, enc, call } from "./api.js";
import { h, clear, table, when, bytes, toast, confirmed, field, mib } from "./dom.js";

export function detailsTab(panel, box) {
  const dl = h("dl.details");
  const ttl = h("select", { name: "ttl", "aria-label": "New time to live" },
    [["3600", "1 hour"], ["28800", "8 hours"], ["86400", "1 day"], ["604800", "7 days"], ["0", "none"]].map(([v, l]) => h("option", { value: v }, l)));
  const extend = h("form.toolbar", { on: { submit: async (e) => {
    e.preventDefault();
    try { Object.assign(box, await post(`/boxes/${enc(box.name)}/extend`, { ttl: Number(ttl.value) })); toast("time to live set"); paint(); } catch (err) { toast(err.message, "err"); }
  } } }, h("span", {}, "Time to live from now: "), ttl, h("button.small", { type: "submit" }, "Set"));
  const usage = h("div.usage");
  clear(panel, dl, h("h2", {}, "Usage"), usage, h("h2", {}, "Extend"), extend, h("h2", {}, "SSH"), sshSection(box));
  let type = null;
  function paint() {
    const rows = [
      ["Name", box.name], ["Id", box.id], ["State", `${box.state} (wanted: ${box.desired_state})`],
      ["Type", box.type], ...(type ? [["Limits", `${type.cpus} CPU, ${mib(type.memory_mb)} memory, ${type.pids} processes${type.disk_mb ? `, ${mib(type.disk_mb)} disk` : ""}`]] : []),
      ["Runtime profile", box.profile], ["Image", box.image], ["Owner", box.owner || "–"],
      ["Created", when(box.created_at)], ["Started", when(box.started_at)],
      ["Expires", box.expires_at ? `${when(box.expires_at)} (then: ${box.ttl_action})` : "never"],
      ["Drives", box.drives.length ? box.drives.join(", ") : "none"],
      ["Network", box.network ? `${box.network.mode}${box.network.allow.length ? ": " + box.network.allow.join(", ") : ""}` : "–"],
      ["Default agent", box.agent || "server default"], ["Snapshots", String(box.snapshots)],
      ...(box.message ? [["Message", box.message]] : []),
    ];
    clear(dl, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }
  paint();
  get("/types").then(({ types }) => { type = types.find((t) => t.name === box.type) || null; paint(); }).catch(() => {});
  return usageHistory(usage, box);
}

/** How to reach the box with ssh and an editor (docs/remote.md): the commands, the host
 * key's fingerprint to check, and VS Code's link once `paddock ssh-config --write` ran. */
function sshSection(box) {
  const host = `paddock-${box.name}`;
  const fingerprint = h("dd.ssh-fingerprint", {}, "…");
  get(`/boxes/${enc(box.name)}/ssh`).then((k) => { fingerprint.textContent = k.fingerprint; })
    .catch(() => { fingerprint.textContent = "–"; });
  return h("div.ssh", {},
    h("dl.details", {},
      h("dt", {}, "Shell"), h("dd", {}, h("code", {}, `paddock ssh ${box.name}`)),
      h("dt", {}, "Any ssh tool"), h("dd", {}, h("code", {}, "paddock ssh-config --write"), " then ", h("code", {}, `ssh ${host}`)),
      h("dt", {}, "Host key"), fingerprint),
    h("p", {}, h("a.button.small", { href: `vscode://vscode-remote/ssh-remote+${host}/config` }, "Open in VS Code"),
      " (after ", h("code", {}, "paddock ssh-config --write"), " on this computer)"));
}

const SAMPLES = 60; // five minutes, a sample every five seconds

/** CPU and memory over the last minutes, sampled from the stats API while the tab is open. */
function usageHistory(el, box) {
  const cpu = [], mem = [];
  async function sample() {
    if (document.hidden) return;
    try {
      const s = await get(`/boxes/${enc(box.name)}/stats`);
      if (s.cpu_percent == null) { clear(el, h("p.empty", {}, `${box.name} is ${s.state}: no usage to show.`)); return; }
      cpu.push(s.cpu_percent / Math.max(s.cpus, 0.01));
      mem.push(s.memory_limit_bytes ? (100 * s.memory_bytes) / s.memory_limit_bytes : 0);
      if (cpu.length > SAMPLES) { cpu.shift(); mem.shift(); }
      clear(el,
        spark("CPU", cpu, `${s.cpu_percent.toFixed(0)}% (of ${s.cpus} CPU)`),
        spark("Memory", mem, `${bytes(s.memory_bytes)}${s.memory_limit_bytes ? ` of ${bytes(s.memory_limit_bytes)}` : ""}`));
    } catch { /* the next sample tries again */ }
  }
  sample();
  const timer = setInterval(sample, 5000);
  return () => clearInterval(timer);
}

/** A small line of percentages (0-100), newest on the right, with its label and figure. */
function spark(label, values, now) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${SAMPLES - 1} 100`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${label} over the last minutes`);
  const line = document.createElementNS(ns, "polyline");
  const start = SAMPLES - values.length;
  line.setAttribute("points", values.map((v, i) => `${start + i},${100 - Math.min(Math.max(v, 0), 100)}`).join(" "));
  svg.append(line);
  return h("div.spark-row", { dataset: { usage: label.toLowerCase() } }, h("span.spark-label", {}, label), svg, h("span.spark-now", {}, now));
}

/** What the box's init and services wrote (`paddock logs`): the last lines, on demand. */
export function logsTab(panel, box) {
  const log = h("pre.log", { tabindex: "0", "aria-label": `Logs of ${box.name}` });
  const tail = h("select", { "aria-label": "Lines" }, [["200", "last 200 lines"], ["2000", "last 2000 lines"], ["0", "all"]].map(([v, l]) => h("option", { value: v }, l)));
  async function load() {
    try {
      const text = await (await call("GET", `/boxes/${enc(box.name)}/logs?tail=${tail.value}`, undefined, { raw: true })).text();
      log.textContent = text || "Nothing yet: the box's init and services have written nothing.";
      log.scrollTop = log.scrollHeight;
    } catch (err) { log.textContent = err.message; }
  }
  tail.addEventListener("change", load);
  clear(panel, h("div.toolbar", {}, tail, h("button.small", { type: "button", on: { click: load } }, "Refresh")), log);
  load();
  return null;
}

export function previewTable(previews, refresh, { showBox = false } = {}) {
  return table([
    ...(showBox ? [{ label: "Box", cell: (p) => h("a", { href: `#/box/${enc(p.box)}/previews` }, p.box) }] : []),
    { label: "Port", cell: (p) => String(p.port) },
    { label: "URL", cell: (p) => h("a", { href: p.url, target: "_blank", rel: "noopener noreferrer" }, p.url) },
    { label: "Access", cell: (p) => (p.public ? "public" : "private") },
    { label: "Created", cell: (p) => when(p.created_at) },
    { label: "Ends", cell: (p) => when(p.expires_at) },
    { label: "", cell: (p) => h("button.small.danger", { type: "button", "aria-label": `Remove preview of port ${p.port}`, on: { click: async () => {
      if (!(await confirmed(`End the preview of port ${p.port}? Its URL stops working.`, "Remove"))) return;
      try { await del(`/previews/${enc(p.id)}`); toast("preview removed"); } catch (err) { toast(err.message, "err"); }
      refresh();
    } } }, "Remove") },
  ], previews, { empty: "No previews." });
}

export function previewsTab(panel, box) {
  const list = h("div.listing");
  const port = h("input", { name: "port", type: "number", min: 1, max: 65535, required: true, placeholder: "3000" });
  const isPublic = h("input", { name: "public", type: "checkbox" });
  const form = h("form.toolbar", { on: { submit: async (e) => {
    e.preventDefault();
    try { const p = await post(`/boxes/${enc(box.name)}/previews`, { port: Number(port.value), public: isPublic.checked }); toast(`preview at ${p.url}`); } catch (err) { toast(err.message, "err"); }
    refresh();
  } } }, field("Port", port), h("label.check", {}, isPublic, " Public (no secret in the URL)"), h("button.primary", { type: "submit" }, "Add preview"));
  clear(panel, form, list);
  async function refresh() {
    const { previews } = await get(`/boxes/${enc(box.name)}/previews`);
    clear(list, previewTable(previews, refresh));
  }
  refresh().catch((err) => clear(list, h("p.err", {}, err.message)));
  return null;
}
