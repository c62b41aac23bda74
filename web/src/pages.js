// The account-wide pages: Drives, Previews, Credentials, Tokens, Members (the owner's),
// the audit log, Server.
import { get, post, put, del, enc, isOwner } from "./api.js";
import { h, clear, table, when, bytes, toast, dialog, confirmed, field, mib } from "./dom.js";
import { previewTable } from "./details.js";
import { ndjson } from "./stream.js";

/** A page: a title, a toolbar, and a body that `load` fills (again after each change). */
function page(main, title, load, tools = () => []) {
  const body = h("div.listing");
  const refresh = async () => {
    try { clear(body, await load(refresh)); } catch (err) { clear(body, h("p.err", {}, err.message)); }
  };
  clear(main, h("div.titlebar", {}, h("h1", {}, title), tools(refresh)), body);
  refresh();
}

async function attempt(fn, done) {
  try { await fn(); if (done) toast(done); return true; } catch (err) { toast(err.message, "err"); return false; }
}

export function drivesPage(main) {
  page(main, "Drives", async (refresh) => table([
    { label: "Name", cell: (d) => d.name },
    ...(isOwner ? [{ label: "Owner", cell: (d) => d.owner || "–" }] : []),
    { label: "Size", cell: (d) => bytes(d.size_bytes) },
    { label: "Used by", cell: (d) => d.boxes.join(", ") || "–" },
    { label: "", cell: (d) => h("button.small.danger", { type: "button", "aria-label": `Delete drive ${d.name}`, on: { click: async () => {
      if (!(await confirmed(`Delete drive ${d.name} and its data?`))) return;
      const owner = d.mine ? "" : `?owner=${enc(d.owner === "(removed user)" ? d.owner_id : d.owner)}`;
      await attempt(() => del(`/drives/${enc(d.name)}${owner}`), `drive ${d.name} deleted`);
      refresh();
    } } }, "Delete") },
  ], (await get("/drives")).drives, { empty: "No drives. A drive is a folder kept across boxes, at /mnt/NAME." }),
  (refresh) => h("button.primary", { type: "button", on: { click: async () => {
    const v = await dialog("New drive", [
      field("Name", h("input", { name: "name", required: true, autocomplete: "off" })),
      field("Size (GiB, optional)", h("input", { name: "size_gib", type: "number", min: "1", step: "1", placeholder: "grows within the server's disk" }),
        "The most it holds; empty: no limit of its own."),
    ], { submit: "Create" });
    const body = v && { name: v.name, ...(v.size_gib ? { capacity_mb: Number(v.size_gib) * 1024 } : {}) };
    if (v && await attempt(() => post("/drives", body), `drive ${v.name} created`)) refresh();
  } } }, "New drive"));
}

export function previewsPage(main) {
  page(main, "Previews", async (refresh) => previewTable((await get("/previews")).previews, refresh, { showBox: true }));
}

export function credentialsPage(main) {
  page(main, "Credentials", async (refresh) => h("div", {},
    h("p", {}, "Provider keys for the agents in your boxes. A key is stored encrypted and never shown again: you can replace or remove it. "
      + "In gateway mode (the default) a box gets a placeholder and the server adds the key on the way to the provider: the key never enters the box. "
      + "Env mode gives the box the key itself."),
    table([
      { label: "Provider", cell: (c) => c.provider },
      { label: "Key", cell: (c) => (c.configured ? "set" : "not set") },
      { label: "Mode", cell: (c) => c.mode || "–" },
      { label: "Endpoint", cell: (c) => c.base_url || "default" },
      { label: "Last used", cell: (c) => when(c.last_used_at) },
      { label: "", cell: (c) => h("span.actions", {},
        h("button.small", { type: "button", "aria-label": `Set key for ${c.provider}`, on: { click: async () => {
          const v = await dialog(`Key for ${c.provider}`, [
            field("API key", h("input", { name: "key", type: "password", required: true, autocomplete: "off" })),
            field("Endpoint (optional)", h("input", { name: "base_url", type: "url", placeholder: "https://…" })),
            field("Mode", h("select", { name: "mode" }, h("option", { value: "gateway" }, "gateway: the key stays on the server"),
              h("option", { value: "env" }, "env: boxes get the key itself"))),
          ], { submit: "Save" });
          if (v && await attempt(() => put(`/auth/${enc(c.provider)}`, { key: v.key, base_url: v.base_url || null, mode: v.mode }), `key for ${c.provider} saved`)) refresh();
        } } }, c.configured ? "Replace" : "Set"),
        c.configured ? h("button.small.danger", { type: "button", "aria-label": `Remove key for ${c.provider}`, on: { click: async () => {
          if (await confirmed(`Forget your ${c.provider} key?`, "Remove") && await attempt(() => del(`/auth/${enc(c.provider)}`), "key removed")) refresh();
        } } }, "Remove") : null) },
    ], (await get("/auth")).providers),
    h("h2", {}, "Secrets"),
    h("p", {}, "Your own tokens, bound to hosts. A box a secret is attached to holds a placeholder in $NAME; "
      + "HTTPS requests from it to a bound host get the value in its place. The value is never shown again."),
    table([
      { label: "Name", cell: (x) => x.name },
      { label: "Hosts", cell: (x) => x.hosts.join(", ") },
      { label: "Header", cell: (x) => (x.header ? `${x.header}: ${x.format}` : "in place") },
      { label: "Boxes", cell: (x) => x.boxes.join(", ") || "–" },
      { label: "Last used", cell: (x) => when(x.last_used_at) },
      { label: "", cell: (x) => h("button.small.danger", { type: "button", "aria-label": `Remove secret ${x.name}`, on: { click: async () => {
        if (await confirmed(`Forget secret ${x.name}? Boxes holding its placeholder lose it.`, "Remove") && await attempt(() => del(`/secrets/${enc(x.name)}`), "secret removed")) refresh();
      } } }, "Remove") },
    ], (await get("/secrets")).secrets, { empty: "No secrets. paddock secret set NAME --host HOST, or New secret above." }),
    h("h2", {}, "Recent uses"),
    useTable([...(await get("/auth/log?limit=20")).uses, ...(await get("/secrets/log?limit=20")).uses]
      .sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, 20))),
  (refresh) => h("button.primary", { type: "button", on: { click: async () => {
    const v = await dialog("New secret", [
      field("Name", h("input", { name: "name", required: true, autocomplete: "off", placeholder: "GITHUB_TOKEN" })),
      field("Value", h("input", { name: "value", type: "password", required: true, autocomplete: "off" })),
      field("Hosts", h("input", { name: "hosts", required: true, placeholder: "api.github.com, github.com" }), "Comma-separated host names."),
    ], { submit: "Save" });
    const hosts = v && v.hosts.split(",").map((x) => x.trim()).filter(Boolean);
    if (v && await attempt(() => put(`/secrets/${enc(v.name)}`, { value: v.value, hosts }), `secret ${v.name} saved`)) refresh();
  } } }, "New secret"));
}

/** Uses of keys and secrets through the credential gateway, and refusals. */
export function useTable(uses) {
  return table([
    { label: "When", cell: (u) => when(u.at) },
    { label: "Box", cell: (u) => u.box },
    { label: "Key or secret", cell: (u) => u.name },
    { label: "Host", cell: (u) => u.host },
    { label: "Request", cell: (u) => `${u.method} ${u.path}` },
    { label: "Answer", cell: (u) => (u.outcome === "used" ? String(u.status) : `refused: ${u.reason}`) },
  ], uses, { empty: "No uses yet." });
}

export function templatesPage(main) {
  const log = h("pre.log", { "aria-live": "off", tabindex: "0", "aria-label": "Build log" });
  const logTitle = h("h2", {}, "Build log");
  let abort = null;
  const watch = (name) => {
    abort?.abort();
    abort = new AbortController();
    log.textContent = "";
    logTitle.textContent = `Build log: ${name}`;
    ndjson("GET", `/templates/${enc(name)}/log?follow=true`, undefined, (e) => {
      if (e.data !== undefined) log.append(e.data);  // text, never markup
      if (e.status) log.append(`\n[${e.status}: ${e.message}]\n`);
      log.scrollTop = log.scrollHeight;
    }, abort.signal).catch((err) => log.append(`\n[${err.message}]\n`));
  };
  page(main, "Templates", async (refresh) => h("div", {},
    h("p", {}, "A template is a box's files to start new boxes from, built from a Dockerfile in a build box "
      + "(paddock template build NAME .) or taken from a box (paddock template create NAME --from BOX)."),
    table([
      { label: "Name", cell: (t) => t.name + (t.shared ? " (shared)" : "") },
      { label: "Status", cell: (t) => h(`span.state.s-${t.stale ? "stale" : t.status}`, { title: t.stale || t.message || "" }, t.stale ? "stale" : t.status) },
      { label: "Base", cell: (t) => t.base },
      { label: "Size", cell: (t) => bytes(t.size_bytes) },
      { label: "Built", cell: (t) => when(t.built_at) },
      ...(isOwner ? [{ label: "Owner", cell: (t) => t.owner }] : []),
      { label: "", cell: (t) => h("span.actions", {},
        h("button.small", { type: "button", "aria-label": `Build log of ${t.name}`, on: { click: () => watch(t.name) } }, "Log"),
        t.status === "ready" ? h("button.small", { type: "button", "aria-label": `New box from ${t.name}`, on: { click: async () => {
          const { createDialog } = await import("./boxes.js");
          const box = await createDialog(t.name);
          if (box) location.assign(`#/box/${enc(box.name)}`);
        } } }, "New box") : null,
        t.mine && t.source === "dockerfile" ? h("button.small", { type: "button", "aria-label": `Rebuild ${t.name}`, on: { click: async () => {
          if (await attempt(() => post(`/templates/${enc(t.name)}/rebuild`), `rebuilding ${t.name}`)) { watch(t.name); refresh(); }
        } } }, "Rebuild") : null,
        t.mine && isOwner ? h("button.small", { type: "button", on: { click: async () => {
          if (await attempt(() => put(`/templates/${enc(t.name)}/shared`, { shared: !t.shared }), t.shared ? "no longer shared" : "shared")) refresh();
        } } }, t.shared ? "Unshare" : "Share") : null,
        t.mine ? h("button.small.danger", { type: "button", "aria-label": `Delete template ${t.name}`, on: { click: async () => {
          if (await confirmed(`Delete template ${t.name}? Boxes made from it keep their files.`, "Delete")
            && await attempt(() => del(`/templates/${enc(t.name)}`), `template ${t.name} deleted`)) refresh();
        } } }, "Delete") : null) },
    ], (await get("/templates")).templates, { empty: "No templates yet." }),
    logTitle, log));
  return () => abort?.abort();
}

export function auditPage(main) {
  page(main, "Audit log", async () => table([
    { label: "When", cell: (e) => when(e.at) },
    { label: "Who", cell: (e) => e.actor },
    { label: "Credential", cell: (e) => e.credential },
    { label: "From", cell: (e) => e.source },
    { label: "Action", cell: (e) => e.action },
    { label: "Target", cell: (e) => e.target || "\u2013" },
    { label: "Outcome", cell: (e) => h(`span.state.s-${e.outcome === "ok" ? "running" : "error"}`, {}, `${e.status} ${e.outcome}`) },
  ], (await get("/audit?limit=200")).events, {
    empty: isOwner ? "Nothing recorded yet." : "Nothing of yours recorded yet.",
  }));
}

export function tokensPage(main) {
  page(main, "API tokens", async (refresh) => table([
    { label: "Name", cell: (t) => t.name + (t.scope === "metrics" ? " (metrics only)" : "") },
    ...(isOwner ? [{ label: "User", cell: (t) => t.user || "(server)" }] : []),
    { label: "Created", cell: (t) => when(t.created_at) },
    { label: "Last used", cell: (t) => when(t.last_used_at) },
    { label: "Expires", cell: (t) => (t.expires_at ? when(t.expires_at) : "never") },
    { label: "", cell: (t) => h("button.small.danger", { type: "button", "aria-label": `Revoke token ${t.name}`, on: { click: async () => {
      if (await confirmed(`Revoke token ${t.name}? Whatever uses it stops working at once.`, "Revoke") && await attempt(() => del(`/tokens/${enc(t.id)}`), "token revoked")) refresh();
    } } }, "Revoke") },
  ], (await get("/tokens")).tokens, { empty: "No tokens." }),
  (refresh) => h("button.primary", { type: "button", on: { click: async () => {
    const v = await dialog("New API token", [
      field("Name", h("input", { name: "name", required: true, autocomplete: "off" })),
      field("Expires", h("select", { name: "expires_in" }, [["", "never"], ["86400", "in a day"], ["2592000", "in 30 days"], ["31536000", "in a year"]].map(([x, l]) => h("option", { value: x }, l)))),
      ...(isOwner ? [field("Reads /metrics only", h("input", { name: "metrics", type: "checkbox" }), "For a Prometheus scraper: anywhere else it is no token.")] : []),
    ], { submit: "Create" });
    if (!v) return;
    try {
      const t = await post("/tokens", { name: v.name, expires_in: v.expires_in ? Number(v.expires_in) : null, ...(v.metrics ? { scope: "metrics" } : {}) });
      await dialog("Your new token", [h("input.secret", { readonly: true, value: t.token, "aria-label": "Token", on: { focus: (e) => e.target.select() } })],
        { submit: "Done", note: "Copy it now: it is not shown again.", cancel: false });
    } catch (err) { toast(err.message, "err"); }
    refresh();
  } } }, "New token"));
}

export function membersPage(main) {
  page(main, "Members", async (refresh) => table([
    { label: "User", cell: (m) => m.username },
    { label: "Role", cell: (m) => m.role },
    { label: "Joined", cell: (m) => when(m.created_at) },
    { label: "Boxes", cell: (m) => String(m.boxes) },
    { label: "Limits", cell: (m) => [m.limits.max_boxes != null ? `${m.limits.max_boxes} boxes` : null, m.limits.max_cpus != null ? `${m.limits.max_cpus} CPU` : null,
      m.limits.max_memory_mb != null ? mib(m.limits.max_memory_mb) : null].filter(Boolean).join(", ") || "none" },
    { label: "", cell: (m) => m.role === "owner" ? "" : h("span.actions", {},
      h("button.small", { type: "button", "aria-label": `Limits of ${m.username}`, on: { click: async () => {
        const num = (name, value, step) => h("input", { name, type: "number", min: 0, step, value: value ?? "", placeholder: "none" });
        const v = await dialog(`Limits of ${m.username}`, [field("Boxes", num("max_boxes", m.limits.max_boxes, 1)),
          field("CPUs", num("max_cpus", m.limits.max_cpus, 0.5)), field("Memory (MB)", num("max_memory_mb", m.limits.max_memory_mb, 1))], { submit: "Save" });
        const n = (x) => (x === "" ? null : Number(x));
        if (v && await attempt(() => put(`/members/${enc(m.username)}/limits`, { max_boxes: n(v.max_boxes), max_cpus: n(v.max_cpus), max_memory_mb: n(v.max_memory_mb) }), "limits saved")) refresh();
      } } }, "Limits"),
      h("button.small.danger", { type: "button", "aria-label": `Remove ${m.username}`, on: { click: async () => {
        if (await confirmed(`Remove ${m.username}? Their sessions end, tokens are revoked, boxes stop (and are kept).`, "Remove")
          && await attempt(() => del(`/members/${enc(m.username)}`), `${m.username} removed`)) refresh();
      } } }, "Remove")) },
  ], (await get("/members")).members),
  () => h("button.primary", { type: "button", on: { click: async () => {
    const v = await dialog("Invite someone", [field("Role", h("select", { name: "role" }, h("option", { value: "member" }, "member"), h("option", { value: "owner" }, "owner")))], { submit: "Make link" });
    if (!v) return;
    try {
      const inv = await post("/members/invites", { role: v.role });
      await dialog("Invitation link", [h("input.secret", { readonly: true, value: inv.url, "aria-label": "Invitation link", on: { focus: (e) => e.target.select() } })],
        { submit: "Done", note: `Send it to them: it works once, until ${when(inv.expires_at)}.` });
    } catch (err) { toast(err.message, "err"); }
  } } }, "Invite"));
}

/** The warm pool as `paddock status` says it. */
function poolLine(pool) {
  if (!pool.max_boxes || !pool.types.length) return "off";
  const ready = pool.types.map((t) => `${t.ready}/${t.size} ${t.type}${t.making ? ` (+${t.making} starting)` : ""}`).join(", ");
  const line = `${ready} ready, holding CPU ${pool.cpus} and ${mib(pool.memory_mb)}`;
  return pool.note ? `${line}; ${pool.note}` : line;
}

/** A setting's value as text: what the command line would give to set it. */
function settingText(value) {
  if (value == null) return "";
  if (Array.isArray(value)) return value.join(",");
  if (typeof value === "object") return Object.values(value).some((v) => typeof v === "string") ? JSON.stringify(value) : Object.entries(value).map(([k, v]) => `${k}=${v}`).join(",");
  return String(value);
}

/** The owner's settings (paddock settings): each changed in a dialog, kept until reset. */
function settingsTable(settings, refresh) {
  const edit = async (s) => {
    const input = s.choices.length
      ? h("select", { name: "value" }, s.choices.map((c) => h("option", { value: c, selected: c === s.value }, c)))
      : h("input", { name: "value", value: settingText(s.value), autocomplete: "off", spellcheck: "false" });
    const v = await dialog(`Setting ${s.key}`, [field("Value", input, `${s.help} Takes: ${s.kind}.`)], { submit: "Save" });
    if (v && await attempt(() => put(`/settings/${enc(s.key)}`, { value: v.value }), `${s.key} changed`)) refresh();
  };
  const reset = async (s) => {
    if (await attempt(() => del(`/settings/${enc(s.key)}`), `${s.key} reset`)) refresh();
  };
  return table([
    { label: "Setting", cell: (s) => h("span", { title: s.help }, s.key) },
    { label: "Value", cell: (s) => settingText(s.value) || "\u2013" },
    { label: "From", cell: (s) => (s.source === "set" ? `changed (file: ${settingText(s.file_value) || "\u2013"})` : s.source) },
    { label: "", cell: (s) => h("span.actions", {},
      h("button.small", { type: "button", "aria-label": `Change ${s.key}`, on: { click: () => edit(s) } }, "Change"),
      s.source === "set" ? h("button.small", { type: "button", "aria-label": `Reset ${s.key}`, on: { click: () => reset(s) } }, "Reset") : null) },
  ], settings, { caption: "Settings: boxes made, resumed or stopped from now on follow them" });
}

export function serverPage(main) {
  const buildLog = h("pre.log", { hidden: true, tabindex: "0", "aria-label": "Image build" });
  page(main, "Server", async (refresh) => {
    const s = await get("/status");
    const rows = [
      ["Version", s.version],
      ["Engine", s.engine.reachable ? `reachable${s.engine.version ? ", Docker " + s.engine.version : ""}${s.engine.profile ? ", profile " + s.engine.profile : ""}` : `unreachable: ${s.engine.error || ""}`],
      ["Box image", `${s.engine.image}${s.engine.image_present ? "" : " (not built)"}${s.engine.image_pending ? " (a newer one is pending: rebuild it)" : ""}`],
      ["Memory", `${mib(s.capacity.memory_used_mb)} of ${mib(s.capacity.memory_total_mb)} claimed by running boxes${s.capacity.memory_overcommit ? ` (${s.capacity.memory_overcommit}x the host's memory after a ${mib(s.capacity.memory_reserve_mb)} reserve)` : ""}`],
      ["CPUs", s.capacity.cpus_total == null ? `${s.capacity.cpus_used} claimed, shared by weight` : `${s.capacity.cpus_used} of ${s.capacity.cpus_total} claimed`],
      ...(s.capacity.memory_available_mb != null ? [["Host memory", `${mib(s.capacity.memory_available_mb)} available`]] : []),
      ["Boxes", `${s.boxes_running} running, ${s.boxes_stopped} stopped`],
      ["Disk", s.data_root ? `${s.data_root}: ${bytes(s.data_root_free_bytes)} free of ${bytes(s.data_root_total_bytes)}` : "–"],
      ...(s.disk_limits ? [["Box disks", s.disk_limits]] : []),
      ...(s.pool ? [["Warm pool", poolLine(s.pool)]] : []),
      ...(s.problems.length ? [["Problems", s.problems.join("; ")]] : []),
    ];
    const settings = isOwner ? settingsTable((await get("/settings")).settings, refresh) : null;
    return h("div", {}, h("dl.details", {}, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])), buildLog, settings);
  }, (refresh) => isOwner ? h("button", { type: "button", on: { click: async (e) => {
    if (!(await confirmed("Rebuild the box image now? It takes a few minutes; boxes made after use it.", "Rebuild"))) return;
    const button = e.target;
    button.disabled = true;
    buildLog.hidden = false;
    buildLog.textContent = "";
    try {
      await ndjson("POST", "/images/build", {}, (ev) => {
        buildLog.append(ev.line ?? (ev.error ? `error: ${ev.error.message}\n` : ev.done ? "done\n" : ""));
        buildLog.scrollTop = buildLog.scrollHeight;
      });
    } catch (err) { toast(err.message, "err"); }
    button.disabled = false;
    refresh();
  } } }, "Rebuild box image") : null);
}
