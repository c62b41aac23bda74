/** The API's models, named: aliases of the types generated from `spec/openapi.json`, so objects
 * come and go exactly as the API writes them (snake_case fields, dates as ISO 8601 strings). */

import type { components, paths } from "./generated/api.js";

type Schemas = components["schemas"];

export type Box = Schemas["Box"];
export type BoxCreate = Schemas["BoxCreate"];
export type BoxStats = Schemas["BoxStats"];
export type BoxType = Schemas["BoxType"];
export type BoxTypeList = Schemas["BoxTypeList"];
export type Snapshot = Schemas["Snapshot"];
export type ForkList = Schemas["ForkList"];
export type Drive = Schemas["Drive"];
export type NetworkSpec = Schemas["NetworkSpec"];
export type EgressEvent = Schemas["EgressEvent"];
export type NetworkSuggestion = Schemas["NetworkSuggestion"];
export type DesktopLink = Schemas["DesktopLink"];
export type DesktopRequest = Schemas["DesktopRequest"];
export type Credential = Schemas["Credential"];
export type CredentialUse = Schemas["CredentialUse"];
export type Secret = Schemas["Secret"];
export type SshKey = Schemas["SshKey"];
export type AuditEvent = Schemas["AuditEvent"];
export type ServerLogLine = Schemas["ServerLogLine"];
export type Setting = Schemas["Setting"];
export type Webhook = Schemas["Webhook"];
export type NewWebhook = Schemas["NewWebhook"];
export type WebhookDelivery = Schemas["WebhookDelivery"];
export type WebhookTest = Schemas["WebhookTest"];
export type SshHostKey = Schemas["SshHostKey"];
export type Template = Schemas["Template"];
export type TemplateDefaults = Schemas["TemplateDefaults"];

/** What `buildTemplate` takes beside the context folder. */
export interface TemplateBuildOptions {
  /** A path (default CONTEXT/Dockerfile); one outside the context is sent beside it. */
  dockerfile?: string;
  /** A template of yours to build on, whatever the Dockerfile's FROM says. */
  from?: string;
  buildArgs?: Record<string, string>;
  /** The build box's type, egress and deadline (seconds). */
  type?: string;
  network?: "allow-all" | "deny-all" | "allowlist";
  allow?: readonly string[];
  timeout?: number;
  /** What boxes made from the template get. */
  env?: Record<string, string>;
  startCmd?: string;
  defaults?: TemplateDefaults;
}

/** A build's log: output of its steps, then how it ended. */
export type TemplateEvent =
  | { seq: number; stream: "note" | "step" | "stdout" | "stderr"; data: string }
  | { seq: number; status: "ready" | "failed"; message: string };
export type AgentInfo = Schemas["AgentInfo"];
export type RunInfo = Schemas["RunInfo"];
export type RunRequest = Schemas["RunRequest"];
export type PushResult = Schemas["PushResult"];
export type FileList = Schemas["FileList"];
export type FileEntry = Schemas["FileEntry"];
export type ServerStatus = Schemas["ServerStatus"];
export type DeviceCode = Schemas["DeviceCode"];
export type DeviceToken = Schemas["DeviceToken"];
export type TokenInfo = Schemas["TokenInfo"];
export type NewToken = Schemas["NewToken"];
export type Invite = Schemas["Invite"];
export type Member = Schemas["Member"];
export type MemberLimits = Schemas["MemberLimits"];
export type Preview = Schemas["Preview"];
export type MemberRemoved = Schemas["MemberRemoved"];
export type EngineStatus = Schemas["EngineStatus"];
export type Capacity = Schemas["Capacity"];
export type PoolStatus = Schemas["PoolStatus"];
export type ImageBuildRequest = Schemas["ImageBuildRequest"];

/** The JSON answer of a successful `METHOD path`, read from the spec (for routes whose answer
 * has no named model yet: as the spec gains one, these types follow). */
type Answer<P extends keyof paths, M extends "get" | "post"> = paths[P][M] extends {
  responses: { 200: { content: { "application/json": infer T } } };
}
  ? T
  : never;

/** `stat`: whether a path exists in the box, and what it is. */
export type FileStat = Answer<"/v1/boxes/{ref}/files/stat", "get">;
/** `health`: liveness and the server's version. */
export type Health = Answer<"/v1/health", "get">;

/** A command run to completion (the answer of `exec ?wait=true`). */
export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
}

/** One event of a streamed exec: output as it is produced, then the exit code, last. */
export type ExecEvent =
  | { type: "stdout"; data: Buffer }
  | { type: "stderr"; data: Buffer }
  | { type: "exit"; exitCode: number };

/** One event of an agent run's log: output, then (last) how it ended. */
export type RunEvent =
  | { seq: number; stream: "stdout" | "stderr"; data: string }
  | { seq: number; status: string; exit_code: number | null };

/** Something that happened to a box (`box-event`, and what a webhook receives): `type` is
 * box.created, box.started, box.stopped (`data.reason`: user, ttl, idle), box.deleted,
 * box.error, snapshot.taken, run.finished or egress.refused; `at` a Unix time. */
export interface PaddockEvent {
  id: string;
  type: string;
  at: number;
  box: { id: string; name: string };
  data: Record<string, string | number | null>;
}

/** One event of `followEvents` (GET /v1/events): every box you see, then each change. */
export type BoxEvent =
  | { event: "boxes"; data: Schemas["BoxList"] }
  | { event: "box"; data: Box }
  | { event: "box-removed"; data: { id: string } }
  | { event: "box-event"; data: PaddockEvent };

/** One event of an image build: progress lines, then `done` (failures are thrown). */
export type BuildEvent =
  | { step: string; line: string }
  | { done: true; image: string; seconds: number }
  | Record<string, unknown>;
