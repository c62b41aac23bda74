import { Client, InvalidState } from "@paddock/sdk";

const c = new Client();
const box = await c.createBox({ ttl: 600 });
try {
  const script = "for i in 1 2 3; do echo $i; sleep 0.5; done; echo done >&2";
  for await (const event of c.execStream(box.name, ["sh", "-c", script])) {
    if (event.type === "exit") console.log("exit code", event.exitCode);
    else process[event.type].write(event.data); // as it happens: stdout here, stderr there
  }

  await c.stopBox(box.name); // its files are kept in a snapshot
  try {
    await c.exec(box.name, "true");
  } catch (e) {
    if (!(e instanceof InvalidState)) throw e;
    console.log(e.code, "-", e.message); // invalid_state - box ... is stopped; ...
  }
} finally {
  await c.deleteBox(box.name, { force: true });
  c.close();
}
