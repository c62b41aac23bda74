// The allowlist editor: one entry a line, checked as you type by the server's own rules
// (domain/network.py parse_target), so a mistake shows before anything is sent.
import { h, field } from "./dom.js";

const DOMAIN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;

export function checkTarget(raw) {
  const text = raw.trim().toLowerCase().replace(/\.$/, "");
  if (!text) return null;
  if (text.includes("://")) {
    const host = text.split("://")[1].split("/")[0].split("@").pop().split(":")[0];
    return `a URL, not a host: give its host name or a range${host ? ` (${host})` : ""}`;
  }
  if (/^[a-z0-9.*-]+:\d{1,5}$/.test(text)) {
    return `give a host name or range without a port (${text.split(":")[0]}; every port of it is allowed)`;
  }
  if (text.includes(":")) return "IPv6 targets are not supported (boxes have IPv4 only)";
  const m = text.match(/^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/(\d{1,2}))?$/);
  if (m) {
    const octets = m.slice(1, 5).map(Number);
    if (octets.some((o) => o > 255)) return "an IPv4 address has four numbers of 0-255";
    const bits = m[5] === undefined ? 32 : Number(m[5]);
    if (bits > 32) return "a CIDR's prefix is 0-32";
    const value = octets.reduce((a, o) => a * 256 + o, 0);
    const hostBits = 2 ** (32 - bits);
    if (value % hostBits) return "host bits are set (use the network's first address)";
    return "";
  }
  if (text.length <= 253 && DOMAIN.test(text)) return "";
  return "use an IPv4 address or CIDR (10.0.0.0/8), a domain (example.com) or a wildcard (*.example.com)";
}

export function entries(text) {
  return text.split(/[\s,]+/).map((t) => t.trim()).filter(Boolean);
}

/** {element, value() -> {mode, allow}, valid() -> bool, set(mode, allow)} */
export function networkEditor({ mode = "", allow = [] } = {}, { allowDefault = false } = {}) {
  const modes = [...(allowDefault ? [["", "server default"]] : []),
    ["allow-all", "allow all"], ["deny-all", "deny all"], ["allowlist", "allowlist"]];
  const select = h("select", { name: "network" }, modes.map(([v, l]) => h("option", { value: v }, l)));
  const area = h("textarea", { name: "allow", rows: 4, spellcheck: false, autocomplete: "off",
    placeholder: "pypi.org\n*.github.com\n198.18.0.0/15", "aria-describedby": "allow-problems" });
  const problems = h("ul.problems#allow-problems", { "aria-live": "polite" });
  const wrap = h("div.allowlist", {}, field("Allowlist (one a line)", area), problems);

  function check() {
    const list = entries(area.value);
    problems.replaceChildren(...list.map((t) => [t, checkTarget(t)]).filter(([, p]) => p)
      .map(([t, p]) => h("li", {}, `${t}: ${p}`)));
    const listMode = select.value === "allowlist";
    wrap.hidden = !listMode;
    if (listMode && !list.length) problems.append(h("li", {}, "an empty allowlist blocks everything: choose deny all instead"));
    area.setCustomValidity(problems.children.length && listMode ? "fix the allowlist" : "");
    return !problems.children.length || !listMode;
  }
  area.addEventListener("input", check);
  select.addEventListener("change", check);
  const element = h("div.network", {}, field("Network", select), wrap);
  const editor = {
    element,
    set(m, list) { select.value = m; area.value = list.join("\n"); check(); },
    value() { return { mode: select.value, allow: select.value === "allowlist" ? entries(area.value) : [] }; },
    valid: check,
  };
  editor.set(mode, allow);
  return editor;
}
