import { Client } from "@paddock/sdk";

const c = new Client(); // URL and token: PADDOCK_URL / PADDOCK_TOKEN, else those of `paddock login`
const box = await c.createBox({ type: "small", ttl: 3600 });
try {
  await c.push(box.name, ".", "/config/project"); // this folder's contents
  const result = await c.exec(box.name, "cd /config/project && ls && make -s build");
  console.log(result.exit_code, result.stdout);
  const local = await c.pull(box.name, "/config/project/dist", "./dist"); // results, safely
  console.log("pulled into", local);
} finally {
  await c.deleteBox(box.name, { force: true });
  c.close();
}
