// The Snapshots tab: list with size and kind; take, restore, fork from, delete.
import { get, post, del, enc } from "./api.js";
import { h, clear, table, when, bytes, toast, dialog, confirmed, field } from "./dom.js";

export function snapshotsTab(panel, box) {
  const list = h("div.listing");
  const take = h("button.primary", { type: "button", on: { click: async () => {
    const v = await dialog(`Snapshot ${box.name}`, [field("Label", h("input", { name: "label", placeholder: "(optional)" }))], { submit: "Take snapshot" });
    if (!v) return;
    await act(async () => { const s = await post(`/boxes/${enc(box.name)}/snapshots`, { label: v.label || null }); toast(`snapshot ${s.id} taken`); });
  } } }, "Take snapshot");
  clear(panel, h("div.toolbar", {}, take), list);

  async function act(fn) {
    try { await fn(); } catch (err) { toast(err.message, "err"); }
    await refresh();
  }

  async function refresh() {
    const { snapshots } = await get(`/boxes/${enc(box.name)}/snapshots`);
    clear(list, table([
      { label: "Id", cell: (s) => String(s.id) },
      { label: "Label", cell: (s) => s.label || "–" },
      { label: "Kind", cell: (s) => s.kind },
      { label: "Taken", cell: (s) => when(s.created_at) },
      { label: "Size", cell: (s) => bytes(s.size_bytes) },
      { label: "", cell: (s) => (s.current ? h("span.badge", {}, "current") : "") },
      { label: "Actions", cell: (s) => h("span.actions", {},
        h("button.small", { type: "button", "aria-label": `Restore snapshot ${s.id}`, on: { click: () => restore(s) } }, "Restore"),
        h("button.small", { type: "button", "aria-label": `Fork from snapshot ${s.id}`, on: { click: () => fork(s) } }, "Fork"),
        h("button.small.danger", { type: "button", "aria-label": `Delete snapshot ${s.id}`, on: { click: () => remove(s) } }, "Delete")) },
    ], snapshots, { empty: "No snapshots yet: stopping the box takes one, or Take snapshot." }));
  }

  async function restore(s) {
    if (!(await confirmed(`Rewind ${box.name} to snapshot ${s.id}? Files changed since are lost (take a snapshot first to keep them).`, "Restore"))) return;
    await act(async () => { await post(`/boxes/${enc(box.name)}/restore`, { snapshot: String(s.id) }); toast(`${box.name} restored to snapshot ${s.id}`); });
  }

  async function fork(s) {
    const v = await dialog(`Fork from snapshot ${s.id}`, [field("Name of the new box", h("input", { name: "name", placeholder: "(chosen for you)" }))], { submit: "Fork" });
    if (!v) return;
    await act(async () => { const b = await post(`/boxes/${enc(box.name)}/fork`, { name: v.name || null, snapshot: String(s.id) }); toast(`forked: ${b.name}`); });
  }

  async function remove(s) {
    if (!(await confirmed(`Delete snapshot ${s.id} of ${box.name}?`))) return;
    await act(async () => { await del(`/boxes/${enc(box.name)}/snapshots/${s.id}`); toast(`snapshot ${s.id} deleted`); });
  }

  refresh().catch((err) => clear(list, h("p.err", {}, err.message)));
  return null;
}
