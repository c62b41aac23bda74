// A box's page: its header (state live from /v1/events) and tabs. A tab is built when
// first shown and kept while the page is open, so terminals survive a look at the files.
import { get, enc } from "./api.js";
import { h, clear, toast } from "./dom.js";
import { stateBadge, boxActions } from "./boxes.js";
import { filesTab } from "./files.js";
import { snapshotsTab } from "./snapshots.js";
import { networkTab } from "./network.js";
import { agentsTab } from "./agents.js";
import { previewsTab, detailsTab, logsTab } from "./details.js";

const TABS = [
  ["terminal", "Terminal", (panel, box) => import("./terminal.js").then((m) => m.terminalTab(panel, box))],
  ["desktop", "Desktop", (panel, box) => import("./desktop.js").then((m) => m.desktopTab(panel, box))],
  ["files", "Files", filesTab],
  ["snapshots", "Snapshots", snapshotsTab],
  ["network", "Network", networkTab],
  ["agents", "Agents", agentsTab],
  ["previews", "Previews", previewsTab],
  ["logs", "Logs", logsTab],
  ["details", "Details", detailsTab],
];

export function boxPage(main, name, tab = "terminal") {
  const cleanups = [];
  const panels = new Map();
  const header = h("div.titlebar");
  const tabList = h("div.tabs", { role: "tablist", "aria-label": "Box" });
  const body = h("div.tabpanels");
  clear(main, h("p.crumbs", {}, h("a", { href: "#/boxes" }, "Boxes"), " / "), header, tabList, body);
  let box = null;

  function paintHeader() {
    clear(header, h("h1", {}, box.name), stateBadge(box.state),
      box.message ? h("span.note", {}, box.message) : null,
      boxActions(box, { onDeleted: () => location.assign("#/boxes") }));
  }

  function show(id) {
    const known = TABS.find(([t]) => t === id) ? id : "terminal";
    for (const button of tabList.children) {
      const on = button.dataset.tab === known;
      button.setAttribute("aria-selected", String(on));
      button.tabIndex = on ? 0 : -1;
    }
    for (const [key, panel] of panels) panel.hidden = key !== known;
    if (!panels.has(known)) {
      const panel = h("section.panel", { role: "tabpanel", id: `panel-${known}`, "aria-labelledby": `tab-${known}`, tabindex: "0" });
      panels.set(known, panel);
      body.append(panel);
      const build = TABS.find(([t]) => t === known)[2];
      Promise.resolve(build(panel, box)).then((cleanup) => cleanup && cleanups.push(cleanup))
        .catch((err) => { toast(err.message, "err"); panel.append(h("p.err", {}, err.message)); });
    }
  }

  // Arrow keys move between tabs (the WAI-ARIA tabs pattern).
  tabList.addEventListener("keydown", (e) => {
    const buttons = [...tabList.children];
    const i = buttons.indexOf(document.activeElement);
    if (i < 0 || !["ArrowLeft", "ArrowRight", "Home", "End"].includes(e.key)) return;
    const next = e.key === "Home" ? 0 : e.key === "End" ? buttons.length - 1 : (i + (e.key === "ArrowRight" ? 1 : -1) + buttons.length) % buttons.length;
    buttons[next].focus();
    buttons[next].click();
  });

  get(`/boxes/${enc(name)}`).then((found) => {
    box = found;
    paintHeader();
    tabList.append(...TABS.map(([id, label]) => h("button", {
      type: "button", role: "tab", id: `tab-${id}`, "aria-controls": `panel-${id}`, dataset: { tab: id },
      on: { click: () => { history.replaceState(null, "", `#/box/${enc(box.name)}/${id}`); show(id); } },
    }, label)));
    show(tab);
    const events = new EventSource("/v1/events");
    events.addEventListener("box", (e) => {
      const changed = JSON.parse(e.data);
      if (changed.id === box.id) { Object.assign(box, changed); paintHeader(); }
    });
    events.addEventListener("box-removed", (e) => {
      if (JSON.parse(e.data).id === box.id) { toast(`${box.name} was deleted`); location.assign("#/boxes"); }
    });
    cleanups.push(() => events.close());
  }).catch((err) => clear(header, h("h1", {}, name), h("p.err", {}, err.message)));

  return { leave: () => cleanups.forEach((fn) => fn()), update: (next) => box && show(next || "terminal"), key: name };
}
