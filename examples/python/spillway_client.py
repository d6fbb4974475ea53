"""A small client for spillway's socket protocol, for Python bash tools that do not speak MCP.

Paste this file into your agent (standard library only, Python 3.8+) and make its bash tool
call `bash_tool(command)`: the model gets a bounded preview whose notice says how to read the
rest (`spillway read PATH --offset N`, or `read(id, offset)` here), and every byte stays on disk.

    from spillway_client import bash_tool, run, read, grep
    print(bash_tool("cargo build"))             # preview + "[exit code 101]"
    result = run("pytest -v", max_lines=200)    # the whole `exit` event as a dict
    page = read(result["id"], offset=1201)      # lines of the run's full output
    hits = grep(result["id"], r"^FAILED")       # matching lines with their line numbers

The protocol (JSON Lines over a Unix socket) is described in docs/protocol.md.
"""

import json
import os
import socket
import struct
import subprocess
import threading
import time

PROTOCOL_VERSION = 1


class SpillwayError(Exception):
    """The daemon answered with an error event (`code` says which kind) or could not be reached."""

    def __init__(self, message, code="unreachable"):
        super().__init__(message)
        self.code = code


def data_dir():
    """Where the daemon keeps spills: $SPILLWAY_DATA_DIR, else $XDG_STATE_HOME/spillway."""
    if os.environ.get("SPILLWAY_DATA_DIR"):
        return os.environ["SPILLWAY_DATA_DIR"]
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "spillway")


def socket_path():
    """The daemon's socket, found as the spillway CLI finds it."""
    if os.environ.get("SPILLWAY_SOCKET"):
        return os.environ["SPILLWAY_SOCKET"]
    if os.environ.get("XDG_RUNTIME_DIR"):
        return os.path.join(os.environ["XDG_RUNTIME_DIR"], "spillway", "spillway.sock")
    return os.path.join(data_dir(), "spillway.sock")


def _check_peer(sock, path):
    """Refuses a daemon that runs as another user, before anything is sent to it: a socket in a
    shared directory may be someone else's, who would get the command and the whole environment
    and could answer anything. The kernel fills in SO_PEERCRED (Linux); elsewhere this check is
    skipped."""
    if not hasattr(socket, "SO_PEERCRED"):
        return
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if uid != os.geteuid():
        sock.close()
        raise SpillwayError(
            f"refusing the daemon at {path}: it runs as uid {uid}, not as this user (uid {os.geteuid()}); "
            "nothing was sent to it", "forbidden")


def _start_daemon(path):
    """Starts `spillway daemon` (on $PATH); returns a list that gets its start-up report (`ready`
    or `error: WHY`) once its pipe closes. A thread reaps it when it exits, so a long-lived agent
    never keeps a dead daemon as a zombie."""
    try:
        proc = subprocess.Popen(
            ["spillway", "daemon", "--socket", path, "--data-dir", data_dir(), "--idle-exit", "15m",
             "--report-start"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as e:
        raise SpillwayError(f"no daemon at {path}, and cannot start one: {e}") from e
    report = []

    def watch():
        report.append(proc.stdout.read(65536).decode(errors="replace"))
        proc.stdout.close()
        proc.wait()

    threading.Thread(target=watch, daemon=True).start()
    return report


def _connect():
    """Connects to our own user's daemon, starting one if none answers."""
    path = socket_path()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        _check_peer(sock, path)
        return sock
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
    report = _start_daemon(path)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            _check_peer(sock, path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
        said = report[0].strip() if report else "ready"
        # Unless it lost a race to another daemon on this socket (then wait for that one).
        lost_race = any(mark in said for mark in (f"{path})", f"running on {path}", "(pid unknown)"))
        if said.startswith("error: ") and not lost_race:
            raise SpillwayError(f"the daemon could not start: {said[len('error: '):]}")
        time.sleep(0.05)
    raise SpillwayError(f"the daemon did not start at {path}")


def request(op, **fields):
    """Sends one request and returns the event that answers it (after `started`, for a run)."""
    message = {"v": PROTOCOL_VERSION, "op": op}
    message.update({k: v for k, v in fields.items() if v is not None})
    with _connect() as sock:
        sock.sendall((json.dumps(message) + "\n").encode())
        events = sock.makefile("r", encoding="utf-8")
        for line in events:
            event = json.loads(line)
            if event["type"] == "error":
                raise SpillwayError(event["message"], event["code"])
            if event["type"] != "started":
                return event
    raise SpillwayError("the daemon closed the connection")


def run(command, cwd=None, timeout=None, max_lines=None, max_bytes=None, tags=None):
    """Runs `command` with `sh -c` and returns its `exit` event: `content` is the preview
    (with its notice), `exit_code`, `status`, `spill_path`, `total_lines` and the rest."""
    return request(
        "run",
        shell=command,
        cwd=os.path.abspath(cwd or os.getcwd()),
        base_env=dict(os.environ),
        timeout_ms=None if timeout is None else max(1, int(timeout * 1000)),
        max_lines=max_lines,
        max_bytes=max_bytes,
        tags=tags,
    )


def read(run_id, offset=1, limit=2000):
    """Lines `offset`.. of a run's full output: `text`, `first`, `last`, `next_offset`."""
    return request("show", id=run_id, offset=offset, limit=limit)


def grep(run_id, pattern, ignore_case=False, context=0, max_count=100):
    """Lines of a run's output matching a regex: `lines` of {line, text, matched}."""
    return request("grep", id=run_id, pattern=pattern, ignore_case=ignore_case,
                   context=context, max_count=max_count)


def bash_tool(command, cwd=None, timeout=None):
    """What a bash tool returns to the model: the preview, then how the command ended."""
    exit = run(command, cwd=cwd, timeout=timeout)
    if exit["status"] == "exited":
        how = f"exit code {exit['exit_code']}"
    else:
        how = exit["status"].replace("_", " ")
    return f"{exit['content'].rstrip()}\n[{how}; run {exit['id']}]"


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: spillway_client.py 'SHELL COMMAND'")
    print(bash_tool(sys.argv[1]))
