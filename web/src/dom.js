// Building the page. Every string goes in as text (textContent or an attribute value),
// never as HTML: names, logs and file names come from boxes and may carry markup.

/** h("tag.class#id", {attr: value, on: {click: fn}}, ...children) */
export function h(spec, attrs = {}, ...children) {
  const [tagClass, id] = spec.split("#");
  const [tag, ...classes] = tagClass.split(".");
  const el = document.createElement(tag || "div");
  if (classes.length) el.className = classes.join(" ");
  if (id) el.id = id;
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "on") {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key in el && typeof value !== "string") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// Powers of 1024, as the CLI says them and as box types are set (1 GiB, not "1.1 GB").
const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
  return i < 3 ? `${Math.round(n)} ${UNITS[i]}` : `${Number.isInteger(n) ? n : n.toFixed(1)} ${UNITS[i]}`;
}

/** A size given in MiB (box types, limits, capacity). */
export function mib(n) {
  return n === null || n === undefined ? "–" : bytes(n * 1024 * 1024);
}

export function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" });
}

export function duration(seconds) {
  if (seconds <= 0) return "due";
  const d = Math.floor(seconds / 86400), hr = Math.floor(seconds / 3600) % 24;
  const m = Math.floor(seconds / 60) % 60, s = Math.floor(seconds % 60);
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  return m ? `${m}m ${String(s).padStart(2, "0")}s` : `${s}s`;
}

/** A table: columns [{label, cell(row) -> node|string, sort?(row) -> value}] */
export function table(columns, rows, { empty = "Nothing here yet.", caption } = {}) {
  if (!rows.length) return h("p.empty", {}, empty);
  return h("table", {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => h("td", { dataset: { label: c.label } }, c.cell(row)))))),
  );
}

let toastBox;
/** A short message at the bottom of the screen (role=status: screen readers say it). */
export function toast(text, kind = "ok") {
  if (!toastBox) {
    toastBox = h("div.toasts", { role: "status", "aria-live": "polite" });
    document.body.append(toastBox);
  }
  const item = h(`div.toast.${kind}`, {}, text);
  toastBox.append(item);
  setTimeout(() => item.remove(), kind === "err" ? 8000 : 4000);
}

/** A modal dialog with a form; resolves to the form's values, or null if cancelled. */
export function dialog(title, fields, { submit = "OK", danger = false, note, cancel = true } = {}) {
  return new Promise((resolve) => {
    const form = h("form", { method: "dialog" });
    const dlg = h("dialog", { "aria-labelledby": "dlg-title" },
      h("h2#dlg-title", {}, title), note ? h("p", {}, note) : null, form);
    append(form, [fields, h("div.actions", {},
      cancel ? h("button", { type: "button", value: "cancel", on: { click: () => dlg.close("cancel") } }, "Cancel") : null,
      h(`button${danger ? ".danger" : ".primary"}`, { type: "submit", value: "ok" }, submit))]);
    dlg.addEventListener("close", () => {
      const ok = dlg.returnValue === "ok";
      const values = ok ? Object.fromEntries(new FormData(form)) : null;
      dlg.remove();
      resolve(values);
    });
    document.body.append(dlg);
    dlg.showModal();
    (form.querySelector("input, select, textarea") || form.querySelector("button.primary, button.danger"))?.focus();
  });
}

export async function confirmed(text, action = "Delete") {
  return (await dialog(text, [], { submit: action, danger: true })) !== null;
}

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h("div.field", {}, h("label", { for: id }, label), input, hint ? h("small", {}, hint) : null);
}
