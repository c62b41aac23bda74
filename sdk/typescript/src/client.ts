/** `Client`: every operation of the Paddock API as one method, named as in the Python SDK
 * (`create_box` → `createBox`). Each method builds one request and shapes its answer; sending
 * is `http.ts`'s job, archives `push.ts`'s and `pull.ts`'s. */

import type { IncomingMessage } from "node:http";
import { createReadStream, createWriteStream, existsSync, readFileSync } from "node:fs";
import { lstat, realpath, rename, rm } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { basename, dirname, isAbsolute, join, posix, relative, resolve, sep } from "node:path";

import { loadConfig } from "./config.js";
import { Conflict, ConnectionFailed, InvalidRequest } from "./errors.js";
import { ExecReader } from "./frames.js";
import { chunks, ndjson, sse, type Request, Transport } from "./http.js";
import { checkSource, isContents, type Kind, land, localDest, localSource } from "./placement.js";
import { extract } from "./pull.js";
import { planPush, tarStream } from "./push.js";
import { ExecSession } from "./session.js";
import type {
  Template,
  TemplateBuildOptions,
  TemplateDefaults,
  TemplateEvent,
  AgentInfo,
  CredentialUse,
  Secret,
  SshHostKey,
  SshKey,
  AuditEvent,
  ServerLogLine,
  Webhook,
  NewWebhook,
  Setting,
  WebhookDelivery,
  WebhookTest,
  Box,
  BoxCreate,
  BoxStats,
  BoxTypeList,
  BuildEvent,
  Credential,
  DesktopLink,
  DesktopRequest,
  Drive,
  Invite,
  Member,
  MemberLimits,
  Preview,
  MemberRemoved,
  NewToken,
  TokenInfo,
  EgressEvent,
  ExecEvent,
  ExecResult,
  FileList,
  FileStat,
  Health,
  ImageBuildRequest,
  NetworkSpec,
  NetworkSuggestion,
  PushResult,
  RunEvent,
  BoxEvent,
  RunInfo,
  RunRequest,
  ServerStatus,
  DeviceCode,
  DeviceToken,
  Snapshot,
  ForkList,
} from "./types.js";

export interface ClientOptions {
  /** The server, e.g. `https://paddock.example.com`. Default: `PADDOCK_URL`, else the CLI's
   * config file (`paddock login`), else `http://127.0.0.1:7423`. */
  url?: string;
  /** An API token. Default: `PADDOCK_TOKEN`, else the CLI's config file. */
  token?: string;
  /** Milliseconds a call may wait for the server to answer (and between the chunks of a
   * buffered answer); streams, once started, have no limit. Default 30 000. */
  timeout?: number;
}

/** A command: a string runs in `bash -lc` (as a person would type it), an array is the exact argv. */
export type Command = string | readonly string[];

export interface ExecOptions {
  env?: Record<string, string>;
  workdir?: string;
  user?: string;
}

export interface PushOptions {
  /** gitignore-style patterns left out (added to each folder's `.paddockignore`). */
  exclude?: readonly string[];
  /** Owner of what lands in the box, `[uid, gid]`. Default `[1000, 1000]` (the box user). */
  owner?: readonly [number, number];
  /** Called with the number of file bytes sent, as they are sent. */
  onProgress?: (bytes: number) => void;
}

export interface DownloadOptions {
  /** How a folder comes: `"zip"` (the default) or `"tar"`. A file comes as it is. */
  archive?: "zip" | "tar";
  /** Replace `dest` if it exists. */
  force?: boolean;
}

export interface PullOptions {
  /** Overwrite files that exist (folders are merged; a folder is never replaced by a file). */
  force?: boolean;
  /** gitignore patterns, matched below `src` (`node_modules/`, `.venv/`, `*.pyc`). */
  exclude?: readonly string[];
  /** Called with the number of archive bytes received, as they arrive. */
  onProgress?: (bytes: number) => void;
}

function argv(cmd: Command): string[] {
  return typeof cmd === "string" ? ["/bin/bash", "-lc", cmd] : [...cmd];
}

function execBody(cmd: Command, options: ExecOptions, extra: object = {}): object {
  const body: Record<string, unknown> = { cmd: argv(cmd), env: options.env ?? {}, ...extra };
  if (options.workdir) body.workdir = options.workdir;
  if (options.user) body.user = options.user;
  return body;
}

/** Drop undefined fields: the server applies its defaults to what is absent. */
function defined<T extends object>(obj: T): Partial<T> {
  return Object.fromEntries(Object.entries(obj).filter(([, v]) => v !== undefined)) as Partial<T>;
}

const seg = encodeURIComponent;

/** The output of a streamed exec: iterate it (once) for events as they happen; the last one is
 * `{type: "exit", exitCode}`, also kept in `exitCode`. Leaving the loop early disconnects, which
 * ends the command's stream. */
export class ExecStream implements AsyncIterable<ExecEvent> {
  exitCode: number | null = null;
  private started = false;

  constructor(private readonly open: () => Promise<IncomingMessage>) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<ExecEvent> {
    if (this.started) throw new InvalidRequest("an ExecStream can be iterated once");
    this.started = true;
    const reader = new ExecReader();
    for await (const chunk of chunks(await this.open())) {
      for (const event of reader.feed(chunk)) {
        this.exitCode = reader.exitCode;
        yield event;
      }
    }
    if (this.exitCode === null) {
      throw new ConnectionFailed("the exec stream ended before the command's exit code arrived");
    }
  }
}

export class Client {
  /** The server's URL, as used. */
  readonly url: string;
  readonly #http: Transport;

  constructor(options: ClientOptions = {}) {
    let { url, token } = options;
    if (url === undefined || token === undefined) {
      const config = loadConfig();
      url = url || config.url;
      token = token ?? config.token;
    }
    this.#http = new Transport(url, token, options.timeout ?? 30_000);
    this.url = this.#http.url;
  }

  /** Close the kept-alive connections (idle ones never keep the process alive anyway). */
  close(): void {
    this.#http.close();
  }

  /** `/v1/boxes/REF`. `current` is the box the CLI made or chose last (`paddock new`, `paddock
   * use`), read from its config file at each call, as the CLI does. */
  #box(ref: string): string {
    if (ref === "current") {
      const current = loadConfig().current;
      if (!current) {
        throw new InvalidRequest(
          "there is no current box: create one with `paddock new` or pick one with `paddock use BOX`",
        );
      }
      ref = current;
    }
    if (!ref || ref.includes("/"))
      throw new InvalidRequest(`invalid box reference ${JSON.stringify(ref)}`);
    return `/v1/boxes/${seg(ref)}`;
  }

  #call<T>(req: Request): Promise<T> {
    return this.#http.call<T>(req);
  }

  // -- server ---------------------------------------------------------------------------
  /** Liveness and version (needs no token). */
  health(): Promise<Health> {
    return this.#call({ method: "GET", path: "/v1/health" });
  }

  /** Server version, engine, capacity, and problems that need the admin's eye. */
  status(): Promise<ServerStatus> {
    return this.#call({ method: "GET", path: "/v1/status" });
  }

  /** Start a device login (needs no token): show `user_code` and `verification_uri` to a
   * person, then poll `deviceToken` every `interval` seconds. */
  deviceCode(client = "paddock TypeScript SDK"): Promise<DeviceCode> {
    return this.#call({ method: "POST", path: "/v1/device/code", json: { client } });
  }

  /** A device login's state: pending, approved (with the token, given once), denied or
   * expired. */
  deviceToken(deviceCode: string): Promise<DeviceToken> {
    return this.#call({
      method: "POST",
      path: "/v1/device/token",
      json: { device_code: deviceCode },
    });
  }

  boxTypes(): Promise<BoxTypeList> {
    return this.#call({ method: "GET", path: "/v1/types" });
  }

  /** Build the box image on the server; yields progress events as they happen. */
  async *buildImage(options: Partial<ImageBuildRequest> = {}): AsyncGenerator<BuildEvent> {
    const req: Request = {
      method: "POST",
      path: "/v1/images/build",
      json: options,
      wait: "stream",
    };
    yield* ndjson(await this.#http.open(req)) as AsyncGenerator<BuildEvent>;
  }

  // -- boxes ----------------------------------------------------------------------------
  /** Create and start a box. `drives`: names (or "name:ro") mounted at /mnt/NAME, created if
   * need be. `network`: allow-all, deny-all or allowlist (with `allow`: IPv4 addresses/CIDRs,
   * domains, *.domains). `agent`: the box's default agent for `prompt`. */
  async createBox(options: Partial<BoxCreate> = {}): Promise<Box> {
    return this.#call({ method: "POST", path: "/v1/boxes", json: defined(options), wait: "slow" });
  }

  async listBoxes(): Promise<Box[]> {
    return (await this.#call<{ boxes: Box[] }>({ method: "GET", path: "/v1/boxes" })).boxes;
  }

  async getBox(ref: string): Promise<Box> {
    return this.#call({ method: "GET", path: this.#box(ref) });
  }

  /** Stop the box; its files are kept in a snapshot. */
  async stopBox(ref: string): Promise<Box> {
    return this.#call({ method: "POST", path: `${this.#box(ref)}/stop`, wait: "slow" });
  }

  async resumeBox(ref: string): Promise<Box> {
    return this.#call({ method: "POST", path: `${this.#box(ref)}/resume`, wait: "slow" });
  }

  /** A new time to live in seconds, counted from now (0: none). */
  async extendBox(ref: string, ttl: number): Promise<Box> {
    return this.#call({ method: "POST", path: `${this.#box(ref)}/extend`, json: { ttl } });
  }

  /** Delete the box with its snapshots; `force` also deletes a running one. */
  async deleteBox(ref: string, options: { force?: boolean } = {}): Promise<void> {
    const query = options.force ? { force: "true" } : undefined;
    await this.#call({
      method: "DELETE",
      path: this.#box(ref),
      ...(query && { query }),
      wait: "slow",
    });
  }

  /** What the box's init and services wrote (its container's log), as text; `tail`: only the
   * last N lines. */
  async boxLogs(ref: string, options: { tail?: number } = {}): Promise<string> {
    const query = options.tail ? { tail: String(options.tail) } : undefined;
    const body = await this.#http.read({
      method: "GET",
      path: `${this.#box(ref)}/logs`,
      ...(query && { query }),
    });
    return body.toString("utf8");
  }

  /** What the box uses now: CPU (%, 100 = one CPU), memory, disk and processes against its
   * limits; a box that is not running has its state and no figures (nulls). */
  async boxStats(ref: string): Promise<BoxStats> {
    return this.#call({ method: "GET", path: `${this.#box(ref)}/stats` });
  }

  /** `boxStats` of every box, measured together (about a quarter second). */
  async stats(): Promise<BoxStats[]> {
    return (await this.#call<{ boxes: BoxStats[] }>({ method: "GET", path: "/v1/stats" })).boxes;
  }

  // -- snapshots, restore, fork ------------------------------------------------------------
  /** Snapshot the box's files now (a running box pauses only while its layer is written). */
  async snapshotBox(ref: string, label?: string): Promise<Snapshot> {
    return this.#call({
      method: "POST",
      path: `${this.#box(ref)}/snapshots`,
      json: { label: label ?? null },
      wait: "slow",
    });
  }

  async listSnapshots(ref: string): Promise<Snapshot[]> {
    const path = `${this.#box(ref)}/snapshots`;
    return (await this.#call<{ snapshots: Snapshot[] }>({ method: "GET", path })).snapshots;
  }

  async deleteSnapshot(ref: string, snapshot: string | number): Promise<void> {
    await this.#call({
      method: "DELETE",
      path: `${this.#box(ref)}/snapshots/${seg(String(snapshot))}`,
    });
  }

  /** Rewind the box's files to a snapshot (by id or label); drives are untouched. */
  async restoreBox(ref: string, snapshot: string | number): Promise<Box> {
    const json = { snapshot: String(snapshot) };
    return this.#call({ method: "POST", path: `${this.#box(ref)}/restore`, json, wait: "slow" });
  }

  /** A new box from this one's files, now or at a snapshot. */
  async forkBox(
    ref: string,
    options: { name?: string; snapshot?: string | number; type?: string } = {},
  ): Promise<Box> {
    const json = {
      name: options.name ?? null,
      snapshot: options.snapshot === undefined ? null : String(options.snapshot),
      type: options.type ?? null,
    };
    return this.#call({ method: "POST", path: `${this.#box(ref)}/fork`, json, wait: "slow" });
  }

  /** `count` new boxes from this one's files at once, named `namePrefix`-1 .. -N (or
   * generated names): all are made, or none. */
  async forkBoxes(
    ref: string,
    count: number,
    options: { namePrefix?: string; snapshot?: string | number; type?: string } = {},
  ): Promise<Box[]> {
    const json = {
      count,
      name_prefix: options.namePrefix ?? null,
      snapshot: options.snapshot === undefined ? null : String(options.snapshot),
      type: options.type ?? null,
    };
    const path = `${this.#box(ref)}/forks`;
    const list: ForkList = await this.#call({ method: "POST", path, json, wait: "slow" });
    return list.boxes;
  }

  // -- drives ---------------------------------------------------------------------------
  /** A new empty drive; `capacityMb`: the most it holds (absent: it grows within the
   * server's disk). */
  async createDrive(name: string, options: { capacityMb?: number } = {}): Promise<Drive> {
    const json = { name, capacity_mb: options.capacityMb ?? null };
    return this.#call({ method: "POST", path: "/v1/drives", json });
  }

  async listDrives(): Promise<Drive[]> {
    return (await this.#call<{ drives: Drive[] }>({ method: "GET", path: "/v1/drives" })).drives;
  }

  /** Delete your drive `name`; the owner names someone else's with `owner` (a username, or a
   * removed account's `owner_id` from `listDrives`). */
  async deleteDrive(name: string, options: { owner?: string } = {}): Promise<void> {
    const query = options.owner ? { owner: options.owner } : undefined;
    await this.#call({
      method: "DELETE",
      path: `/v1/drives/${seg(name)}`,
      ...(query && { query }),
    });
  }

  // -- previews -------------------------------------------------------------------------
  /** A URL for the web server on `port` in the box (on its 0.0.0.0 or 127.0.0.1). Private
   * unless `public`: the URL carries a secret. `ttl`: seconds until it ends (omitted: until
   * removed). Asking again for the same port makes a new URL; the old one dies. */
  createPreview(
    ref: string,
    port: number,
    options: { public?: boolean; ttl?: number } = {},
  ): Promise<Preview> {
    const json: Record<string, unknown> = { port, public: options.public ?? false };
    if (options.ttl) json.ttl = options.ttl;
    return this.#call({ method: "POST", path: `${this.#box(ref)}/previews`, json });
  }

  /** Your previews (the owner: everyone's), or one box's. */
  async listPreviews(ref?: string): Promise<Preview[]> {
    const path = ref === undefined ? "/v1/previews" : `${this.#box(ref)}/previews`;
    return (await this.#call<{ previews: Preview[] }>({ method: "GET", path })).previews;
  }

  /** End a preview: its URL stops working at once. */
  async deletePreview(previewId: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/previews/${seg(previewId)}` });
  }

  // -- tokens and members ---------------------------------------------------------------
  /** Your API tokens (the owner: everyone's), never the secrets. */
  async listTokens(): Promise<TokenInfo[]> {
    return (await this.#call<{ tokens: TokenInfo[] }>({ method: "GET", path: "/v1/tokens" }))
      .tokens;
  }

  /** A new API token of yours, valid `expiresIn` seconds (omitted: until revoked);
   * `token` is shown this once. `scope` "metrics": one that reads /metrics and nothing else
   * (the server owner's, for a Prometheus scraper). */
  createToken(name: string, expiresIn?: number, scope?: "metrics"): Promise<NewToken> {
    const json = {
      name,
      ...(expiresIn === undefined ? {} : { expires_in: expiresIn }),
      ...(scope === undefined ? {} : { scope }),
    };
    return this.#call({ method: "POST", path: "/v1/tokens", json });
  }

  /** Revoke a token: it stops working at once. */
  async deleteToken(tokenId: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/tokens/${seg(tokenId)}` });
  }

  /** A one-time link (7 days) that creates an account with `role` (owner only). */
  inviteMember(role: "member" | "owner" = "member"): Promise<Invite> {
    return this.#call({ method: "POST", path: "/v1/members/invites", json: { role } });
  }

  /** Replace a member's limits; each null or omitted means no limit of their own (owner
   * only). Running boxes keep running: the limits apply to the next create or resume. */
  setMemberLimits(username: string, limits: MemberLimits): Promise<Member> {
    return this.#call({
      method: "PUT",
      path: `/v1/members/${seg(username)}/limits`,
      json: {
        max_boxes: limits.max_boxes ?? null,
        max_cpus: limits.max_cpus ?? null,
        max_memory_mb: limits.max_memory_mb ?? null,
      },
    });
  }

  /** Everyone with an account (owner only). */
  async listMembers(): Promise<Member[]> {
    return (await this.#call<{ members: Member[] }>({ method: "GET", path: "/v1/members" }))
      .members;
  }

  /** Remove an account: its sessions end, tokens are revoked, running boxes stop; the boxes
   * are kept (owner only). */
  removeMember(username: string): Promise<MemberRemoved> {
    return this.#call({ method: "DELETE", path: `/v1/members/${seg(username)}`, wait: "slow" });
  }

  // -- network --------------------------------------------------------------------------
  async getNetwork(ref: string): Promise<NetworkSpec> {
    return this.#call({ method: "GET", path: `${this.#box(ref)}/network` });
  }

  /** Set the box's egress policy; it applies at once. An invalid one changes nothing. */
  async setNetwork(ref: string, mode: string, allow: readonly string[] = []): Promise<NetworkSpec> {
    const json = { mode, allow: [...allow] };
    return this.#call({ method: "PUT", path: `${this.#box(ref)}/network`, json });
  }

  /** The box's egress log: names looked up and destinations tried, with verdicts (the last
   * `limit` entries; 0: all that are kept). */
  async networkLog(ref: string, options: { limit?: number } = {}): Promise<EgressEvent[]> {
    const query = { limit: String(options.limit ?? 0) };
    const req: Request = { method: "GET", path: `${this.#box(ref)}/network/log`, query };
    return (await this.#call<{ events: EgressEvent[] }>(req)).events;
  }

  /** The log so far (the last `limit` entries), then each new entry as it happens. */
  async *followNetworkLog(
    ref: string,
    options: { limit?: number } = {},
  ): AsyncGenerator<EgressEvent> {
    const query = { limit: String(options.limit ?? 0), follow: "true" };
    const req: Request = {
      method: "GET",
      path: `${this.#box(ref)}/network/log`,
      query,
      wait: "stream",
    };
    yield* ndjson(await this.#http.open(req)) as AsyncGenerator<EgressEvent>;
  }

  /** An allowlist covering what the box reached, from its egress log. */
  async suggestNetwork(ref: string): Promise<NetworkSuggestion> {
    return this.#call({ method: "GET", path: `${this.#box(ref)}/network/suggest` });
  }

  // -- exec -----------------------------------------------------------------------------
  /** Run a command and stream its output (see `ExecStream`). The request is sent when the
   * iteration starts. */
  execStream(box: string, cmd: Command, options: ExecOptions = {}): ExecStream {
    return new ExecStream(() =>
      this.#http.open({
        method: "POST",
        path: `${this.#box(box)}/exec`,
        json: execBody(cmd, options),
        wait: "stream",
      }),
    );
  }

  /** Run a command to completion: its exit code and output (decoded as UTF-8). */
  async exec(box: string, cmd: Command, options: ExecOptions = {}): Promise<ExecResult> {
    const stream = this.execStream(box, cmd, options);
    const out: Record<"stdout" | "stderr", Buffer[]> = { stdout: [], stderr: [] };
    for await (const event of stream) {
      if (event.type !== "exit") out[event.type].push(event.data);
    }
    return {
      exit_code: stream.exitCode!,
      stdout: Buffer.concat(out.stdout).toString("utf8"),
      stderr: Buffer.concat(out.stderr).toString("utf8"),
    };
  }

  /** An interactive exec over a WebSocket: `send`, `closeStdin`, `resize`, iterate the output.
   * Needs the `ws` package. */
  async execSession(
    box: string,
    cmd: Command,
    options: ExecOptions & { tty?: boolean; cols?: number; rows?: number } = {},
  ): Promise<ExecSession> {
    const url = this.url.replace(/^http/, "ws") + `${this.#box(box)}/exec/ws`;
    const { tty = false, cols = null, rows = null } = options;
    const body = execBody(cmd, options, { tty, stdin: true, cols, rows });
    return ExecSession.open(url, this.#http.token, body);
  }

  /** Start a graphical program on the box's desktop (started first if need be). Resolves once
   * it started; with `wait`, once it ended, with its output. */
  async execDesktop(
    box: string,
    cmd: Command,
    options: { wait?: boolean; env?: Record<string, string>; workdir?: string } = {},
  ): Promise<ExecResult> {
    const wait = options.wait ?? false;
    const json = execBody(cmd, options, { desktop: true, detach: !wait });
    const path = `${this.#box(box)}/exec`;
    return this.#call({
      method: "POST",
      path,
      query: { wait: "true" },
      json,
      wait: wait ? "none" : "default",
    });
  }

  // -- desktop --------------------------------------------------------------------------
  /** A browser link to the box's desktop (short-lived, for this box only). */
  async desktopLink(ref: string, options: Partial<DesktopRequest> = {}): Promise<DesktopLink> {
    const json = { view_only: options.view_only ?? false, size: options.size ?? null };
    return this.#call({ method: "POST", path: `${this.#box(ref)}/desktop`, json });
  }

  /** A PNG of the box's desktop (started if need be); `size` ("1280x800") resizes it first. */
  async screenshot(ref: string, options: { size?: string } = {}): Promise<Buffer> {
    const query = options.size ? { size: options.size } : undefined;
    return this.#http.read({
      method: "GET",
      path: `${this.#box(ref)}/desktop/screenshot`,
      ...(query && { query }),
    });
  }

  async desktopClick(
    ref: string,
    x: number,
    y: number,
    options: { button?: number } = {},
  ): Promise<void> {
    await this.#input(ref, { action: "click", x, y, button: options.button ?? 1 });
  }

  async desktopType(ref: string, text: string): Promise<void> {
    await this.#input(ref, { action: "type", text });
  }

  /** A key or combination in xdotool's names: "Return", "ctrl+s", "alt+F4". */
  async desktopKey(ref: string, keys: string): Promise<void> {
    await this.#input(ref, { action: "key", keys });
  }

  async #input(ref: string, json: object): Promise<void> {
    await this.#call({ method: "POST", path: `${this.#box(ref)}/desktop/input`, json });
  }

  // -- files ----------------------------------------------------------------------------
  /** Whether a path exists in the box, and what it is (relative paths are under /config). */
  async stat(box: string, path: string): Promise<FileStat> {
    return this.#call({ method: "GET", path: `${this.#box(box)}/files/stat`, query: { path } });
  }

  /** Copy local files or folders into the box.
   *
   * By docker cp's rules, as the Python SDK: into `dest` when it is a folder in the box
   * (`SRC/.`: SRC's contents), else as `dest` (a folder SRC is created there with its
   * contents; `dest`'s folder must exist). Several sources go into the folder `dest`. A
   * `.paddockignore` (gitignore syntax) in a folder is honoured. */
  async push(
    box: string,
    sources: string | readonly string[],
    dest: string,
    options: PushOptions = {},
  ): Promise<PushResult> {
    const paths = typeof sources === "string" ? [sources] : [...sources];
    const exclude = [...(options.exclude ?? [])];
    const [uid, gid] = options.owner ?? [1000, 1000];
    const srcs = (await Promise.all(paths.map(localSource))).map(checkSource);
    // One SRC sent whole is its name on top of the tar; several, or a folder's contents,
    // go into DEST as a folder. The box places it by docker cp's rules, where it sees what
    // DEST is (no look first).
    const first = srcs[0]!;
    const whole = srcs.length === 1 && !isContents(first.path, true);
    const items = srcs.map((s): [string, string] => [
      s.path,
      whole || !isContents(s.path, true) ? s.name : "",
    ]);
    const plan = await planPush(items, exclude);
    const body = tarStream(plan, uid, gid, options.onProgress);
    const req: Request = {
      method: "PUT",
      path: `${this.#box(box)}/files/copy`,
      query: {
        path: dest,
        kind: whole ? first.kind : "into",
        name: whole ? first.name : "",
        owner: `${uid}:${gid}`,
      },
      body,
      contentType: "application/x-tar",
    };
    return await this.#call<PushResult>(req);
  }

  /** The bytes of file content `push` would send for these sources (no request is made). */
  async pushSize(
    sources: string | readonly string[],
    exclude: readonly string[] = [],
  ): Promise<number> {
    const paths = typeof sources === "string" ? [sources] : [...sources];
    const items = paths.map((p): [string, string] => [p, ""]);
    return (await planPush(items, [...exclude])).totalBytes;
  }

  /** Copy `src` out of the box to `dest` by the rules of `push` (`src/.`: its contents);
   * the path `src` became (for contents, the folder they went into).
   * Never writes outside `dest` nor through a symlink; links are kept as links (see `pull.ts`).
   * Written aside and moved into place when whole: a failed pull leaves `dest` as it was.
   * Refuses to overwrite unless `force`. */
  async pull(box: string, src: string, dest: string, options: PullOptions = {}): Promise<string> {
    const res = await this.#http.open({
      method: "GET",
      path: `${this.#box(box)}/files`,
      query: { path: src },
      wait: "stream",
    });
    const body = chunks(res);
    try {
      // What SRC is, as the box found it (X-Paddock-Stat), decides where it lands.
      const header = res.headers["x-paddock-stat"];
      const described = (
        typeof header === "string" ? JSON.parse(Buffer.from(header, "base64").toString()) : {}
      ) as { path?: string; type?: string };
      const root = posix.basename(described.path || posix.normalize(src)) || "/";
      const kind: Kind = described.type === "dir" ? "dir" : "file";
      const landing = land({ path: src, name: root, kind, local: false }, await localDest(dest));
      // Merging writes into the folder itself: by its real path, so that a link the user
      // named as DEST is followed, never replaced.
      const target = landing.merge ? await realpath(landing.path) : landing.path;
      await extract(body, root, target, {
        force: options.force ?? false,
        merge: landing.merge,
        exclude: options.exclude ?? [],
        onProgress: options.onProgress,
      });
      return target;
    } finally {
      await body.return(undefined);
    }
  }

  /** The entries of the folder `path` in the box, by name, as the box user reads them (at most
   * 5000: `truncated` says when there were more). */
  async listFiles(box: string, path = "/config"): Promise<FileList> {
    return this.#call({ method: "GET", path: `${this.#box(box)}/files/list`, query: { path } });
  }

  /** Save `src` from the box as the one local file `dest`, as the dashboard downloads it: a
   * file as it is, a folder as a zip (or tar) holding only what stays inside it (links that
   * lead out, devices and fifos are left out). Written to a partial file first, then renamed:
   * never half a file at `dest`. Replaces an existing `dest` only with `force`. */
  async download(
    box: string,
    src: string,
    dest: string,
    options: DownloadOptions = {},
  ): Promise<string> {
    const archive = options.archive ?? "zip";
    if (archive !== "zip" && archive !== "tar")
      throw new InvalidRequest(`archive is zip or tar, not ${JSON.stringify(archive)}`);
    return this.#saveTo(dest, options.force ?? false, {
      method: "GET",
      path: `${this.#box(box)}/files/download`,
      query: { path: src, format: archive },
      wait: "stream",
    });
  }

  /** Write the box's files and settings (or those of its `snapshot`) to the one file `dest`,
   * which `importBox` makes a box of, here or on another server. A running box keeps running
   * (its disk is copied under a freeze of milliseconds). Replaces `dest` only with `force`. */
  async exportBox(
    box: string,
    dest: string,
    options: { snapshot?: string | number; force?: boolean } = {},
  ): Promise<string> {
    const snapshot = options.snapshot === undefined ? undefined : String(options.snapshot);
    return this.#saveTo(dest, options.force ?? false, {
      method: "GET",
      path: `${this.#box(box)}/export`,
      query: { snapshot },
      wait: "stream",
    });
  }

  /** Make a new box of a file from `exportBox` and start it: named `name`, of `type` (default:
   * the exported box's). `rebase`: lay its files over this server's box image when the one
   * they were made over is not here. A damaged or cut file is refused (`bad_archive`) and
   * leaves nothing. */
  async importBox(
    source: string,
    options: { name?: string; type?: string; rebase?: boolean } = {},
  ): Promise<Box> {
    const there = await lstat(source).catch(() => null);
    if (!there?.isFile()) throw new InvalidRequest(`${source}: no such file`);
    return this.#call({
      method: "POST",
      path: "/v1/imports",
      query: {
        name: options.name,
        type: options.type,
        rebase: options.rebase ? "true" : undefined,
      },
      body: createReadStream(source) as AsyncIterable<Buffer>,
      contentType: "application/vnd.paddock.box+zstd",
      wait: "slow",
    });
  }

  /** The answer to `req`, written to `dest` whole or not at all. */
  async #saveTo(dest: string, force: boolean, req: Request): Promise<string> {
    const there = await lstat(dest).catch(() => null);
    if (there?.isDirectory())
      throw new InvalidRequest(`${dest} is a folder: give the file to write`);
    if (there && !force) throw new Conflict(`${dest} exists (force: true replaces it)`);
    const res = await this.#http.open(req);
    const partial = join(dirname(dest), `.${basename(dest)}.${process.pid}.part`);
    try {
      await pipeline(Readable.from(chunks(res)), createWriteStream(partial));
      await rename(partial, dest);
    } finally {
      await rm(partial, { force: true });
    }
    return dest;
  }

  // -- agents, runs, credentials ----------------------------------------------------------
  /** The coding agents in the box image, their versions, and whether a key is set. */
  async listAgents(): Promise<AgentInfo[]> {
    return (await this.#call<{ agents: AgentInfo[] }>({ method: "GET", path: "/v1/agents" }))
      .agents;
  }

  /** Start a coding agent headless in the box; it goes on if this client goes away. */
  async startRun(
    box: string,
    instruction: string,
    options: Partial<Omit<RunRequest, "instruction">> = {},
  ): Promise<RunInfo> {
    const json = { instruction, ...defined(options) };
    return this.#call({ method: "POST", path: `${this.#box(box)}/runs`, json });
  }

  async listRuns(box: string): Promise<RunInfo[]> {
    return (
      await this.#call<{ runs: RunInfo[] }>({ method: "GET", path: `${this.#box(box)}/runs` })
    ).runs;
  }

  async getRun(runId: string): Promise<RunInfo> {
    return this.#call({ method: "GET", path: `/v1/runs/${seg(runId)}` });
  }

  /** The run's output events so far, then (if `live`, the default) the rest as they come; the
   * last is `{status, exit_code}` once it ended. */
  async *followRun(runId: string, options: { live?: boolean } = {}): AsyncGenerator<RunEvent> {
    const query = { follow: options.live === false ? "false" : "true" };
    const req: Request = {
      method: "GET",
      path: `/v1/runs/${seg(runId)}/log`,
      query,
      wait: "stream",
    };
    yield* ndjson(await this.#http.open(req)) as AsyncGenerator<RunEvent>;
  }

  /** Your boxes as they change: first `boxes` (every box you see), then `box` for each change
   * and `box-removed`. The server ends the stream after 15 minutes: call again to go on. */
  async *followEvents(): AsyncGenerator<BoxEvent> {
    const req: Request = { method: "GET", path: "/v1/events", wait: "stream" };
    yield* sse(await this.#http.open(req)) as AsyncGenerator<BoxEvent>;
  }

  async stopRun(runId: string): Promise<RunInfo> {
    return this.#call({ method: "POST", path: `/v1/runs/${seg(runId)}/stop` });
  }

  /** Run an agent to completion: its output and exit code (-1 when it has none). */
  async prompt(
    box: string,
    instruction: string,
    options: Partial<Omit<RunRequest, "instruction" | "json">> = {},
  ): Promise<ExecResult> {
    const run = await this.startRun(box, instruction, options);
    const out = { stdout: "", stderr: "" };
    let code = -1;
    for await (const event of this.followRun(run.id)) {
      if ("stream" in event) out[event.stream] += event.data;
      else if ("status" in event) code = event.exit_code ?? -1;
    }
    return { exit_code: code, ...out };
  }

  /** Store a provider's API key on the server (encrypted; it is never sent back). */
  /** Your templates and the ones shared with everyone. */
  async listTemplates(): Promise<Template[]> {
    return (await this.#call<{ templates: Template[] }>({ method: "GET", path: "/v1/templates" }))
      .templates;
  }

  async getTemplate(name: string): Promise<Template> {
    return this.#call({ method: "GET", path: `/v1/templates/${seg(name)}` });
  }

  /** Start building a template from a Dockerfile (`CONTEXT/Dockerfile` unless given) in a
   * build box of yours; the context folder goes as a tar (`.dockerignore` honoured). Returns
   * at once: follow it with `followTemplateBuild`. */
  async buildTemplate(
    name: string,
    context: string = ".",
    options: TemplateBuildOptions = {},
  ): Promise<Template> {
    const ignore = join(context, ".dockerignore");
    const exclude = existsSync(ignore) ? readFileSync(ignore, "utf8").split("\n") : [];
    const items: [string, string][] = [[context, ""]];
    let inside = "Dockerfile";
    if (options.dockerfile !== undefined) {
      const rel = relative(resolve(context), resolve(options.dockerfile));
      if (rel.startsWith("..") || isAbsolute(rel)) {
        inside = ".paddock-dockerfile";
        items.push([options.dockerfile, inside]);
      } else inside = rel.split(sep).join("/");
    }
    const pairs = (m?: Record<string, string>) =>
      Object.entries(m ?? {}).map(([k, v]) => `${k}=${v}`);
    const d = options.defaults ?? {};
    const query: Record<string, string | string[] | undefined> = {
      dockerfile: inside,
      from: options.from,
      build_arg: pairs(options.buildArgs),
      type: options.type,
      network: options.network,
      allow: [...(options.allow ?? [])],
      timeout: options.timeout === undefined ? undefined : String(options.timeout),
      env: pairs(options.env),
      start_cmd: options.startCmd,
      default_type: d.type ?? undefined,
      default_ttl: d.ttl == null ? undefined : String(d.ttl),
      default_network: d.network ?? undefined,
      default_allow: [...(d.allow ?? [])],
      default_drive: [...(d.drives ?? [])],
      default_idle_stop: d.idle_stop == null ? undefined : String(d.idle_stop),
    };
    const plan = await planPush(items, exclude);
    return this.#call({
      method: "POST",
      path: `/v1/templates/${seg(name)}/build`,
      query,
      body: tarStream(plan, 0, 0),
      contentType: "application/x-tar",
      wait: "slow",
    });
  }

  /** The template's last build, so far and (unless `live: false`) as it goes. */
  async *followTemplateBuild(
    name: string,
    options: { live?: boolean } = {},
  ): AsyncGenerator<TemplateEvent> {
    const query = { follow: options.live === false ? "false" : "true" };
    const req: Request = {
      method: "GET",
      path: `/v1/templates/${seg(name)}/log`,
      query,
      wait: "stream",
    };
    yield* ndjson(await this.#http.open(req)) as AsyncGenerator<TemplateEvent>;
  }

  /** A template of a box's files as they are now (or as `snapshot` keeps them). */
  async createTemplate(
    name: string,
    box: string,
    options: {
      snapshot?: string;
      env?: Record<string, string>;
      startCmd?: string;
      defaults?: TemplateDefaults;
    } = {},
  ): Promise<Template> {
    const json = {
      name,
      box,
      snapshot: options.snapshot ?? null,
      env: Object.entries(options.env ?? {}).map(([k, v]) => `${k}=${v}`),
      start_cmd: options.startCmd ?? null,
      defaults: options.defaults ?? {},
    };
    return this.#call({ method: "POST", path: "/v1/templates", json, wait: "slow" });
  }

  /** Build it again from its Dockerfile and context, on today's box image. */
  async rebuildTemplate(name: string): Promise<Template> {
    return this.#call({ method: "POST", path: `/v1/templates/${seg(name)}/rebuild` });
  }

  /** Share one of your templates with everyone on the server (the owner's), or stop. */
  async shareTemplate(name: string, shared = true): Promise<Template> {
    return this.#call({
      method: "PUT",
      path: `/v1/templates/${seg(name)}/shared`,
      json: { shared },
    });
  }

  async deleteTemplate(name: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/templates/${seg(name)}` });
  }

  /** Store a provider's API key on the server. `mode`: "gateway" (the default: boxes get a
   * placeholder, the credential gateway adds the key on the way out) or "env". */
  async setCredential(
    provider: string,
    key: string,
    options: { base_url?: string; mode?: "gateway" | "env" } = {},
  ): Promise<Credential> {
    const json = { key, base_url: options.base_url ?? null, mode: options.mode ?? null };
    return this.#call({ method: "PUT", path: `/v1/auth/${seg(provider)}`, json });
  }

  /** Your provider keys' uses through the credential gateway (and refusals), newest first. */
  async credentialLog(
    options: { provider?: string; box?: string; limit?: number } = {},
  ): Promise<CredentialUse[]> {
    const { provider, ...rest } = options;
    return this.#uses("/v1/auth/log", { ...rest, ...(provider && { provider }) });
  }

  /** Store a secret bound to `hosts`: a box it is attached to holds a placeholder in `$name`,
   * and HTTPS requests to those hosts carrying it get the value in its place. Without a
   * `value`, the stored one is kept (to change the hosts). */
  async setSecret(
    name: string,
    hosts: string[],
    options: { value?: string; header?: string; format?: string } = {},
  ): Promise<Secret> {
    const json = {
      hosts,
      value: options.value ?? null,
      header: options.header ?? null,
      format: options.format ?? null,
    };
    return this.#call({ method: "PUT", path: `/v1/secrets/${seg(name)}`, json });
  }

  /** Calls that changed something or were refused, newest first: the owner's view holds
   * everyone's (`user`: one username's, or `anonymous`), a member's their own. `box`: calls
   * that named it; `since`/`until`: ISO 8601 times. */
  async audit(
    options: { user?: string; box?: string; since?: string; until?: string; limit?: number } = {},
  ): Promise<AuditEvent[]> {
    const query: Record<string, string> = {};
    for (const [key, value] of Object.entries(options)) {
      if (value !== undefined) query[key] = String(value);
    }
    const path = "/v1/audit";
    return (await this.#call<{ events: AuditEvent[] }>({ method: "GET", path, query })).events;
  }

  /** paddockd's last log messages, oldest first (the server owner's; secrets masked). */
  async serverLog(lines = 100): Promise<ServerLogLine[]> {
    const query = { lines: String(lines) };
    return (await this.#call<{ lines: ServerLogLine[] }>({ method: "GET", path: "/v1/log", query }))
      .lines;
  }

  /** POST your box events, signed, to `url` (the server owner's: every box's); `events`:
   * which types (none: all). The result holds the signing secret, shown this once. */
  /** The server's settings, with where each value comes from (the server owner's). */
  async settings(): Promise<Setting[]> {
    return (await this.#call<{ settings: Setting[] }>({ method: "GET", path: "/v1/settings" }))
      .settings;
  }

  async getSetting(key: string): Promise<Setting> {
    return this.#call({ method: "GET", path: `/v1/settings/${seg(key)}` });
  }

  /** Change a setting while the server runs (kept over paddockd.toml's value until reset).
   * `value`: JSON, or text as on a command line ("2h", "small=2"). */
  async setSetting(key: string, value: unknown): Promise<Setting> {
    return this.#call({ method: "PUT", path: `/v1/settings/${seg(key)}`, json: { value } });
  }

  /** Back to paddockd.toml's value (or the default). */
  async resetSetting(key: string): Promise<Setting> {
    return this.#call({ method: "DELETE", path: `/v1/settings/${seg(key)}` });
  }

  async addWebhook(url: string, events: string[] = []): Promise<NewWebhook> {
    return this.#call({ method: "POST", path: "/v1/webhooks", json: { url, events } });
  }

  async listWebhooks(): Promise<Webhook[]> {
    return (await this.#call<{ webhooks: Webhook[] }>({ method: "GET", path: "/v1/webhooks" }))
      .webhooks;
  }

  async deleteWebhook(id: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/webhooks/${seg(id)}` });
  }

  /** Send a `webhook.test` event at once (tried once): what the receiver answered. */
  async testWebhook(id: string): Promise<WebhookTest> {
    return this.#call({ method: "POST", path: `/v1/webhooks/${seg(id)}/test` });
  }

  /** The webhook's last deliveries, newest first. */
  async webhookDeliveries(id: string, limit = 50): Promise<WebhookDelivery[]> {
    const path = `/v1/webhooks/${seg(id)}/deliveries`;
    const query = { limit: String(limit) };
    return (await this.#call<{ deliveries: WebhookDelivery[] }>({ method: "GET", path, query }))
      .deliveries;
  }

  async listSshKeys(): Promise<SshKey[]> {
    return (await this.#call<{ keys: SshKey[] }>({ method: "GET", path: "/v1/ssh-keys" })).keys;
  }

  /** Register an OpenSSH public key (one line, as in `id_ed25519.pub`) that may log in to
   * your boxes over `paddock ssh`. */
  async addSshKey(name: string, publicKey: string): Promise<SshKey> {
    return this.#call({
      method: "PUT",
      path: `/v1/ssh-keys/${seg(name)}`,
      json: { public_key: publicKey },
    });
  }

  async deleteSshKey(name: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/ssh-keys/${seg(name)}` });
  }

  /** The box's SSH host key, for a pinned known_hosts line. */
  async boxSshHostKey(box: string): Promise<SshHostKey> {
    return this.#call({ method: "GET", path: `${this.#box(box)}/ssh` });
  }

  async listSecrets(): Promise<Secret[]> {
    return (await this.#call<{ secrets: Secret[] }>({ method: "GET", path: "/v1/secrets" }))
      .secrets;
  }

  async deleteSecret(name: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/secrets/${seg(name)}` });
  }

  /** The secrets attached to the box. */
  async boxSecrets(box: string): Promise<string[]> {
    const path = `${this.#box(box)}/secrets`;
    return (await this.#call<{ secrets: string[] }>({ method: "GET", path })).secrets;
  }

  async attachSecret(box: string, name: string): Promise<string[]> {
    const path = `${this.#box(box)}/secrets/${seg(name)}`;
    return (await this.#call<{ secrets: string[] }>({ method: "PUT", path })).secrets;
  }

  async detachSecret(box: string, name: string): Promise<string[]> {
    const path = `${this.#box(box)}/secrets/${seg(name)}`;
    return (await this.#call<{ secrets: string[] }>({ method: "DELETE", path })).secrets;
  }

  /** Your secrets' uses through the credential gateway (and refusals), newest first. */
  async secretLog(
    options: { name?: string; box?: string; limit?: number } = {},
  ): Promise<CredentialUse[]> {
    return this.#uses("/v1/secrets/log", options);
  }

  async #uses(
    path: string,
    given: Record<string, string | number | undefined>,
  ): Promise<CredentialUse[]> {
    const query = Object.fromEntries(
      Object.entries(given)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]) => [k, String(v)]),
    );
    return (await this.#call<{ uses: CredentialUse[] }>({ method: "GET", path, query })).uses;
  }

  async listCredentials(): Promise<Credential[]> {
    return (await this.#call<{ providers: Credential[] }>({ method: "GET", path: "/v1/auth" }))
      .providers;
  }

  async deleteCredential(provider: string): Promise<void> {
    await this.#call({ method: "DELETE", path: `/v1/auth/${seg(provider)}` });
  }

  /** The providers whose keys the box's commands get. */
  async boxCredentials(box: string): Promise<string[]> {
    return (
      await this.#call<{ providers: string[] }>({ method: "GET", path: `${this.#box(box)}/auth` })
    ).providers;
  }

  /** The box's commands get this provider's key from now on; returns what is attached. */
  async attachCredential(box: string, provider: string): Promise<string[]> {
    const path = `${this.#box(box)}/auth/${seg(provider)}`;
    return (await this.#call<{ providers: string[] }>({ method: "PUT", path })).providers;
  }

  async detachCredential(box: string, provider: string): Promise<string[]> {
    const path = `${this.#box(box)}/auth/${seg(provider)}`;
    return (await this.#call<{ providers: string[] }>({ method: "DELETE", path })).providers;
  }
}
