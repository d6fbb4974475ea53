#!/usr/bin/env python3
"""64 concurrent hostile greps against a private spillway daemon, with its RSS sampled.

    scripts/hostile-greps.py [SPILLWAY] [PATTERN] [N]

Starts `SPILLWAY daemon` (default: target/debug/spillway) on a scratch data directory, runs a
command with 200,000 lines of output, then sends N (default 64) `grep` requests at once, each
on its own connection, with PATTERN (default `\\w{200}x`, which compiles to about 10 MiB), and
prints the daemon's RSS before, at the peak (sampled every 50 ms) and each second for 8 s
after. Then it sends three patterns that are refused (a 1 MB one with an unclosed group, a
900 KB one, one over the compile limit) and prints how big each answer is. Standard library
only; compare two builds by running it with each.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

exe = sys.argv[1] if len(sys.argv) > 1 else "target/debug/spillway"
pattern = sys.argv[2] if len(sys.argv) > 2 else r"\w{200}x"
count = int(sys.argv[3]) if len(sys.argv) > 3 else 64

scratch = tempfile.mkdtemp(prefix="spillway-greps-")
sock = os.path.join(scratch, "spillway.sock")
env = dict(os.environ, SPILLWAY_DATA_DIR=os.path.join(scratch, "data"), SPILLWAY_LOG="warn")
daemon = subprocess.Popen([exe, "daemon", "--socket", sock], env=env, stdin=subprocess.DEVNULL)


def ask(request):
    """Sends one request on a new connection; returns the events up to the answer, with sizes."""
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(sock)
    conn.sendall((json.dumps(request) + "\n").encode())
    events = conn.makefile("rb")
    answer = []
    while True:
        line = events.readline()
        if not line:
            break
        event = json.loads(line)
        answer.append((event, len(line)))
        if event["type"] != "started":
            break
    conn.close()
    return answer


def rss_mib():
    with open(f"/proc/{daemon.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


try:
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if time.monotonic() > deadline:
            sys.exit("the daemon did not start")
        time.sleep(0.05)
    time.sleep(0.2)
    script = "seq 1 200000 | sed 's/$/ some words here to search through/'"
    run = ask({"v": 1, "op": "run", "shell": script, "cwd": "/", "tty": False})
    run_id = run[-1][0]["id"]
    print(f"idle before: {rss_mib():.1f} MiB")

    peak = [0.0]
    sampling = [True]

    def sample():
        while sampling[0]:
            peak[0] = max(peak[0], rss_mib())
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    results = []
    started = time.monotonic()
    greps = [threading.Thread(target=lambda: results.append(
        ask({"v": 1, "op": "grep", "id": run_id, "pattern": pattern}))) for _ in range(count)]
    for grep in greps:
        grep.start()
    for grep in greps:
        grep.join()
    first, size = results[0][-1]
    print(f"{count} greps of {pattern!r} took {time.monotonic() - started:.1f} s; first answer: "
          f"{first['type']} {first.get('code', '')} ({size} bytes) {first.get('message', '')[:120]}")
    for second in range(1, 9):
        time.sleep(1)
        print(f"after {second} s: {rss_mib():.1f} MiB")
    sampling[0] = False
    sampler.join()
    print(f"peak: {peak[0]:.1f} MiB")

    for bad in ["a" * 1_000_000 + "(", "a" * 900_000, r"\w{100000}"]:
        event, size = ask({"v": 1, "op": "grep", "id": run_id, "pattern": bad})[-1]
        print(f"a {len(bad)}-byte pattern: {event.get('code')}, a {size}-byte answer")
finally:
    daemon.terminate()
    daemon.wait()
