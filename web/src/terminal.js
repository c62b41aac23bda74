// The Terminal tab: xterm.js on /v1/boxes/{ref}/terminal/ws. Each terminal has a key kept
// in sessionStorage, so after a dropped connection (or a reload) the same key attaches
// again to the same shell while paddockd keeps it.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { socketUrl, enc } from "./api.js";
import { h, clear, toast } from "./dom.js";
import * as frames from "./frames.js";

const RETRY = [500, 1000, 2000, 4000, 8000];
// Open terminals, for the browser tests (which read a buffer, and drop a connection).
const terminals = [];
window.paddockTerminals = terminals;

function storedKeys(box) {
  try { return JSON.parse(sessionStorage.getItem(`paddock-terms:${box.id}`)) || []; } catch { return []; }
}
function storeKeys(box, keys) {
  sessionStorage.setItem(`paddock-terms:${box.id}`, JSON.stringify(keys));
}
function newKey() {
  return crypto.randomUUID().replaceAll("-", "");
}

class Session {
  constructor(box, key, host, status) {
    this.box = box;
    this.key = key;
    this.status = status;
    this.closed = false;
    this.tries = 0;
    this.term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false,
      fontFamily: "ui-monospace, 'DejaVu Sans Mono', monospace", theme: { background: "#111418" } });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(host);
    this.term.attachCustomKeyEventHandler((e) => {
      // Ctrl+Shift+C copies the selection (Ctrl+C stays the shell's interrupt).
      if (e.type === "keydown" && e.ctrlKey && e.shiftKey && e.code === "KeyC") {
        navigator.clipboard?.writeText(this.term.getSelection());
        return false;
      }
      return true;
    });
    this.term.onData((data) => this.send(new TextEncoder().encode(data)));
    this.term.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0))));
    this.term.onResize(({ cols, rows }) => this.control({ type: "resize", cols, rows }));
    this.term.onTitleChange((title) => { host.title = title; });  // text, never markup
    this.resizer = new ResizeObserver(() => { if (host.offsetParent) this.fit.fit(); });
    this.resizer.observe(host);
    this.fit.fit();
    this.connect();
  }

  connect() {
    this.say("connecting…");
    const ws = new WebSocket(socketUrl(`/boxes/${enc(this.box.id)}/terminal/ws`));
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ key: this.key, cols: this.term.cols, rows: this.term.rows }));
    ws.onmessage = (e) => {
      if (typeof e.data === "string") {
        const msg = JSON.parse(e.data);
        if (msg.type === "attached") {
          this.tries = 0;
          if (msg.resumed) this.term.reset();  // the replay redraws what was there
          this.say("");
        }
        return;
      }
      for (const [kind, payload] of frames.decode(e.data)) {
        if (kind === frames.STDOUT || kind === frames.STDERR) this.term.write(payload);
        else if (kind === frames.EXIT) { this.ended = true; this.say(`the shell ended (exit ${frames.json(payload).exit_code ?? "?"})`); }
        else if (kind === frames.ERROR) { this.ended = true; this.say(frames.json(payload).error.message); }
      }
    };
    ws.onclose = () => {
      if (this.closed || this.ended) return;
      const wait = RETRY[Math.min(this.tries++, RETRY.length - 1)];
      this.say(`connection lost: reconnecting in ${wait / 1000}s…`);
      this.timer = setTimeout(() => this.connect(), wait);
    };
  }

  say(text) { this.status.textContent = text; this.status.hidden = !text; }

  send(bytes) { if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(bytes); }

  control(msg) { if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg)); }

  /** Leave the page: the shell stays in paddockd's keeping for a while. */
  detach() { this.closed = true; clearTimeout(this.timer); this.resizer.disconnect(); this.ws?.close(); this.term.dispose(); }

  /** The user closed this terminal: its shell ends. */
  end() { this.control({ type: "close" }); setTimeout(() => this.detach(), 200); }
}

export function terminalTab(panel, box) {
  if (box.state !== "running") {
    clear(panel, h("p.empty", {}, `${box.name} is ${box.state}: resume it to open a terminal.`));
    return null;
  }
  const strip = h("div.termtabs", { role: "toolbar", "aria-label": "Terminals" });
  const area = h("div.termarea");
  const sessions = [];
  let active = null;
  const tools = h("span.tools", {},
    h("button.small", { type: "button", on: { click: () => add(newKey()) } }, "New terminal"),
    h("button.small", { type: "button", on: { click: () => active && navigator.clipboard?.writeText(active.term.getSelection()) } }, "Copy"),
    h("button.small", { type: "button", on: { click: async () => {
      try { const text = await navigator.clipboard.readText(); active?.term.paste(text); } catch { toast("the browser did not allow reading the clipboard: use Ctrl+V", "err"); }
    } } }, "Paste"));
  clear(panel, h("div.termbar", {}, strip, tools), area);

  function select(s) {
    active = s;
    for (const x of sessions) {
      x.wrap.hidden = x !== s;
      x.tab.setAttribute("aria-pressed", String(x === s));
    }
    s.fit.fit();
    s.term.focus();
  }

  function add(key) {
    const host = h("div.term");
    const status = h("div.termstatus", { role: "status" });
    const wrap = h("div.termwrap", {}, status, host);
    area.append(wrap);
    const s = new Session(box, key, host, status);
    s.wrap = wrap;
    const label = `Terminal ${sessions.length + 1}`;
    s.tab = h("span.termtab", {},
      h("button.small", { type: "button", on: { click: () => select(s) } }, label),
      h("button.small.close", { type: "button", "aria-label": `Close ${label}`, on: { click: () => remove(s) } }, "×"));
    strip.append(s.tab);
    sessions.push(s);
    terminals.push(s);
    storeKeys(box, sessions.map((x) => x.key));
    select(s);
  }

  function remove(s) {
    s.end();
    s.wrap.remove();
    s.tab.remove();
    sessions.splice(sessions.indexOf(s), 1);
    terminals.splice(terminals.indexOf(s), 1);
    storeKeys(box, sessions.map((x) => x.key));
    if (sessions.length) select(sessions[sessions.length - 1]);
  }

  const keys = storedKeys(box);
  for (const key of keys.length ? keys : [newKey()]) add(key);
  return () => {
    for (const s of sessions) { s.detach(); terminals.splice(terminals.indexOf(s), 1); }
  };
}
