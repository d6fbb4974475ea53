"""Drives `spillway mcp` with the official Python MCP SDK, as an agent would.

Usage: python client.py SPILLWAY_BINARY (with SPILLWAY_SOCKET and SPILLWAY_DATA_DIR set).
Exits non-zero, saying which check failed, if any does.
"""

import asyncio
import os
import re
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

checks = 0


def check(condition, what, detail=""):
    global checks
    if not condition:
        raise AssertionError(f"{what}\n--- detail ---\n{detail}")
    checks += 1


def text_of(result):
    return "".join(block.text for block in result.content if block.type == "text")


async def main(binary):
    env = {k: os.environ[k] for k in ("SPILLWAY_SOCKET", "SPILLWAY_DATA_DIR")}
    server = StdioServerParameters(command=binary, args=["mcp"], env=env, cwd=os.getcwd())
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "spillway", "server name", init)

            tools = {t.name: t for t in (await session.list_tools()).tools}
            want = {"bash", "read_output", "grep_output", "wait", "send_input", "kill", "history"}
            check(set(tools) == want, "the tools", sorted(tools))
            check("command" in tools["bash"].input_schema["properties"], "bash's schema", tools["bash"])
            check(tools["bash"].input_schema.get("required") == ["command"], "bash requires command")

            # 200,000 lines: a bounded preview that says how to read on.
            big = await session.call_tool("bash", {"command": "seq 1 200000", "max_lines": 100})
            text = text_of(big)
            check(not big.is_error, "seq succeeded", text[-2000:])
            # The model reads each result once: as text, with no structured copy beside it.
            check(big.structured_content is None, "no structured copy", big.structured_content)
            check(len(big.content) == 1, "one content block", big.content)
            ending = re.search(r"\[spillway: run (\S+) exited with code 0 after [\d.]+s; 200000 lines of output\]$", text)
            check(ending is not None, "the ending says the id, the code and the lines", text[-300:])
            check("of 200000 lines" in text, "the whole output counted", text[-1500:])
            check(len(text) < 5000, f"bounded preview ({len(text)} chars)", text[-2000:])
            check("spillway read" not in text and "grep -n" not in text, "no CLI wording", text[-1500:])
            run_id = ending.group(1)
            step = re.search(r'call read_output with id="([^"]+)" offset=(\d+)', text)
            check(step is not None and step.group(1) == run_id, "the notice names read_output", text[-1500:])
            offset = int(step.group(2))
            check(f'call grep_output with id="{run_id}"' in text, "the notice names grep_output", text[-1500:])
            check(f"exited with code 0" in text, "says the exit code", text[-300:])

            # Follow the notice as is.
            page = await session.call_tool("read_output", {"id": run_id, "offset": offset, "limit": 3})
            lines = text_of(page).splitlines()
            check(lines[:3] == [str(offset), str(offset + 1), str(offset + 2)], "read_output from the offset", lines)
            check(f"offset={offset + 3}" in lines[-1], "read_output says where to go on", lines[-1])
            check(page.structured_content is None, "page as text only", page.structured_content)

            found = await session.call_tool("grep_output", {"id": run_id, "pattern": "^12345$|^199999$"})
            check(text_of(found).splitlines()[:2] == ["12345:12345", "199999:199999"], "grep_output", text_of(found))
            check("[2 matching lines]" in text_of(found), "grep says how many", text_of(found))

            # Credentials never reach the model; the spill keeps them.
            token = "ghp_" + "".join(chr(ord("A") + (i * 7) % 26) for i in range(36))
            secret = await session.call_tool("bash", {"command": f"echo GITHUB_TOKEN={token}"})
            check(token not in text_of(secret), "the token is redacted", text_of(secret))
            check("GITHUB_TOKEN=[redacted: github-token]" in text_of(secret), "the redaction marker", text_of(secret))
            check("1 secret redacted (github-token)" in text_of(secret), "the redaction is said", text_of(secret))
            secret_id = re.search(r"\[spillway: run (\S+) exited", text_of(secret)).group(1)
            page = await session.call_tool("read_output", {"id": secret_id})
            check(token not in text_of(page) and "[redacted: github-token]" in text_of(page), "read_output redacts", text_of(page))
            found = await session.call_tool("grep_output", {"id": secret_id, "pattern": "GITHUB"})
            check(token not in text_of(found) and "[redacted: github-token]" in text_of(found), "grep_output redacts", text_of(found))

            # Command lines and side texts too: what a run's end stopped (its notice reworded
            # for this tool, the preview cut or not) and the commands history lists.
            for lines in ("3000", "3"):
                left = await session.call_tool(
                    "bash", {"command": f"seq 1 {lines}; sh -c 'sleep 60; : --token {token}' & sleep 0.5"}
                )
                tail = text_of(left)[-700:]
                check("stopped what the command left running" in tail, "says what it stopped", tail)
                check(token not in text_of(left), "the stopped command is redacted", tail)
            listed = await session.call_tool("history", {"command": "GITHUB_TOKEN"})
            check(secret_id in text_of(listed), "history lists the run with a token", text_of(listed))
            check(token not in text_of(listed), "history redacts its commands", text_of(listed))

            # A failing command is a result, not an error.
            failed = await session.call_tool("bash", {"command": "echo oops >&2; exit 3"})
            check(not failed.is_error, "a non-zero exit is not a tool error", text_of(failed))
            check("oops" in text_of(failed) and "exited with code 3" in text_of(failed), "says code 3", text_of(failed))
            failed_id = re.search(r"\[spillway: run (\S+) exited with code 3", text_of(failed)).group(1)

            # Errors come back as tool errors that say what is wrong.
            unknown = await session.call_tool("read_output", {"id": "20200101-000000-aaaa"})
            check(unknown.is_error and "unknown_run" in text_of(unknown), "unknown id", text_of(unknown))
            bad_id = await session.call_tool("grep_output", {"id": "nope", "pattern": "x"})
            check(bad_id.is_error and "YYYYMMDD-HHMMSS-xxxx" in text_of(bad_id), "malformed id", text_of(bad_id))
            bad_regex = await session.call_tool("grep_output", {"id": run_id, "pattern": "(unclosed"})
            check(bad_regex.is_error and "bad_pattern" in text_of(bad_regex), "bad regex", text_of(bad_regex))

            # A run that yields, takes input, and is waited for.
            prompt = await session.call_tool(
                "bash", {"command": "read -p 'continue? ' answer; echo got $answer", "yield_seconds": 0.5}
            )
            still = re.search(r"\[spillway: run (\S+) is waiting for input on its terminal", text_of(prompt))
            check(still is not None, "yields while it waits, and says it waits for input", text_of(prompt))
            check("call send_input" in text_of(prompt), "says how to answer", text_of(prompt))
            live_id = still.group(1)
            check(f'call wait with id="{live_id}"' in text_of(prompt), "says how to go on", text_of(prompt))
            sent = await session.call_tool("send_input", {"id": live_id, "text": "yes"})
            check(not sent.is_error, "send_input", text_of(sent))
            done = await session.call_tool("wait", {"id": live_id})
            check("got yes" in text_of(done) and "exited with code 0" in text_of(done), "wait", text_of(done))

            sleeper = await session.call_tool("bash", {"command": "sleep 600", "yield_seconds": 0.2})
            sleeper_id = re.search(r"\[spillway: run (\S+) is still running", text_of(sleeper)).group(1)
            killed = await session.call_tool("kill", {"id": sleeper_id})
            check(f"run {sleeper_id} was stopped by signal" in text_of(killed), "kill", text_of(killed))

            history = await session.call_tool("history", {"command": "seq 1 200000"})
            check(run_id in text_of(history), "history lists the run", text_of(history))
            failed_only = await session.call_tool("history", {"status": "failed", "since": "1h"})
            check(failed_id in text_of(failed_only), "history filters", text_of(failed_only))

    print(f"mcp client: {checks} checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
