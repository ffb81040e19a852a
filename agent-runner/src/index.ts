// nanoclaw agent runner: one agent run for nanoclawd.
//
// stdin: one ContainerInput JSON object (docs/protocol.md; the daemon's side
// is internal/protocol/protocol.go, and the two change together). It calls the Claude
// Agent SDK's query() with input.sdkOptions exactly as the daemon resolved
// them, adding only what has to live in this process: hooks, the prompt
// stream, the nanoclaw MCP server entry and the child environment. stdout:
// three-line result and violation frames. Anything else it prints goes to
// stderr, which the daemon keeps in the group's run log.

import fs from "node:fs";
import path from "node:path";
import {
  query,
  type HookCallbackMatcher,
  type HookEvent,
  type Options,
  type SDKMessage,
} from "@anthropic-ai/claude-agent-sdk";
import { PromptQueue, userContent, watchInput } from "./prompts.js";
import { ViolationDetector, permissionRulePaths, textOf, type Violation } from "./violations.js";

// protocol.ContainerInput in internal/protocol/protocol.go.
interface ContainerInput {
  prompt: string;
  sessionId?: string;
  groupFolder: string;
  chatJid: string;
  isMain: boolean;
  isScheduledTask?: boolean;
  // Started ahead of a message: the first prompt arrives as an input file.
  standby?: boolean;
  assistantName?: string;
  security?: { denyRead?: string[] } & Record<string, unknown>;
  sdkOptions: Record<string, any>;
}

// protocol.FrameStart and protocol.FrameEnd.
const START = "---NANOCLAW_OUTPUT_START---";
const END = "---NANOCLAW_OUTPUT_END---";

function frame(obj: object): void {
  process.stdout.write(`${START}\n${JSON.stringify(obj)}\n${END}\n`);
}

function log(s: string): void {
  process.stderr.write(`[agent-runner] ${s}\n`);
}

// What a sandboxed group's agent is told about blocked actions, once in the
// system prompt and again beside every tool call.
const BLOCKED_NOTE =
  "You run in a sandbox set by the admin of this assistant. Some files, folders, network hosts and tools are blocked " +
  "for this group. When an action is blocked (a permission denial, 'Read-only file system', a file that seems not to " +
  "exist in a protected place, a network connection refused by the sandbox, a tool that is not available), do not try " +
  "to get around it: tell the group in your reply what was blocked and why you needed it, and suggest they ask the " +
  "admin to change this group's sandbox policy if the action is needed.";

function systemPromptWithNote(given: unknown): Options["systemPrompt"] {
  // The daemon may already carry the note (so `security show` displays it).
  if (given !== undefined && JSON.stringify(given).includes(JSON.stringify(BLOCKED_NOTE).slice(1, -1))) {
    return given as Options["systemPrompt"];
  }
  return appendToSystemPrompt(given as Options["systemPrompt"], BLOCKED_NOTE);
}

// globalMemory is the shared memory every non-main group reads (the main
// group writes it): groups/global/CLAUDE.md, as the daemon names it.
function globalMemory(): string | undefined {
  const file = process.env.NANOCLAW_GLOBAL_MEMORY;
  if (!file) return undefined;
  try {
    const text = fs.readFileSync(file, "utf8").trim();
    return text ? `Shared memory of this assistant (written by its owner; read-only here):\n\n${text}` : undefined;
  } catch {
    return undefined; // none written yet
  }
}

function appendToSystemPrompt(prompt: Options["systemPrompt"], extra: string | undefined): Options["systemPrompt"] {
  if (!extra) return prompt;
  if (typeof prompt === "string") return `${prompt}\n\n${extra}`;
  if (Array.isArray(prompt)) return [...prompt, extra];
  if (prompt && typeof prompt === "object" && (prompt as any).type === "preset") {
    const p = prompt as { append?: string };
    return { ...(prompt as object), append: p.append ? `${p.append}\n\n${extra}` : extra } as Options["systemPrompt"];
  }
  if (prompt && typeof prompt === "object" && (prompt as any).type === "custom") {
    const p = prompt as { prompt: string | string[] };
    const text = Array.isArray(p.prompt) ? [...p.prompt, extra] : `${p.prompt}\n\n${extra}`;
    return { ...(prompt as object), prompt: text } as Options["systemPrompt"];
  }
  return { type: "preset", preset: "claude_code", append: extra };
}

// CLAUDE_CODE_MAX_RETRIES unless the operator set it (childEnv).
const MAX_RETRIES = "5";

function requireEnv(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`environment variable ${name} is not set; the agent runner must be started by nanoclawd`);
  return v;
}

function mkdir0700(dir: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

// childEnv is the complete environment of the claude process (sdkOptions.env
// replaces it, it does not extend it). It keeps PATH and the agent.env names
// the daemon passed, never the run's IPC token. A non-main group's CLI state
// (CLAUDE_CONFIG_DIR, HOME) is its own session directory, never the
// operator's ~/.claude. The main group is the operator's own: it keeps HOME
// and the CLI's default config dir, so its "user" setting source is the
// operator's ~/.claude (docs/security.md: settings from project and user).
function childEnv(isMain: boolean): Record<string, string> {
  const sessionDir = requireEnv("NANOCLAW_SESSION_DIR");
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("NANOCLAW_")) env[k] = v;
  }
  env.CLAUDE_CODE_TMPDIR = mkdir0700(path.join(sessionDir, "tmp"));
  env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1";
  // The CLI retries a failed model request 10 times by default, its backoff
  // growing to about 35 s: an unreachable API or a refused key (a 401 is
  // retried too) took about five minutes to become an error result. With 5
  // retries (0.5 s doubling to 8 s, about 16 s in all) the chat hears of it
  // well within a minute. An operator's own value, passed in agent.env, wins.
  env.CLAUDE_CODE_MAX_RETRIES ??= MAX_RETRIES;
  if (isMain) {
    // A CLAUDE_CONFIG_DIR the operator passes through agent.env is kept:
    // it says where their settings live.
    // bypassPermissions refuses to run as root unless told it is sandboxed.
    env.IS_SANDBOX = "1";
  } else {
    env.CLAUDE_CONFIG_DIR = mkdir0700(path.join(sessionDir, "claude"));
    env.HOME = mkdir0700(path.join(sessionDir, "home"));
  }
  return env;
}

// nanoclawServer is the stdio MCP server entry for `nanoclawd mcp`. Its env
// carries the run's token; with mcpServersDelivery "initialize" the SDK sends
// it over the CLI's stdin, so it never shows up in any process's argv.
function nanoclawServer(): Record<string, unknown> | undefined {
  const bin = process.env.NANOCLAW_BIN;
  if (!bin) return undefined;
  const env: Record<string, string> = {};
  for (const k of ["NANOCLAW_IPC_DIR", "NANOCLAW_IPC_TOKEN", "NANOCLAW_GROUP_FOLDER", "NANOCLAW_CHAT_JID", "NANOCLAW_IS_MAIN"]) {
    env[k] = process.env[k] ?? "";
  }
  return { type: "stdio", command: bin, args: ["mcp"], env };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function parseInput(raw: string): ContainerInput {
  let input: ContainerInput;
  try {
    input = JSON.parse(raw);
  } catch (err) {
    throw new Error(`stdin is not a ContainerInput JSON object: ${(err as Error).message}`);
  }
  if (!input || typeof input !== "object") throw new Error("stdin is not a ContainerInput JSON object");
  if (typeof input.prompt !== "string") throw new Error('ContainerInput has no "prompt" string');
  if (!input.sdkOptions || typeof input.sdkOptions !== "object") throw new Error('ContainerInput has no "sdkOptions" object');
  return input;
}

async function run(): Promise<number> {
  const input = parseInput(await readStdin());
  const opts = input.sdkOptions;
  const isMain = input.isMain === true;
  const ipcDir = requireEnv("NANOCLAW_IPC_DIR");

  const denied = [
    ...((opts.sandbox?.filesystem?.denyRead as string[]) ?? []),
    ...((opts.sandbox?.filesystem?.denyWrite as string[]) ?? []),
    ...permissionRulePaths(opts.settings?.permissions?.deny),
    ...(input.security?.denyRead ?? []),
  ];
  const detector = new ViolationDetector(
    { sandboxed: !isMain, denied, home: process.env.NANOCLAW_HOST_HOME ?? process.env.HOME ?? "/", cwd: process.cwd() },
    (v: Violation) => frame(v),
  );

  // A tool call that names a hidden path is reported whatever its output.
  const afterTool = (tool: string, toolInput: unknown, cwd: string, toolUseId: string) => {
    const command = (toolInput as { command?: unknown } | null)?.command;
    if (tool === "Bash" && typeof command === "string") detector.fromCommand(tool, command, cwd || process.cwd(), toolUseId);
    else detector.fromInputPath(tool, toolInput, cwd || process.cwd(), toolUseId);
  };

  // Tool calls by id, to name the tool behind a tool_result in the stream.
  const toolCalls = new Map<string, { name: string; input: unknown }>();

  const hooks: Partial<Record<HookEvent, HookCallbackMatcher[]>> = {
    PostToolUse: [
      {
        hooks: [
          async (h) => {
            if (h.hook_event_name === "PostToolUse") {
              afterTool(h.tool_name, h.tool_input, h.cwd, h.tool_use_id);
              detector.fromToolText(h.tool_name, h.tool_input, textOf(h.tool_response), false, h.tool_use_id);
            }
            return {};
          },
        ],
      },
    ],
    PostToolUseFailure: [
      {
        hooks: [
          async (h) => {
            if (h.hook_event_name === "PostToolUseFailure") {
              afterTool(h.tool_name, h.tool_input, h.cwd, h.tool_use_id);
              detector.fromToolText(h.tool_name, h.tool_input, h.error, true, h.tool_use_id);
            }
            return {};
          },
        ],
      },
    ],
  };
  if (!isMain) {
    hooks.PreToolUse = [
      {
        hooks: [
          async () => ({ hookSpecificOutput: { hookEventName: "PreToolUse" as const, additionalContext: BLOCKED_NOTE } }),
        ],
      },
    ];
  }

  const mcpServers = { ...(opts.mcpServers ?? {}) };
  const nanoclaw = nanoclawServer();
  if (nanoclaw) mcpServers.nanoclaw = nanoclaw;
  else log("NANOCLAW_BIN is not set: running without the nanoclaw MCP tools");

  const options: Options = {
    ...(opts as Options),
    env: childEnv(isMain),
    hooks,
    mcpServers: mcpServers as Options["mcpServers"],
    mcpServersDelivery: "initialize",
    stderr: (data: string) => process.stderr.write(data),
  };
  if (input.sessionId) options.resume = input.sessionId;
  if (!isMain) options.systemPrompt = appendToSystemPrompt(systemPromptWithNote(opts.systemPrompt), globalMemory());

  const groupDir = process.env.NANOCLAW_GROUP_DIR || process.cwd();
  const prompts = new PromptQueue((text) => userContent(text, groupDir, log));
  if (!input.standby) prompts.push(input.prompt);
  const stopWatching = watchInput(path.join(ipcDir, "input"), prompts, log);

  let lastError = false;
  let results = 0;
  // Asked to finish (_close) with every prompt answered, the run is over:
  // exit now rather than wait for the CLI, which stays up while a command
  // it started in the background runs. Ending this process ends the run's
  // sandbox and everything in it.
  let finish: (code: number) => void = () => {};
  const finished = new Promise<number>((resolve) => (finish = resolve));
  const done = () => {
    if (prompts.isClosed && results >= prompts.pushed) finish(lastError ? 1 : 0);
  };
  prompts.onClose = done;
  const answering = (async () => {
    for await (const msg of query({ prompt: prompts, options })) {
      handle(msg);
      if (msg.type === "result") {
        results++;
        lastError = msg.subtype !== "success" || msg.is_error;
        // A scheduled task answers once; it takes no follow-ups.
        if (input.isScheduledTask) prompts.close();
        done();
      }
    }
    return lastError ? 1 : 0;
  })();
  try {
    return await Promise.race([answering, finished]);
  } finally {
    stopWatching();
  }

  function handle(msg: SDKMessage): void {
    switch (msg.type) {
      case "assistant":
        for (const b of msg.message.content) {
          if (b.type === "tool_use") toolCalls.set(b.id, { name: b.name, input: b.input });
        }
        break;
      case "user": {
        const content = msg.message.content;
        if (!Array.isArray(content)) break;
        for (const b of content) {
          if (b.type !== "tool_result" || !b.is_error) continue;
          const call = toolCalls.get(b.tool_use_id);
          detector.fromToolText(call?.name ?? "unknown", call?.input, textOf(b.content), true, b.tool_use_id);
        }
        break;
      }
      case "system":
        if (msg.subtype === "permission_denied") {
          const call = toolCalls.get(msg.tool_use_id);
          detector.fromDenial(msg.tool_name, msg.tool_use_id, call?.input);
        }
        break;
      case "result":
        for (const d of msg.permission_denials ?? []) detector.fromDenial(d.tool_name, d.tool_use_id, d.tool_input);
        // costUSD: the SDK's own estimate, kept beside the relay's count
        // (an optional field: a daemon that does not know it ignores it).
        const cost = typeof msg.total_cost_usd === "number" ? { costUSD: msg.total_cost_usd } : {};
        if (msg.subtype === "success" && !msg.is_error) {
          frame({ status: "success", result: capResult(msg.result) || null, newSessionId: msg.session_id, ...cost });
        } else {
          const why = "errors" in msg && msg.errors?.length ? msg.errors.join("; ") : "result" in msg ? msg.result : msg.subtype;
          frame({ status: "error", result: null, newSessionId: msg.session_id, error: why || msg.subtype, ...cost });
        }
        break;
    }
  }
}

// A reply past MAX_RESULT characters is cut with a note, so its frame stays
// well inside the daemon's 1 MiB line limit and the chat gets the start.
const MAX_RESULT = 200_000;

function capResult(text: string | undefined): string | undefined {
  if (!text || text.length <= MAX_RESULT) return text;
  return `${text.slice(0, MAX_RESULT)}\n\n[cut: the answer was ${text.length} characters; ask for the rest]`;
}

function exit(code: number): void {
  // Let stdout drain before exiting; the SDK may still hold handles open.
  process.stdout.write("", () => process.exit(code));
}

run().then(exit, (err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  log(`error: ${err instanceof Error && err.stack ? err.stack : message}`);
  frame({ status: "error", result: null, error: message });
  exit(1);
});
