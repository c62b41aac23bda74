import { Client } from "@paddock/sdk";

const c = new Client();
const box = await c.createBox({
  ttl: 600,
  network: "allowlist",
  allow: ["pypi.org", "*.github.com"],
});
try {
  const r = await c.exec(box.name, "getent hosts example.com || echo refused");
  console.log(r.stdout.trim()); // refused: not on the list

  for (const e of await c.networkLog(box.name)) {
    console.log(e.kind, e.verdict, e.name || `${e.address}:${e.port}`);
  }
  console.log("would allow:", (await c.suggestNetwork(box.name)).allow);

  await c.setNetwork(box.name, "deny-all"); // applies at once, no restart
  console.log(await c.getNetwork(box.name));
} finally {
  await c.deleteBox(box.name, { force: true });
  c.close();
}
