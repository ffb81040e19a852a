// Turns what the Claude Agent SDK tells us about a blocked action into
// violation frames. The SDK has no single "blocked" event: permission
// denials arrive in result.permission_denials and system/permission_denied
// messages, network blocks as a <sandbox_violations> block in the tool
// result, and filesystem blocks on Linux only as ordinary errno text
// (ENOENT for a path hidden by denyRead, EROFS for a write outside
// allowWrite) — sometimes inside a Bash result that ended with status 0.

import { posix } from "node:path";

export type Kind = "filesystem" | "network" | "permission" | "tool";

export interface Violation {
  type: "violation";
  kind: Kind;
  tool: string;
  target: string;
  detail: string;
  // "reported": seen only in a tool's output, which the agent's commands can
  // print at will; without it the daemon records the action as blocked.
  action?: "reported";
}

// seen marks a refusal read from a tool's error text: the SDK's own words
// for its file tools, but anything a command printed for Bash.
function seen(tool: string): { action?: "reported" } {
  return tool === "Bash" ? { action: "reported" } : {};
}

export interface DetectorPolicy {
  // Whether Bash runs in the SDK sandbox; errno text means nothing otherwise.
  sandboxed: boolean;
  // Paths and globs the agent may not read or write (absolute, or ~/...).
  denied: string[];
  // The home directory that ~ in those entries stands for.
  home: string;
  // The agent's working directory (the group's folder), for relative paths.
  cwd: string;
}

// A path in an error message, absolute or relative ("logs/x" from
// "bash: line 1: logs/x: Read-only file system"), as a whole word.
const FS_AFTER_PATH =
  /(?:^|[\s'"`])((?:~|\.{1,2})?\/?[^\s'"`:]+)['"`]?: (No such file or directory|Read-only file system|Operation not permitted|Permission denied)/gm;
const FS_BEFORE_PATH =
  /(No such file or directory|Read-only file system|Operation not permitted|Permission denied): ['"`]?((?:~|\.{1,2})?\/?[^\s'"`]+)/g;
// A path in a shell command: absolute, ~ or ./ based, or relative with a slash.
const COMMAND_PATH = /(?:^|[\s'"=<>|;&(])((?:~|\.{1,2})?\/[^\s'"`;|&<>()]*|[A-Za-z0-9_][A-Za-z0-9_.-]*\/[^\s'"`;|&<>()]*)/g;
const SANDBOX_BLOCK = /<sandbox_violations>([\s\S]*?)<\/sandbox_violations>/g;
const PERMISSION_TEXT =
  /denied by your permission settings|haven't granted it yet|permission to use .* (?:has been|was) denied|blocked by (?:a )?(?:permission|deny) rule/i;
const NO_TOOL_TEXT = /No such tool available/i;

export class ViolationDetector {
  private seen = new Set<string>();
  private reportedToolUses = new Set<string>();
  private readonly denied: RegExp[];

  constructor(
    private readonly policy: DetectorPolicy,
    private readonly emit: (v: Violation) => void,
  ) {
    this.denied = policy.denied.map((p) => pathPattern(p, policy.home));
  }

  // report emits v unless the same kind/tool/target was already reported in this run.
  report(v: Omit<Violation, "type">, toolUseId?: string): void {
    if (toolUseId) this.reportedToolUses.add(toolUseId);
    const key = `${v.kind}\u0000${v.tool}\u0000${v.target}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.emit({ type: "violation", ...v, detail: clip(v.detail) });
  }

  // fromToolText scans what a tool returned (an error or its output) for
  // signs of a blocked action. Permission wording only counts in an error:
  // a successful result may quote anything.
  fromToolText(tool: string, input: unknown, text: string, isError: boolean, toolUseId?: string): void {
    if (!text) return;
    if (!isError) {
      // fall through to the sandbox checks only
    } else if (PERMISSION_TEXT.test(text)) {
      this.report({ kind: "permission", tool, target: this.targetOf(input), detail: firstLine(text), ...seen(tool) }, toolUseId);
    } else if (NO_TOOL_TEXT.test(text)) {
      this.report({ kind: "tool", tool, target: this.targetOf(input), detail: firstLine(text), ...seen(tool) }, toolUseId);
    }
    if (!this.policy.sandboxed) return;

    for (const block of text.matchAll(SANDBOX_BLOCK)) {
      for (const line of block[1].split("\n")) {
        const m = /deny\s+(\S+)\s+(\S+)/.exec(line.trim());
        if (!m) continue;
        if (m[1].startsWith("network")) {
          this.report({ kind: "network", tool, target: hostOf(m[2]), detail: line.trim(), action: "reported" }, toolUseId);
        } else {
          this.report({ kind: "filesystem", tool, target: m[2], detail: line.trim(), action: "reported" }, toolUseId);
        }
      }
    }
    // A command already reported for naming a hidden path needs no second
    // frame for the errno that attempt caused.
    if (toolUseId && this.reportedToolUses.has(toolUseId)) return;
    const hits: Array<[string, string]> = [];
    for (const m of text.matchAll(FS_AFTER_PATH)) hits.push([m[1], m[2]]);
    for (const m of text.matchAll(FS_BEFORE_PATH)) hits.push([m[2], m[1]]);
    for (const [raw, why] of hits) {
      const path = this.resolve(raw, this.policy.cwd);
      // A write outside allowWrite is read-only inside the sandbox, so EROFS
      // always means the sandbox said no; a missing or forbidden file only
      // counts when the path is one the policy hides.
      if (why === "Read-only file system" || this.isDenied(path)) {
        this.report({ kind: "filesystem", tool, target: path, detail: `${path}: ${why}`, action: "reported" }, toolUseId);
      }
    }
  }

  // fromCommand reports every path in a sandboxed shell command that the
  // policy hides. The sandbox makes a denied folder an empty tmpfs, so a
  // write there "succeeds" into nothing and a read finds nothing: often no
  // error text at all, yet the command tried to cross the boundary.
  fromCommand(tool: string, command: string, cwd: string, toolUseId?: string): void {
    if (!this.policy.sandboxed) return;
    for (const m of command.matchAll(COMMAND_PATH)) {
      const p = this.resolve(m[1], cwd);
      if (this.isDenied(p)) {
        this.report({ kind: "filesystem", tool, target: p, detail: `command reaches a path the sandbox hides: ${firstLine(command)}` }, toolUseId);
      }
    }
  }

  // fromInputPath reports a file tool aimed at a hidden path that the
  // permission rules did not catch as such: a sandboxed agent's ~ is its own
  // session home, so "~/.ssh/id" misses the operator's key, but that is the
  // key it was after.
  fromInputPath(tool: string, input: unknown, cwd: string, toolUseId?: string): void {
    if (!this.policy.sandboxed || !input || typeof input !== "object") return;
    if (toolUseId && this.reportedToolUses.has(toolUseId)) return;
    for (const k of ["file_path", "notebook_path", "path"]) {
      const v = (input as Record<string, unknown>)[k];
      if (typeof v !== "string" || v === "") continue;
      const p = this.resolve(v, cwd);
      if (this.isDenied(p)) {
        this.report({ kind: "filesystem", tool, target: p, detail: `${tool} aimed at a path the sandbox hides: ${v}` }, toolUseId);
      }
    }
  }

  // targetOf picks what a tool call was aimed at from its input; a file
  // path is made absolute the way resolve does.
  private targetOf(input: unknown): string {
    if (input && typeof input === "object") {
      const o = input as Record<string, unknown>;
      for (const k of ["file_path", "notebook_path", "path"]) {
        if (typeof o[k] === "string" && o[k] !== "") return this.resolve(o[k] as string, this.policy.cwd);
      }
      for (const k of ["url", "command", "pattern", "query"]) {
        if (typeof o[k] === "string") return o[k] as string;
      }
    }
    return "";
  }

  // resolve makes p absolute: ~ is the operator's home (what the policy's
  // ~ entries mean), a relative path is taken from cwd.
  private resolve(p: string, cwd: string): string {
    if (p === "~" || p.startsWith("~/")) return posix.normalize(this.policy.home + p.slice(1));
    return posix.resolve(cwd, p);
  }

  // fromDenial reports one entry of result.permission_denials, unless the
  // same tool call was already reported from its tool result.
  fromDenial(toolName: string, toolUseId: string, input: unknown): void {
    if (this.reportedToolUses.has(toolUseId)) return;
    this.report(
      { kind: "permission", tool: toolName, target: this.targetOf(input), detail: `${toolName} was refused by the permission rules` },
      toolUseId,
    );
  }

  isDenied(path: string): boolean {
    return this.denied.some((re) => re.test(path));
  }
}

// permissionRulePaths extracts the paths of Read(...)/Edit(...)/Write(...)
// deny rules ("//abs/**" is an absolute path in rule syntax; "~/x" is home).
export function permissionRulePaths(rules: unknown): string[] {
  if (!Array.isArray(rules)) return [];
  const out: string[] = [];
  for (const r of rules) {
    const m = typeof r === "string" ? /^(?:Read|Edit|Write)\((.+)\)$/.exec(r) : null;
    if (!m) continue;
    const p = m[1];
    if (p.startsWith("//")) out.push(p.slice(1));
    else if (p.startsWith("~/")) out.push(p);
  }
  return out;
}

// pathPattern matches a path equal to or inside p, where p may be a glob
// (** any depth, * one name segment, ? one character).
function pathPattern(p: string, home: string): RegExp {
  if (p === "~" || p.startsWith("~/")) p = home + p.slice(1);
  p = p.replace(/\/\*\*$/, "").replace(/\/+$/, "");
  let re = "";
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === "*" && p[i + 1] === "*") {
      if (p[i + 2] === "/") {
        re += "(?:.*/)?";
        i += 2;
      } else {
        re += ".*";
        i += 1;
      }
    } else if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  if (!p.startsWith("/")) re = "(?:.*/)?" + re;
  return new RegExp(`^${re}(?:/.*)?$`);
}

// textOf flattens a tool result (string, content blocks, or a structured
// tool response such as Bash's {stdout, stderr}) into one string.
export function textOf(v: unknown): string {
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(textOf).join("\n");
  if (v && typeof v === "object") return Object.values(v as Record<string, unknown>).map(textOf).join("\n");
  return "";
}

function hostOf(s: string): string {
  return s.replace(/:\d+$/, "");
}

function firstLine(s: string): string {
  return s.trim().split("\n")[0];
}

function clip(s: string): string {
  return s.length > 500 ? s.slice(0, 500) + "…" : s;
}
