// Newline-delimited JSON from a streaming API answer (egress log, run log, image build).
import { call } from "./api.js";

/** Calls onEvent for each line's object until the stream ends or signal aborts. */
export async function ndjson(method, path, body, onEvent, signal) {
  const res = await call(method, path, body, { raw: true, signal });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const lines = (rest + value).split("\n");
      rest = lines.pop();
      for (const line of lines) if (line.trim()) onEvent(JSON.parse(line));
    }
  } catch (err) {
    if (err.name !== "AbortError") throw err;
  }
}
