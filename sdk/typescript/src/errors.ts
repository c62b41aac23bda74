/**
 * The SDK's error tree, mirrored from the server's stable error codes (and from the Python
 * SDK's `paddock.wire.errors`):
 *
 * ```
 * PaddockError
 * ├── ConnectionFailed      the server could not be reached (or did not answer in time)
 * ├── AuthenticationFailed  401: missing or wrong token
 * │   └── TooManyAttempts   429: failed logins; wait details.retry_after seconds
 * ├── Forbidden             403: the owner's administration (members, drives, keys), asked by a member
 * ├── NotFound              404: unknown box, type, path …
 * ├── InvalidRequest        400/422: bad names, sizes, paths, TTLs; a refused pull member
 * │   └── PayloadTooLarge   413: a request body over the route's cap (JSON: 1 MiB)
 * ├── Conflict              409: name taken, ambiguous reference, file exists
 * ├── InvalidState          409: e.g. exec on a stopped box
 * ├── CapacityExceeded      409: the server has no room for the box
 * │   └── StorageLow        507: the engine's disk is nearly full (no new boxes, snapshots)
 * ├── EngineUnavailable     503: the box engine is down
 * ├── DesktopFailed         502: the box's desktop did not start (message: its log tail)
 * ├── IsolationFailed       503: a box's network isolation could not be applied
 * └── ServerError           500: anything else the server reports
 * ```
 */

export class PaddockError extends Error {
  /** The API's stable error code (`not_found`, `invalid_state`, …). */
  static readonly code: string = "internal";
  readonly code: string;
  /** Structured extras the server sent (`details` of the error body), if any. */
  readonly details: unknown;
  /** The HTTP status of the answer that carried the error, when there was one. */
  readonly status: number | undefined;

  constructor(
    message: string,
    options: { code?: string; details?: unknown; status?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? (new.target as typeof PaddockError).code;
    this.details = options.details;
    this.status = options.status;
  }
}

export class ConnectionFailed extends PaddockError {
  static override readonly code: string = "connection_failed";
}
export class AuthenticationFailed extends PaddockError {
  static override readonly code: string = "unauthorized";
}
export class TooManyAttempts extends AuthenticationFailed {
  static override readonly code: string = "too_many_attempts";
}
export class Forbidden extends PaddockError {
  static override readonly code: string = "forbidden";
}
export class NotFound extends PaddockError {
  static override readonly code: string = "not_found";
}
export class InvalidRequest extends PaddockError {
  static override readonly code: string = "invalid_request";
}
export class PayloadTooLarge extends InvalidRequest {
  static override readonly code: string = "payload_too_large";
}
export class Conflict extends PaddockError {
  static override readonly code: string = "conflict";
}
export class InvalidState extends PaddockError {
  static override readonly code: string = "invalid_state";
}
export class CapacityExceeded extends PaddockError {
  static override readonly code: string = "capacity_exceeded";
}
export class StorageLow extends CapacityExceeded {
  static override readonly code: string = "storage_low";
}
export class EngineUnavailable extends PaddockError {
  static override readonly code: string = "engine_unavailable";
}
export class DesktopFailed extends PaddockError {
  static override readonly code: string = "desktop_failed";
}
export class IsolationFailed extends PaddockError {
  static override readonly code: string = "isolation_failed";
}
export class ServerError extends PaddockError {
  static override readonly code: string = "internal";
}

type ErrorClass = typeof PaddockError;

const BY_CODE: ReadonlyMap<string, ErrorClass> = new Map(
  [
    AuthenticationFailed,
    TooManyAttempts,
    Forbidden,
    NotFound,
    InvalidRequest,
    PayloadTooLarge,
    Conflict,
    InvalidState,
    CapacityExceeded,
    StorageLow,
    EngineUnavailable,
    DesktopFailed,
    IsolationFailed,
    ServerError,
  ].map((cls) => [cls.code, cls]),
);

/** An error without Paddock's body: another web server, or a proxy in front of one. */
function notPaddock(
  status: number,
  body: unknown,
  { server, path }: { server?: string; path?: string },
): ServerError {
  const at = path ? ` for ${path}` : "";
  if (status === 404 || status === 405) {
    // Paddock knows every /v1 path it is asked for.
    const what = `${server ?? "the URL"} does not look like a Paddock server`;
    return new ServerError(`${what} (HTTP ${status}${at})`, { status });
  }
  const text = String(typeof body === "string" ? body : JSON.stringify(body))
    .split(/\s+/)
    .filter(Boolean)
    .join(" ")
    .slice(0, 200);
  return new ServerError(`server answered HTTP ${status}${at}${text ? `: ${text}` : ""}`, {
    status,
  });
}

// Codes added by a newer server still land in the right branch of the tree.
const BY_STATUS: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [401, AuthenticationFailed],
  [404, NotFound],
  [409, Conflict],
  [413, PayloadTooLarge],
  [503, EngineUnavailable],
]);

/** Turn an API error body (`{"error": {"code", "message", "details"}}`) into an exception.
 * `where` (the server and the request's path) names what answered when it is not Paddock. */
export function errorFromBody(
  status: number,
  body: unknown,
  where: { server?: string; path?: string } = {},
): PaddockError {
  const err =
    typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof err !== "object" || err === null) return notPaddock(status, body, where);
  const {
    code: rawCode,
    message,
    details,
  } = err as {
    code?: unknown;
    message?: unknown;
    details?: unknown;
  };
  const code = typeof rawCode === "string" ? rawCode : "internal";
  const cls =
    BY_CODE.get(code) ??
    BY_STATUS.get(status) ??
    (status >= 400 && status < 500 ? InvalidRequest : ServerError);
  return new cls(typeof message === "string" ? message : "", { code, details, status });
}
