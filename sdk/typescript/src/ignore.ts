/** gitignore patterns (`.paddockignore` and `exclude`), matched the way git and the Python SDK's
 * pathspec do: the last matching pattern wins, `!` re-includes, a `/` anchors a pattern to the
 * pushed folder, a trailing `/` matches folders only, `**` spans folders. */

interface Rule {
  regex: RegExp;
  negate: boolean;
}

export class IgnoreSpec {
  private readonly rules: Rule[];

  constructor(lines: Iterable<string>) {
    this.rules = [];
    for (const line of lines) {
      const rule = compile(line);
      if (rule) this.rules.push(rule);
    }
  }

  get empty(): boolean {
    return this.rules.length === 0;
  }

  /** Whether `path` (relative, `/`-separated; a folder's with a trailing `/`) is excluded. */
  matches(path: string): boolean {
    let excluded = false;
    for (const rule of this.rules) {
      if (rule.regex.test(path)) excluded = !rule.negate;
    }
    return excluded;
  }
}

function compile(line: string): Rule | undefined {
  let p = line.replace(/(?<!\\)\s+$/, ""); // trailing blanks go, unless escaped
  if (!p || p.startsWith("#")) return undefined;
  const negate = p.startsWith("!");
  if (negate) p = p.slice(1);
  else if (p.startsWith("\\!") || p.startsWith("\\#")) p = p.slice(1);
  const dirOnly = p.endsWith("/");
  p = p.replace(/\/+$/, "");
  if (!p) return undefined;
  const anchored = p.includes("/");
  const segments = p.replace(/^\//, "").split("/");
  let re = anchored ? "^" : "^(?:.*/)?";
  segments.forEach((seg, i) => {
    const last = i === segments.length - 1;
    if (seg === "**") {
      re += last ? ".*" : "(?:.*/)?";
    } else {
      re += glob(seg) + (last ? "" : "/");
    }
  });
  re += dirOnly ? "/.*$" : "(?:/.*)?$";
  return { regex: new RegExp(re, "s"), negate };
}

/** One path segment's glob as a regex: `*` and `?` never cross a `/`. */
function glob(seg: string): string {
  let out = "";
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === "*") {
      out += "[^/]*";
    } else if (c === "?") {
      out += "[^/]";
    } else if (c === "\\" && i + 1 < seg.length) {
      out += escape(seg[++i]!);
    } else if (c === "[") {
      const close = seg.indexOf("]", i + 2);
      if (close === -1) {
        out += "\\[";
        continue;
      }
      let body = seg.slice(i + 1, close);
      const negated = body.startsWith("!") || body.startsWith("^");
      if (negated) body = body.slice(1);
      body = body.replace(/[\\\][^]/g, "\\$&"); // ranges (a-z) stay; the rest is literal
      out += negated ? `[^/${body}]` : `[${body}]`;
      i = close;
    } else {
      out += escape(c);
    }
  }
  return out;
}

function escape(c: string): string {
  return c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}
