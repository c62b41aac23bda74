// The /v1 API with the web session: the cookie goes by itself, every change carries the
// session's CSRF token (from the page's meta tag), errors become ApiError.
const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content || "";
export const session = { csrf: meta("paddock-csrf"), user: meta("paddock-user"), role: meta("paddock-role") };
export const isOwner = session.role === "owner";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(res) {
  let code = "http_" + res.status, message = res.statusText || "request failed";
  try {
    const body = await res.json();
    code = body.error?.code || code;
    message = body.error?.message || message;
  } catch { /* not JSON */ }
  if (res.status === 401) location.assign("/login?next=" + encodeURIComponent("/" + location.hash));
  return new ApiError(res.status, code, message);
}

export async function call(method, path, body, { raw = false, headers = {}, signal } = {}) {
  const init = { method, headers: { ...headers }, credentials: "same-origin", signal };
  if (method !== "GET") init.headers["X-CSRF-Token"] = session.csrf;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch("/v1" + path, init);
  if (!res.ok) throw await failure(res);
  if (raw) return res;
  return res.status === 204 ? null : res.json();
}

export const get = (path) => call("GET", path);
export const post = (path, body = {}) => call("POST", path, body);
export const put = (path, body = {}) => call("PUT", path, body);
export const del = (path) => call("DELETE", path);
export const enc = encodeURIComponent;

/** A command in the box, to completion (as the box user): {exit_code, stdout, stderr}. */
export function run(box, cmd, user) {
  return post(`/boxes/${enc(box)}/exec?wait=true`, { cmd, user });
}

/** PUT with upload progress (fetch has none): resolves to the parsed answer. */
export function upload(path, blob, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", "/v1" + path);
    xhr.setRequestHeader("X-CSRF-Token", session.csrf);
    xhr.setRequestHeader("Content-Type", "application/x-tar");
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded, e.total);
    xhr.onload = () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { /* empty */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new ApiError(xhr.status, body?.error?.code || "http_" + xhr.status, body?.error?.message || "upload failed"));
    };
    xhr.onerror = () => reject(new ApiError(0, "network", "the upload was cut off"));
    xhr.send(blob);
  });
}

/** A WebSocket URL on this host for an API path. */
export function socketUrl(path) {
  const url = new URL("/v1" + path, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}
