// The Desktop tab: noVNC (from npm) on the box's desktop bridge. A desktop link from the
// API (per box, per user, short-lived) is the bridge's credential; the desktop starts
// when the user asks for it.
import RFB from "@novnc/novnc";
import { post, enc, socketUrl } from "./api.js";
import { h, clear, toast } from "./dom.js";

export function desktopTab(panel, box) {
  let rfb = null;
  const screen = h("div.screen#screen");
  const status = h("span.status", { role: "status" }, "");
  const viewOnly = h("input", { type: "checkbox", id: "view-only" });
  const clip = h("textarea", { rows: 2, "aria-label": "Clipboard of the box's desktop", placeholder: "the desktop's clipboard" });
  const start = h("button.primary", { type: "button", on: { click: () => connect() } }, "Start desktop");
  const tools = h("div.toolbar", {}, start,
    h("label.check", {}, viewOnly, " View only"),
    h("button.small", { type: "button", on: { click: () => screen.requestFullscreen?.() } }, "Full screen"),
    h("a.button.small", { href: `/v1/boxes/${enc(box.name)}/desktop/screenshot`, download: `${box.name}.png` }, "Screenshot"),
    // Folded away: open, it would push the desktop below the fold on a laptop's screen.
    h("details.clipboard", {}, h("summary", {}, "Clipboard"), clip,
      h("button.small", { type: "button", on: { click: () => rfb?.clipboardPasteFrom(clip.value) } }, "Send to box")),
    status);
  clear(panel, tools, screen);
  viewOnly.addEventListener("change", () => { if (rfb) rfb.viewOnly = viewOnly.checked; });

  async function connect() {
    if (box.state !== "running") { toast(`${box.name} is ${box.state}: resume it first`, "err"); return; }
    start.disabled = true;
    status.textContent = "starting the desktop…";
    try {
      const link = await post(`/boxes/${enc(box.name)}/desktop`, {});
      rfb?.disconnect();
      const url = socketUrl(`/boxes/${enc(box.id)}/desktop/ws?token=${enc(link.token)}`);
      rfb = new RFB(screen, url, { wsProtocols: ["binary"] });
      rfb.viewOnly = viewOnly.checked;
      rfb.resizeSession = true;
      rfb.scaleViewport = true;
      rfb.focusOnClick = true;
      rfb.addEventListener("connect", () => { status.textContent = "connected"; panel.dataset.desktop = "connected"; start.textContent = "Reconnect"; });
      rfb.addEventListener("disconnect", (e) => {
        status.textContent = e.detail.clean ? "disconnected" : "connection lost";
        panel.dataset.desktop = "disconnected";
      });
      rfb.addEventListener("clipboard", (e) => { clip.value = e.detail.text; });
    } catch (err) {
      status.textContent = err.message;
    } finally {
      start.disabled = false;
    }
  }
  return () => rfb?.disconnect();
}
