/** @paddock/sdk: the public API (a test checks this list against the docs and the parity map). */

export {
  Client,
  ExecStream,
  type ClientOptions,
  type Command,
  type DownloadOptions,
  type ExecOptions,
  type PullOptions,
  type PushOptions,
} from "./client.js";
export { ExecSession } from "./session.js";
export { configPath, DEFAULT_URL, loadConfig, type ClientConfig } from "./config.js";
export {
  AuthenticationFailed,
  CapacityExceeded,
  Conflict,
  ConnectionFailed,
  DesktopFailed,
  EngineUnavailable,
  Forbidden,
  errorFromBody,
  InvalidRequest,
  InvalidState,
  IsolationFailed,
  NotFound,
  PaddockError,
  PayloadTooLarge,
  ServerError,
  StorageLow,
  TooManyAttempts,
} from "./errors.js";
export type * from "./types.js";
export type { components, paths } from "./generated/api.js";
export { VERSION } from "./version.js";
