// Just enough tar (POSIX ustar with pax headers for long names and big files) to send a
// browser's files to PUT /v1/boxes/{ref}/files. Parts are Blobs: nothing is read into memory.
const enc = new TextEncoder();

function octal(n, width) {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(name, size, mode, mtime, type) {
  const block = new Uint8Array(512);
  const put = (text, at, width) => block.set(enc.encode(text).subarray(0, width), at);
  put(name, 0, 100);
  put(octal(mode, 8), 100, 8);
  put(octal(1000, 8), 108, 8);
  put(octal(1000, 8), 116, 8);
  put(octal(Math.min(size, 0o77777777777), 12), 124, 12);
  put(octal(Math.floor(mtime), 12), 136, 12);
  put("        ", 148, 8);
  put(type, 156, 1);
  put("ustar\u000000", 257, 8);
  let sum = 0;
  for (const b of block) sum += b;
  put(octal(sum, 7) + " ", 148, 8);
  return block;
}

function paxRecord(key, value) {
  // "LENGTH key=value\n", where LENGTH counts the whole record, its own digits too.
  const body = ` ${key}=${value}\n`;
  const n = enc.encode(body).length;
  let length = n + String(n).length;
  if (String(length).length !== String(n).length) length = n + String(length).length;
  return `${length}${body}`;
}

function entryParts(path, size, mode, mtime, type) {
  const bytes = enc.encode(path);
  const parts = [];
  if (bytes.length > 99 || size > 0o77777777777 || /[^\x20-\x7e]/.test(path)) {
    const pax = enc.encode(paxRecord("path", path) + (size > 0o77777777777 ? paxRecord("size", String(size)) : ""));
    parts.push(header("PaxHeader", pax.length, 0o644, mtime, "x"), pax, new Uint8Array((512 - (pax.length % 512)) % 512));
  }
  parts.push(header(path.slice(0, 99), size, mode, mtime, type));
  return parts;
}

/** entries: [{path, file?: File, mode?}] (no file: a folder) -> a Blob of a tar archive */
export function pack(entries) {
  const parts = [];
  for (const { path, file, mode } of entries) {
    const mtime = (file?.lastModified ?? Date.now()) / 1000;
    if (!file) {
      parts.push(...entryParts(path.replace(/\/?$/, "/"), 0, 0o755, mtime, "5"));
      continue;
    }
    parts.push(...entryParts(path, file.size, mode ?? 0o644, mtime, "0"), file, new Uint8Array((512 - (file.size % 512)) % 512));
  }
  parts.push(new Uint8Array(1024));
  return new Blob(parts, { type: "application/x-tar" });
}
