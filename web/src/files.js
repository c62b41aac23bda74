// The Files tab: browse (GET /files/list), upload (files, folders, drag and drop, with
// progress), download (GET /files/download: a file as it is, a folder as a zip that holds
// nothing leading outside it), new folder, rename, delete. Uploads go through PUT /files
// (paddockd's tar extraction and its rules, as `paddock push`); the rest runs as the box
// user, with the box user's rights.
import { run, upload, get, enc } from "./api.js";
import { h, clear, bytes, toast, dialog, confirmed, field } from "./dom.js";
import { pack } from "./tar.js";

const HOME = "/config";
const TEXT_MAX = 1 << 20; // shown, and editable, up to this size
const IMAGE_MAX = 16 << 20;
const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|ico)$/i;

/** The folder the URL names (`#/box/NAME/files/config/project`), so a reload stays there. */
function dirFromHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  return parts[0] === "box" && parts[2] === "files" && parts.length > 3
    ? "/" + parts.slice(3).filter(Boolean).map(decodeURIComponent).join("/") : HOME;
}

function join(dir, name) { return dir === "/" ? `/${name}` : `${dir}/${name}`; }
function parent(dir) { return dir === "/" ? "/" : dir.replace(/\/[^/]+$/, "") || "/"; }
function badName(name) {
  return !name || name === "." || name === ".." || name.includes("/") || name.includes("\0");
}

async function listing(box, dir) {
  const found = await get(`/boxes/${enc(box.name)}/files/list?path=${enc(dir)}`);
  // A link to a folder is opened like one (the box follows it).
  const isDir = (e) => e.type === "dir" || (e.type === "symlink" && e.target_type === "dir");
  const entries = found.entries.map((e) => ({ ...e, folder: isDir(e) }));
  entries.sort((a, b) => b.folder - a.folder || a.name.localeCompare(b.name));
  return { entries, truncated: found.truncated };
}

/** Files from a drop: folders walked (webkitGetAsEntry), each with its path. */
async function dropped(items) {
  const out = [];
  async function walk(entry, prefix) {
    if (entry.isFile) {
      out.push({ path: prefix + entry.name, file: await new Promise((ok, bad) => entry.file(ok, bad)) });
    } else if (entry.isDirectory) {
      out.push({ path: prefix + entry.name });
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((ok, bad) => reader.readEntries(ok, bad));
        if (!batch.length) break;
        for (const child of batch) await walk(child, `${prefix}${entry.name}/`);
      }
    }
  }
  for (const entry of [...items].map((i) => i.webkitGetAsEntry?.()).filter(Boolean)) await walk(entry, "");
  return out;
}

export function filesTab(panel, box) {
  let dir = dirFromHash();
  const running = box.state === "running";
  const pathInput = h("input", { type: "text", value: dir, "aria-label": "Folder in the box", spellcheck: false });
  const listingBox = h("div.listing");
  const progress = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Upload progress" });
  const progressText = h("span.progress-text", { role: "status" });
  const fileInput = h("input", { type: "file", multiple: true, hidden: true });
  const folderInput = h("input", { type: "file", multiple: true, hidden: true, webkitdirectory: true });
  const drop = h("div.dropzone", { tabindex: "-1" }, "Drop files or folders here to upload them into this folder.");
  clear(panel,
    h("form.toolbar", { on: { submit: (e) => { e.preventDefault(); open(pathInput.value.trim() || HOME); } } },
      h("button.small", { type: "button", "aria-label": "Up one folder", on: { click: () => open(parent(dir)) } }, "↑ Up"),
      pathInput, h("button.small", { type: "submit" }, "Go"),
      h("button.small", { type: "button", on: { click: () => open(dir) } }, "Refresh")),
    h("div.toolbar", {},
      h("button.small", { type: "button", disabled: !running, on: { click: () => fileInput.click() } }, "Upload files"),
      h("button.small", { type: "button", disabled: !running, on: { click: () => folderInput.click() } }, "Upload folder"),
      h("button.small", { type: "button", disabled: !running, on: { click: mkdir } }, "New folder"),
      progress, progressText, fileInput, folderInput),
    drop, listingBox);

  async function open(target) {
    const next = target.startsWith("/") ? target.replace(/\/+$/, "") || "/" : join(HOME, target);
    try {
      const found = await listing(box, next);
      dir = next;
      pathInput.value = dir;
      history.replaceState(null, "", `#/box/${enc(box.name)}/files${dir === "/" ? "/" : dir.split("/").map(enc).join("/")}`);
      render(found);
    } catch (err) {
      toast(err.message, "err");
    }
  }

  function render({ entries, truncated }) {
    if (!entries.length) { clear(listingBox, h("p.empty", {}, "This folder is empty.")); return; }
    const tbody = h("tbody", {}, entries.map((r) => {
      const path = join(dir, r.name);
      const nameCell = r.folder
        ? h("button.link", { type: "button", on: { click: () => open(path) } }, r.name + "/")
        : h("button.link", { type: "button", "aria-label": `Open ${r.name}`, on: { click: () => view(r, path) } }, r.name);
      const link = r.type === "symlink" ? h("span.note", {}, ` → ${r.target}`) : null;
      return h("tr", { dataset: { name: r.name } },
        h("td", { dataset: { label: "Name" } }, nameCell, link),
        h("td", { dataset: { label: "Size" } }, r.folder ? "–" : bytes(r.size)),
        h("td", { dataset: { label: "Modified" } }, new Date(r.modified).toLocaleString()),
        h("td.row-actions", {},
          !(r.folder || r.type === "file" || r.target_type === "file") ? null : h("button.small", { type: "button", "aria-label": `Download ${r.name}`,
            title: r.folder ? "as a zip" : undefined, on: { click: () => download(r, path) } }, r.folder ? "Download zip" : "Download"),
          h("button.small", { type: "button", "aria-label": `Rename ${r.name}`, on: { click: () => rename(r.name) } }, "Rename"),
          h("button.small.danger", { type: "button", "aria-label": `Delete ${r.name}`, on: { click: () => remove(r) } }, "Delete")));
    }));
    clear(listingBox, h("table.files", {},
      h("thead", {}, h("tr", {}, ["Name", "Size", "Modified", "Actions"].map((l) => h("th", { scope: "col" }, l)))), tbody),
    truncated ? h("p.note", {}, `Only the first ${entries.length} entries are shown.`) : null);
  }

  async function step(cmd, done) {
    try {
      const res = await run(box.name, cmd);
      if (res.exit_code !== 0) throw new Error(res.stderr.trim() || "it failed");
      if (done) toast(done);
    } catch (err) {
      toast(err.message, "err");
    }
    await open(dir);
  }

  async function mkdir() {
    const v = await dialog("New folder", [field("Name", h("input", { name: "name", required: true, autocomplete: "off" }))], { submit: "Create" });
    if (!v) return;
    if (badName(v.name)) { toast("a name without '/', not '.' or '..'", "err"); return; }
    await step(["mkdir", "--", join(dir, v.name)], `created ${v.name}`);
  }

  async function rename(name) {
    const v = await dialog(`Rename ${name}`, [field("New name", h("input", { name: "name", value: name, required: true, autocomplete: "off" }))], { submit: "Rename" });
    if (!v || v.name === name) return;
    if (badName(v.name)) { toast("a name without '/', not '.' or '..'", "err"); return; }
    await step(["sh", "-c", '[ -e "$2" ] && { echo "$2 exists already" >&2; exit 1; }; mv -T -- "$1" "$2"', "sh",
      join(dir, name), join(dir, v.name)], `renamed to ${v.name}`);
  }

  async function remove(row) {
    const what = join(dir, row.name);
    if (!(await confirmed(row.type === "dir" ? `Delete ${what} and everything in it?` : `Delete ${what}?`))) return;
    await step(["rm", "-rf", "--", what], `deleted ${row.name}`);
  }

  // A file opened from the list: an image is shown, a text file shown in an editor (saved
  // back through the same upload as a push); anything else is for Download.
  async function view(row, path) {
    const image = IMAGE.test(row.name);
    if (row.size > (image ? IMAGE_MAX : TEXT_MAX)) {
      toast(`${row.name} is ${bytes(row.size)}: too large to show here; use Download`, "err");
      return;
    }
    let data;
    try {
      const res = await fetch(`/v1/boxes/${enc(box.name)}/files/download?path=${enc(path)}`, { credentials: "same-origin" });
      if (!res.ok) throw new Error((await res.json().catch(() => null))?.error?.message || `HTTP ${res.status}`);
      data = await res.blob();
    } catch (err) {
      toast(err.message, "err");
      return;
    }
    if (image) {
      const url = URL.createObjectURL(data.slice(0, data.size, row.name.endsWith(".svg") ? "image/svg+xml" : data.type));
      await dialog(row.name, [h("img.preview", { src: url, alt: row.name })], { submit: "Close", cancel: false });
      URL.revokeObjectURL(url);
      return;
    }
    const raw = new Uint8Array(await data.arrayBuffer());
    let text;
    try {
      if (raw.includes(0)) throw new Error("binary");
      text = new TextDecoder("utf-8", { fatal: true }).decode(raw);
    } catch {
      toast(`${row.name} is not text: use Download`, "err");
      return;
    }
    const editor = h("textarea.editor", { name: "text", rows: 20, spellcheck: false, "aria-label": `Contents of ${row.name}` });
    editor.value = text;
    // A link is shown, not written: saving would put a file in its place.
    const editable = running && row.type === "file";
    const saved = await dialog(path, [editor], { submit: editable ? "Save" : "Close" });
    if (!saved || !editable || saved.text === text) return;
    try {
      const file = new File([saved.text], row.name, { lastModified: Date.now() });
      await upload(`/boxes/${enc(box.name)}/files?path=${enc(dir)}`,
        pack([{ path: row.name, file, mode: row.mode & 0o7777 }]), () => {});
      toast(`saved ${row.name}`);
    } catch (err) {
      toast(err.message, "err");
    }
    await open(dir);
  }

  // The browser fetches it itself (the session's cookie goes along): it streams to disk
  // with the browser's own progress, and nothing is held in the page's memory.
  function download(row, path) {
    const format = row.folder ? "&format=zip" : "";
    const a = h("a", { href: `/v1/boxes/${enc(box.name)}/files/download?path=${enc(path)}${format}`, download: "" });
    document.body.append(a);
    a.click();
    a.remove();
  }

  async function send(entries) {
    if (!entries.length) return;
    const blob = pack(entries);
    progress.hidden = false;
    progress.value = 0;
    const files = entries.filter((e) => e.file).length;
    try {
      await upload(`/boxes/${enc(box.name)}/files?path=${enc(dir)}`, blob, (done, total) => {
        progress.value = done / total;
        progressText.textContent = `${bytes(done)} of ${bytes(total)}`;
      });
      toast(`uploaded ${files} file${files === 1 ? "" : "s"}`);
    } catch (err) {
      toast(err.message, "err");
    } finally {
      progress.hidden = true;
      progressText.textContent = "";
      await open(dir);
    }
  }

  fileInput.addEventListener("change", () => { send([...fileInput.files].map((f) => ({ path: f.name, file: f }))); fileInput.value = ""; });
  folderInput.addEventListener("change", () => {
    const files = [...folderInput.files];
    const folders = new Set(files.flatMap((f) => f.webkitRelativePath.split("/").slice(0, -1).map((_, i, a) => a.slice(0, i + 1).join("/"))));
    send([...[...folders].sort().map((path) => ({ path })), ...files.map((f) => ({ path: f.webkitRelativePath, file: f }))]);
    folderInput.value = "";
  });
  for (const target of [drop, listingBox]) {
    target.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    target.addEventListener("dragleave", () => drop.classList.remove("over"));
    target.addEventListener("drop", async (e) => { e.preventDefault(); drop.classList.remove("over"); send(await dropped(e.dataTransfer.items)); });
  }
  if (box.state === "running") open(dir);
  else clear(listingBox, h("p.empty", {}, `${box.name} is ${box.state}: resume it to see its files.`));
  return null;
}
