// Exercises spillway.ts against a live daemon ($SPILLWAY_SOCKET): run, read, grep.
import { test } from "node:test";
import * as assert from "node:assert/strict";

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

import { SpillwayError, bashTool, checkSocketOwner, grep, read, run, socketPath } from "./spillway";

test("run, read and grep", async () => {
  const exit = await run("seq 1 50000", { maxLines: 10 });
  assert.equal(exit.exit_code, 0);
  assert.equal(exit.truncated, true);
  assert.equal(exit.total_lines, 50000);
  assert.match(exit.content, /--offset 6/);
  const page = await read(exit.id, 6, 3);
  assert.equal(page.text, "6\n7\n8\n");
  assert.equal(page.next_offset, 9);
  const found = await grep(exit.id, "^4999[89]$");
  assert.deepEqual(found.lines.map((l) => [l.line, l.text]), [[49998, "49998"], [49999, "49999"]]);
});

test("a failing command, as a bash tool shows it", async () => {
  const text = await bashTool("echo oops; exit 7");
  assert.match(text, /^oops\n\[exit code 7; run \d{8}-\d{6}-[a-z2-7]{4}\]$/);
});

test("errors say what is wrong", async () => {
  await assert.rejects(read("20200101-000000-aaaa"), (e: unknown) => e instanceof SpillwayError && e.code === "unknown_run");
  const exit = await run("true");
  await assert.rejects(grep(exit.id, "("), (e: unknown) => e instanceof SpillwayError && e.code === "bad_pattern");
});

test("only a socket this user made is spoken to", () => {
  checkSocketOwner(socketPath());
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "spillway-"));
  const notASocket = path.join(dir, "spillway.sock");
  fs.writeFileSync(notASocket, "");
  assert.throws(() => checkSocketOwner(notASocket), (e: unknown) => e instanceof SpillwayError && e.code === "forbidden");
  fs.rmSync(dir, { recursive: true });
});
