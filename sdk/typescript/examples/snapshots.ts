import { Client } from "@paddock/sdk";

const c = new Client();
const box = await c.createBox({ ttl: 600 });
const fork = `${box.name}-try`;
try {
  await c.exec(box.name, "echo v1 > /config/state.txt");
  await c.snapshotBox(box.name, "before-upgrade"); // the files as they are now
  await c.exec(box.name, "echo v2 > /config/state.txt");

  await c.forkBox(box.name, { name: fork }); // a copy that changes independently
  await c.restoreBox(box.name, "before-upgrade"); // rewind; drives are untouched

  console.log((await c.exec(box.name, "cat /config/state.txt")).stdout); // v1
  console.log((await c.exec(fork, "cat /config/state.txt")).stdout); // v2
} finally {
  await c.deleteBox(fork, { force: true }).catch(() => undefined);
  await c.deleteBox(box.name, { force: true });
  c.close();
}
