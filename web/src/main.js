// The dashboard's frame: navigation, the logout form, and the page for the URL's #hash.
// xterm.js's own styles come with the page: a lazily loaded chunk's CSS would not.
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { session, isOwner } from "./api.js";
import { h, clear } from "./dom.js";
import { boxesPage } from "./boxes.js";
import { boxPage } from "./box.js";
import { drivesPage, credentialsPage, tokensPage, membersPage, serverPage, previewsPage, templatesPage, auditPage } from "./pages.js";

const PAGES = [
  ["boxes", "Boxes", boxesPage],
  ["templates", "Templates", templatesPage],
  ["drives", "Drives", drivesPage],
  ["previews", "Previews", previewsPage],
  ["credentials", "Credentials", credentialsPage],
  ["tokens", "Tokens", tokensPage],
  ...(isOwner ? [["members", "Members", membersPage]] : []),
  ["audit", "Audit", auditPage],
  ["server", "Server", serverPage],
];

const main = h("main#main", { tabindex: "-1" });
const links = PAGES.map(([id, label]) => h("a", { href: `#/${id}`, dataset: { page: id } }, label));
const logout = h("form.logout", { method: "post", action: "/logout" },
  h("input", { type: "hidden", name: "csrf", value: session.csrf }),
  h("a", { href: "/account" }, session.user), " ",
  h("button", { type: "submit" }, "Log out"));
document.getElementById("app").replaceChildren(
  h("a.skip", { href: "#main", on: { click: (e) => { e.preventDefault(); main.focus(); } } }, "Skip to content"),
  h("header", {}, h("a.brand", { href: "#/boxes" }, "Paddock"), h("nav", { "aria-label": "Sections" }, links), logout),
  main,
);

// Each page returns a cleanup (closing its streams and sockets) for when it is left, or
// {leave, update, key}: a box page only switches tabs when the hash names another tab.
let current = { leave() {} };
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const [id = "boxes", ...rest] = parts;
  if (id === "box" && current.key === rest[0] && current.update) {
    current.update(rest[1]);
    return;
  }
  current.leave();
  clear(main);
  for (const a of links) {
    if (a.dataset.page === (id === "box" ? "boxes" : id)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const page = id === "box" ? boxPage : (PAGES.find(([p]) => p === id) || PAGES[0])[2];
  const made = page(main, ...rest);
  current = typeof made === "function" ? { leave: made } : made || { leave() {} };
  document.getElementById("app").dataset.state = "ready";
}
window.addEventListener("hashchange", route);
route();
