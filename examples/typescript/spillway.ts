// A small client for spillway's socket protocol, for TypeScript/Node bash tools that do not
// speak MCP. No dependencies beyond Node's standard library (`node:net`); paste it in and make
// the bash tool call `bashTool(command)`: the model gets a bounded preview whose notice says
// how to read the rest, and every byte stays on disk.
//
//   import { bashTool, run, read, grep } from "./spillway";
//   console.log(await bashTool("cargo build"));          // preview + "[exit code 101; run ID]"
//   const exit = await run("pytest -v", { maxLines: 200 });
//   const page = await read(exit.id, 1201);              // lines of the run's full output
//   const hits = await grep(exit.id, "^FAILED");          // matching lines, numbered
//
// The protocol (JSON Lines over a Unix socket) is described in docs/protocol.md. This client
// expects a running daemon (`spillway daemon`, or the systemd socket); `spillway run` and
// `spillway mcp` start one on demand.

import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** The preview and how a run ended: the `exit` event. */
export interface ExitEvent {
  type: "exit";
  id: string;
  status: "exited" | "signaled" | "timed_out" | "killed";
  exit_code: number | null;
  signal: number | null;
  duration_ms: number;
  /** The preview, with the notice that says how to read on when it is cut. */
  content: string;
  truncated: boolean;
  spill_path: string | null;
  total_lines: number;
  total_bytes: number;
}

/** A page of a run's output: the `show` event. */
export interface ShowEvent {
  type: "show";
  text: string;
  first: number;
  last: number;
  total_lines: number;
  next_offset: number | null;
}

/** Matches in a run's output: the `grep` event. */
export interface GrepEvent {
  type: "grep";
  lines: { line: number; text: string; matched: boolean }[];
  matches: number;
  limit_hit: boolean;
}

/** The daemon answered with an error event (`code` says which kind), or was unreachable. */
export class SpillwayError extends Error {
  constructor(message: string, readonly code: string = "unreachable") {
    super(message);
  }
}

/** The daemon's socket, found as the spillway CLI finds it. */
export function socketPath(): string {
  const env = process.env;
  if (env.SPILLWAY_SOCKET) return env.SPILLWAY_SOCKET;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "spillway", "spillway.sock");
  const state = env.XDG_STATE_HOME || path.join(os.homedir(), ".local", "state");
  return path.join(env.SPILLWAY_DATA_DIR || path.join(state, "spillway"), "spillway.sock");
}

/**
 * Refuses a socket that another user made: one in a shared directory may be someone else's,
 * who would get the command and the whole environment and could answer anything. Node has no
 * SO_PEERCRED (the uid of the process at the other end, which the spillway CLI and the Python
 * client check), so this checks the next best thing, the socket file's owner: a user can bind
 * a socket only as itself, and cannot replace ours in a sticky (/tmp) or private directory.
 * Throws a SpillwayError with code "forbidden".
 */
export function checkSocketOwner(socket: string): void {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  let stat: fs.Stats;
  try {
    stat = fs.lstatSync(socket);
  } catch {
    return; // nothing there: connecting will say so
  }
  if (!stat.isSocket() || stat.uid !== uid) {
    throw new SpillwayError(
      `refusing ${socket}: it is ${stat.isSocket() ? "a socket" : "not a socket"} owned by uid ${stat.uid}, not by this user (uid ${uid}); nothing was sent to it`,
      "forbidden",
    );
  }
}

/** Sends one request; resolves with the event that answers it (after `started`, for a run). */
export function request<T>(op: string, fields: Record<string, unknown>): Promise<T> {
  const message = JSON.stringify({ v: 1, op, ...fields }) + "\n";
  return new Promise((resolve, reject) => {
    const where = socketPath();
    try {
      checkSocketOwner(where);
    } catch (e) {
      return reject(e);
    }
    const socket = net.createConnection(where);
    let buffered = "";
    let settled = false;
    const settle = (outcome: () => void) => {
      if (!settled) {
        settled = true;
        socket.destroy();
        outcome();
      }
    };
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(message));
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let newline: number;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const event = JSON.parse(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
        if (event.type === "error") {
          return settle(() => reject(new SpillwayError(event.message, event.code)));
        }
        if (event.type !== "started") return settle(() => resolve(event as T));
      }
    });
    socket.on("error", (e) => settle(() => reject(new SpillwayError(`cannot reach the daemon: ${e.message}`))));
    socket.on("close", () => settle(() => reject(new SpillwayError("the daemon closed the connection"))));
  });
}

export interface RunOptions {
  cwd?: string;
  timeoutSeconds?: number;
  maxLines?: number;
  maxBytes?: number;
  tags?: Record<string, string>;
}

/** Runs `command` with `sh -c` in the daemon and resolves with its `exit` event. */
export function run(command: string, options: RunOptions = {}): Promise<ExitEvent> {
  return request<ExitEvent>("run", {
    shell: command,
    cwd: path.resolve(options.cwd ?? process.cwd()),
    base_env: process.env,
    timeout_ms: options.timeoutSeconds === undefined ? undefined : Math.max(1, Math.round(options.timeoutSeconds * 1000)),
    max_lines: options.maxLines,
    max_bytes: options.maxBytes,
    tags: options.tags,
  });
}

/** Lines `offset`.. (1-based) of a run's full output. */
export function read(id: string, offset = 1, limit = 2000): Promise<ShowEvent> {
  return request<ShowEvent>("show", { id, offset, limit });
}

/** Lines of a run's full output that match a regular expression (Rust regex syntax). */
export function grep(id: string, pattern: string, options: { ignoreCase?: boolean; context?: number; maxCount?: number } = {}): Promise<GrepEvent> {
  return request<GrepEvent>("grep", {
    id,
    pattern,
    ignore_case: options.ignoreCase ?? false,
    context: options.context ?? 0,
    max_count: options.maxCount,
  });
}

/** What a bash tool returns to the model: the preview, then how the command ended. */
export async function bashTool(command: string, options: RunOptions = {}): Promise<string> {
  const exit = await run(command, options);
  const how = exit.status === "exited" ? `exit code ${exit.exit_code}` : exit.status.replace("_", " ");
  return `${exit.content.trimEnd()}\n[${how}; run ${exit.id}]`;
}
