// Fails when src/generated/api.ts is not what the pinned openapi-typescript makes of
// spec/openapi.json today (someone changed the API without running `npm run generate`).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const committed = join(root, "src/generated/api.ts");
const spec = join(root, "../../spec/openapi.json");
const tmp = mkdtempSync(join(tmpdir(), "paddock-sdk-types-"));
try {
  const fresh = join(tmp, "api.ts");
  const bin = join(root, "node_modules/openapi-typescript/bin/cli.js");
  execFileSync(process.execPath, [bin, spec, "-o", fresh], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  if (readFileSync(fresh, "utf8") !== readFileSync(committed, "utf8")) {
    console.error(
      "src/generated/api.ts is stale: spec/openapi.json changed. Run `npm run generate` in " +
        "sdk/typescript and commit the result.",
    );
    process.exitCode = 1; // not process.exit(): the temporary folder goes first
  } else {
    console.log("src/generated/api.ts matches spec/openapi.json");
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
