/** Where the client finds its server URL, token and `current` box: the same places, in the same
 * order, as the Python SDK and the `paddock` CLI (`paddock._config`). */

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export const DEFAULT_URL = "http://127.0.0.1:7423";

export interface ClientConfig {
  url: string;
  token: string | undefined;
  current: string | undefined;
}

/** The CLI's config file: `$PADDOCK_CONFIG`, else `%APPDATA%\paddock\config.json` on Windows,
 * else `$XDG_CONFIG_HOME/paddock/config.json` (default `~/.config/paddock/config.json`). */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.PADDOCK_CONFIG) return env.PADDOCK_CONFIG;
  const base =
    process.platform === "win32"
      ? (env.APPDATA ?? homedir())
      : (env.XDG_CONFIG_HOME ?? join(homedir(), ".config"));
  return join(base, "paddock", "config.json");
}

/** The file's settings, with `PADDOCK_URL` / `PADDOCK_TOKEN` over them (the environment wins, so
 * scripts and CI can point elsewhere). A missing or unreadable file means the defaults. Read
 * synchronously: it is a few hundred bytes, read once per client (and per `current`). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ClientConfig {
  let data: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(readFileSync(configPath(env), "utf8"));
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      data = parsed as Record<string, unknown>;
    }
  } catch {
    // No file (never logged in) or a broken one: the defaults, as the CLI does.
  }
  const text = (value: unknown): string | undefined => (value ? String(value) : undefined);
  return {
    url: env.PADDOCK_URL || text(data.url) || DEFAULT_URL,
    token: env.PADDOCK_TOKEN ?? text(data.token),
    current: text(data.current),
  };
}
