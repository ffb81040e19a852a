// The prompt stream handed to query(): the first prompt, then follow-ups the
// daemon drops into <ipc>/input/ while the agent runs, until _close.

import fs from "node:fs";
import path from "node:path";
import type { SDKUserMessage } from "@anthropic-ai/claude-agent-sdk";

// PromptQueue is an async iterable of user messages that ends when closed.
export class PromptQueue implements AsyncIterable<SDKUserMessage> {
  private items: SDKUserMessage[] = [];
  private waiting: ((r: IteratorResult<SDKUserMessage>) => void) | null = null;
  private closed = false;
  private count = 0;
  // onClose is called once the queue is closed.
  onClose: () => void = () => {};

  push(text: string): void {
    if (this.closed) return;
    this.count++;
    const msg: SDKUserMessage = {
      type: "user",
      message: { role: "user", content: text },
      parent_tool_use_id: null,
    };
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: msg, done: false });
    } else {
      this.items.push(msg);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.waiting && this.items.length === 0) {
      const w = this.waiting;
      this.waiting = null;
      w({ value: undefined, done: true });
    }
    this.onClose();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  // pushed is how many prompts were queued in all.
  get pushed(): number {
    return this.count;
  }

  [Symbol.asyncIterator](): AsyncIterator<SDKUserMessage> {
    return {
      next: () => {
        const item = this.items.shift();
        if (item) return Promise.resolve({ value: item, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = resolve;
        });
      },
    };
  }
}

const CLOSE = "_close";

// watchInput feeds <dir>/*.json follow-ups into q (oldest name first) and
// closes q when <dir>/_close appears. Files already there are read at once;
// each is deleted after it is queued so it is never delivered twice. A
// _close left over from an earlier run is removed before watching starts.
// Returns a function that stops watching.
export function watchInput(dir: string, q: PromptQueue, log: (s: string) => void): () => void {
  fs.mkdirSync(dir, { recursive: true });
  fs.rmSync(path.join(dir, CLOSE), { force: true });

  const drain = () => {
    let names: string[];
    try {
      names = fs.readdirSync(dir).sort();
    } catch (err) {
      log(`cannot list follow-ups in ${dir}: ${(err as Error).message}`);
      return;
    }
    for (const name of names) {
      if (!name.endsWith(".json")) continue;
      const file = path.join(dir, name);
      let text: string | undefined;
      try {
        const msg = JSON.parse(fs.readFileSync(file, "utf8"));
        if (msg && msg.type === "message" && typeof msg.text === "string") text = msg.text;
        else log(`ignoring follow-up ${file}: want {"type":"message","text":"..."}`);
      } catch (err) {
        // Gone already (a second event for the same file) or not JSON.
        if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
        log(`ignoring follow-up ${file}: ${(err as Error).message}`);
      }
      fs.rmSync(file, { force: true });
      if (text !== undefined) q.push(text);
    }
    if (names.includes(CLOSE)) {
      fs.rmSync(path.join(dir, CLOSE), { force: true });
      q.close();
    }
  };

  // Watch first, then read what is there, so nothing written in between is missed.
  const watcher = fs.watch(dir, () => drain());
  watcher.on("error", (err) => log(`watching ${dir}: ${err.message}`));
  drain();
  return () => watcher.close();
}
