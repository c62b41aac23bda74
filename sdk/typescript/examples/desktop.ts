import { writeFile } from "node:fs/promises";

import { Client } from "@paddock/sdk";

const c = new Client();
const box = await c.createBox({ ttl: 600 });
try {
  await c.execDesktop(box.name, ["xfce4-terminal", "--title", "dev"]); // back once it started
  await writeFile("before.png", await c.screenshot(box.name)); // look
  await c.desktopClick(box.name, 320, 240); // act
  await c.desktopType(box.name, "echo hello");
  await c.desktopKey(box.name, "Return");
  await writeFile("after.png", await c.screenshot(box.name)); // look again

  const link = await c.desktopLink(box.name, { view_only: true });
  console.log("watch it in a browser:", link.url);
} finally {
  await c.deleteBox(box.name, { force: true });
  c.close();
}
