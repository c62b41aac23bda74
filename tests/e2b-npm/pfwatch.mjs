import { Sandbox } from "e2b";
const sbx = await Sandbox.create({ metadata: { suite: "pfwatch" } });
async function watchers() {
  const t0 = Date.now();
  const r = await sbx.commands.run("pgrep -c -f 'inotify_init[1]' || true", { user: "root", requestTimeoutMs: 15000 });
  const dt = Date.now() - t0;
  if (dt > 2000) console.log("slow watchers", dt);
  return Number(r.stdout.trim());
}
try {
  for (let i = 0; i < Number(process.argv[2] || 30); i++) {
    const t0 = Date.now();
    await sbx.files.makeDir(`w${i}`);
    const events = [];
    const handle = await sbx.files.watchDir(`w${i}`, (ev) => events.push(ev), { recursive: true });
    try {
      await sbx.files.write(`w${i}/new.txt`, "x");
      await sbx.commands.run(`mkdir -p ~/w${i}/sub && echo y > ~/w${i}/sub/deep.txt`);
      await sbx.commands.run(`mv ~/w${i}/new.txt ~/w${i}/renamed.txt && rm ~/w${i}/renamed.txt`);
      const deadline = Date.now() + 10000;
      while (!events.some((e) => e.name === "renamed.txt" && e.type === "remove") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const n = await watchers();
      if (n !== 1) console.log("watchers in", n);
    } finally {
      await handle.stop();
    }
    const deadline = Date.now() + 10000;
    while ((await watchers()) !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    console.log(i, Date.now() - t0, "ms");
  }
} finally {
  await sbx.kill();
}
