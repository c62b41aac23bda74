// Bundles the dashboard (src/) with its npm packages into ../src/paddockd/dashboard/assets:
// hashed file names, a manifest.json naming the entry files, and a gzipped twin of each
// (paddockd sends that one as is). Skips the work when nothing it reads has changed.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

process.chdir(new URL(".", import.meta.url).pathname);

const here = new URL(".", import.meta.url).pathname;
const out = join(here, "..", "src", "paddockd", "dashboard", "assets");

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  }).sort();
}

const inputs = [join(here, "package-lock.json"), join(here, "build.mjs"), ...files(join(here, "src"))];
const digest = createHash("sha256");
for (const path of inputs) digest.update(relative(here, path)).update("\0").update(readFileSync(path));
const source = digest.digest("hex");
let built = "";
try { built = readFileSync(join(out, ".source"), "utf8"); } catch { /* never built */ }
if (built === source && !process.argv.includes("--force")) {
  console.log("dashboard assets up to date");
  process.exit(0);
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const result = await esbuild.build({
  entryPoints: { app: join(here, "src", "main.js") },
  bundle: true,
  splitting: true, // the terminal and the desktop load when first opened
  format: "esm",
  target: "es2022",
  minify: true,
  legalComments: "linked",
  outdir: out,
  entryNames: "[name]-[hash]",
  chunkNames: "chunk-[hash]",
  assetNames: "[name]-[hash]",
  metafile: true,
  logLevel: "warning",
});

const manifest = {};
for (const [path, meta] of Object.entries(result.metafile.outputs)) {
  if (meta.entryPoint !== "src/main.js") continue;
  manifest["app.js"] = path.split("/").pop();
  if (meta.cssBundle) manifest["app.css"] = meta.cssBundle.split("/").pop();
}
for (const path of files(out)) {
  if (!path.endsWith(".gz")) writeFileSync(path + ".gz", gzipSync(readFileSync(path), { level: 9 }));
}
writeFileSync(join(out, "manifest.json"), JSON.stringify(manifest, null, 1) + "\n");
writeFileSync(join(out, ".source"), source);
console.log("dashboard assets built:", Object.values(manifest).join(", "));
