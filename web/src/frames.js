// paddockd's exec frames (paddock/wire/frames.py): 1 byte kind, 4 bytes big-endian length,
// the payload. A WebSocket message carries whole frames.
export const STDOUT = 1, STDERR = 2, EXIT = 3, ERROR = 4;

export function* decode(buffer) {
  const view = new DataView(buffer);
  let at = 0;
  while (at + 5 <= buffer.byteLength) {
    const kind = view.getUint8(at), size = view.getUint32(at + 1);
    yield [kind, new Uint8Array(buffer, at + 5, size)];
    at += 5 + size;
  }
}

export function json(payload) {
  return JSON.parse(new TextDecoder().decode(payload));
}
