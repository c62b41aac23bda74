// The Files tab: browse, upload (files, folders, drag and drop, with progress), download,
// new folder, rename, delete. Uploads go through PUT /files (paddockd's tar extraction and
// its rules, as `paddock push`); the rest runs as the box user, with the box user's rights.
import { run, upload, call, enc } from "./api.js";
import { h, clear, bytes, toast, dialog, confirmed, field } from "./dom.js";
import { pack, firstFile } from "./tar.js";

const HOME = "/config";
const MAX_ENTRIES = 5000;
// One NUL-separated record per entry: type (links followed), own type, size, mtime, name.
const LIST = `find "$1" -mindepth 1 -maxdepth 1 -printf '%Y\\0%y\\0%s\\0%T@\\0%f\\0' | head -z -n ${5 * MAX_ENTRIES}`;

function join(dir, name) { return dir === "/" ? `/${name}` : `${dir}/${name}`; }
function parent(dir) { return dir === "/" ? "/" : dir.replace(/\/[^/]+$/, "") || "/"; }
function badName(name) {
  return !name || name === "." || name === ".." || name.includes("/") || name.includes("\0");
}

async function listing(box, dir) {
  const res = await run(box.name, ["sh", "-c", LIST, "sh", dir.endsWith("/") ? dir : dir + "/"]);
  if (res.exit_code !== 0) throw new Error(res.stderr.trim() || `cannot list ${dir}`);
  const f = res.stdout.split("\0");
  const out = [];
  for (let i = 0; i + 5 <= f.length; i += 5) {
    out.push({ kind: f[i], own: f[i + 1], size: Number(f[i + 2]), mtime: Number(f[i + 3]), name: f[i + 4] });
  }
  return out.sort((a, b) => (b.kind === "d") - (a.kind === "d") || a.name.localeCompare(b.name));
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
  let dir = HOME;
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
      h("button.small", { type: "button", on: { click: () => fileInput.click() } }, "Upload files"),
      h("button.small", { type: "button", on: { click: () => folderInput.click() } }, "Upload folder"),
      h("button.small", { type: "button", on: { click: mkdir } }, "New folder"),
      progress, progressText, fileInput, folderInput),
    drop, listingBox);

  async function open(target) {
    const next = target.startsWith("/") ? target.replace(/\/+$/, "") || "/" : join(HOME, target);
    try {
      const rows = await listing(box, next);
      dir = next;
      pathInput.value = dir;
      render(rows);
    } catch (err) {
      toast(err.message, "err");
    }
  }

  function render(rows) {
    if (!rows.length) { clear(listingBox, h("p.empty", {}, "This folder is empty.")); return; }
    const tbody = h("tbody", {}, rows.slice(0, MAX_ENTRIES).map((r) => {
      const path = join(dir, r.name);
      const nameCell = r.kind === "d"
        ? h("button.link", { type: "button", on: { click: () => open(path) } }, r.name + "/")
        : h("span", {}, r.name);
      return h("tr", { dataset: { name: r.name } },
        h("td", { dataset: { label: "Name" } }, nameCell, r.own === "l" ? h("span.note", {}, " (link)") : null),
        h("td", { dataset: { label: "Size" } }, r.kind === "d" ? "–" : bytes(r.size)),
        h("td", { dataset: { label: "Modified" } }, new Date(r.mtime * 1000).toLocaleString()),
        h("td.row-actions", {},
          h("button.small", { type: "button", "aria-label": `Download ${r.name}`, on: { click: () => download(r, path) } }, "Download"),
          h("button.small", { type: "button", "aria-label": `Rename ${r.name}`, on: { click: () => rename(r.name) } }, "Rename"),
          h("button.small.danger", { type: "button", "aria-label": `Delete ${r.name}`, on: { click: () => remove(r.name) } }, "Delete")));
    }));
    clear(listingBox, h("table.files", {},
      h("thead", {}, h("tr", {}, ["Name", "Size", "Modified", "Actions"].map((l) => h("th", { scope: "col" }, l)))), tbody),
    rows.length > MAX_ENTRIES ? h("p.note", {}, `Only the first ${MAX_ENTRIES} entries are shown.`) : null);
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

  async function remove(name) {
    if (!(await confirmed(`Delete ${join(dir, name)} (and everything in it)?`))) return;
    await step(["rm", "-rf", "--", join(dir, name)], `deleted ${name}`);
  }

  async function download(row, path) {
    const res = await call("GET", `/boxes/${enc(box.name)}/files?path=${enc(path)}`, undefined, { raw: true });
    const tar = await res.blob();
    const isFile = row.kind !== "d";
    const blob = isFile ? await firstFile(tar) : tar;
    const a = h("a", { href: URL.createObjectURL(blob), download: isFile ? row.name : `${row.name}.tar` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
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
