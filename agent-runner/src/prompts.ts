// The prompt stream handed to query(): the first prompt, then follow-ups the
// daemon drops into <ipc>/input/ while the agent runs, until _close.

import fs from "node:fs";
import path from "node:path";
import type { SDKUserMessage } from "@anthropic-ai/claude-agent-sdk";

type Content = SDKUserMessage["message"]["content"];

// The daemon stores a received photo in the group's folder and marks it in
// the message text as "[image <name, size, >media/<id>.<ext>]" (a photo the
// model cannot view has more after the path, so it stays text). Those files
// go to the model as image blocks, before the text that mentions them.
const IMAGE_MARK = /\[image (?:[^\][\n]*?, )?(media\/[A-Za-z0-9_-]+\.(jpg|png|gif|webp))\]/g;
const MEDIA_TYPES: Record<string, "image/jpeg" | "image/png" | "image/gif" | "image/webp"> = {
  jpg: "image/jpeg",
  png: "image/png",
  gif: "image/gif",
  webp: "image/webp",
};
const MAX_IMAGE_BYTES = 5 << 20; // the Messages API's limit per image
const MAX_IMAGES = 20; // the newest ones of a prompt

// userContent is text as the content of a user message: plain text, or the
// images it marks followed by the text. The pattern allows no "..", so
// only files in <groupDir>/media are read, and only regular files.
export function userContent(text: string, groupDir: string, log: (s: string) => void): Content {
  const marks = [...text.matchAll(IMAGE_MARK)].slice(-MAX_IMAGES);
  const blocks: object[] = [];
  for (const m of marks) {
    const file = path.join(groupDir, m[1]);
    try {
      const st = fs.lstatSync(file);
      if (!st.isFile() || st.size > MAX_IMAGE_BYTES) {
        log(`not sending ${file} to the model: not a regular file of at most ${MAX_IMAGE_BYTES} bytes`);
        continue;
      }
      const data = fs.readFileSync(file).toString("base64");
      blocks.push({ type: "image", source: { type: "base64", media_type: MEDIA_TYPES[m[2]], data } });
    } catch (err) {
      log(`cannot read image ${file}: ${(err as Error).message}`);
    }
  }
  if (blocks.length === 0) return text;
  blocks.push({ type: "text", text });
  return blocks as Exclude<Content, string>;
}

// PromptQueue is an async iterable of user messages that ends when closed.
// toContent turns each pushed text into the message content.
export class PromptQueue implements AsyncIterable<SDKUserMessage> {
  private items: SDKUserMessage[] = [];
  private waiting: ((r: IteratorResult<SDKUserMessage>) => void) | null = null;
  private closed = false;
  private count = 0;
  // onClose is called once the queue is closed.
  onClose: () => void = () => {};

  constructor(private toContent: (text: string) => Content = (t) => t) {}

  push(text: string): void {
    if (this.closed) return;
    this.count++;
    const msg: SDKUserMessage = {
      type: "user",
      message: { role: "user", content: this.toContent(text) },
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
