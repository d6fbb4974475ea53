#!/usr/bin/env python3
"""Captures real tools' outputs into a recall corpus (the layout `benches/recall.rs` reads).

Each case runs a real tool (gcc, valgrind, AddressSanitizer, Python's unittest runner, top,
cargo) on an input made here, under util-linux `script` so the bytes are what a terminal got,
and names its key lines: the lines a reader must see to act, found in the output itself (pids
and addresses differ from run to run).

Usage: scripts/capture_corpus.py OUT_DIR   then   cargo bench --bench recall -- OUT_DIR
Needs: gcc, valgrind, python3, script, top; cargo for the cargo case (skipped without it).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def plain(raw):
    """The raw bytes as lines of text, escapes and carriage returns dropped (enough to find
    key lines, which are plain)."""
    text = ESCAPES.sub("", raw.decode("utf-8", "replace"))
    return [line.rstrip("\r").split("\r")[-1] for line in text.split("\n")]


def run(cmd, cwd):
    """Runs `cmd` (a shell command line) under `script` at 120x40 and returns the bytes."""
    inner = f"stty cols 120 rows 40; {cmd}"
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
           "TERM": "xterm-256color", "LANG": "C.UTF-8", "COLUMNS": "120", "LINES": "40"}
    done = subprocess.run(["script", "-qefc", inner, "/dev/null"], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, timeout=600)
    return done.stdout


def key(lines, pattern, after=0):
    """The first line matching `pattern` and the `after` lines that follow it."""
    rx = re.compile(pattern)
    for i, line in enumerate(lines):
        if rx.search(line):
            return lines[i:i + 1 + after]
    raise SystemExit(f"no line matches {pattern!r}")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def gcc_one_root_cause(work):
    """gcc: 300 errors of one kind and, among them, the one unlike them."""
    body = "".join(f"int f{i}(void) {{ return undeclared_{i % 7}; }}\n" for i in range(150))
    body += "int broken(void) { return 1 }\n"
    body += "".join(f"int g{i}(void) {{ return undeclared_{i % 7}; }}\n" for i in range(150))
    write(os.path.join(work, "many.c"), body)
    raw = run("gcc -fdiagnostics-color=always -c many.c -o /dev/null", work)
    return raw, key(plain(raw), r"error: expected .;. before .}. token")


def valgrind_report_in_progress(work):
    """valgrind: 3,000 progress lines with an invalid read in the middle."""
    write(os.path.join(work, "leak.c"), r"""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    int *v = malloc(16 * sizeof *v);
    long sum = 0;
    for (int i = 0; i < 3000; i++) {
        printf("checked block %d of 3000, running sum %ld\n", i, sum);
        if (i == 1500) sum += v[16];
        else sum += i;
    }
    free(v);
    return 0;
}
""")
    subprocess.run(["gcc", "-g", "-O0", "leak.c", "-o", "leak"], cwd=work, check=True)
    raw = run("valgrind ./leak", work)
    return raw, key(plain(raw), r"== Invalid read of size 4", after=1)


def asan_report(work):
    """AddressSanitizer: a heap overflow after a flood of progress lines."""
    write(os.path.join(work, "asan.c"), r"""
#include <stdio.h>
#include <stdlib.h>
int frame_len(const int *f, int n) { return f[n]; }
int main(void) {
    for (int i = 0; i < 4000; i++) printf("[%05d] processed batch %d ok\n", i, i);
    int *f = malloc(4 * sizeof *f);
    return frame_len(f, 4);
}
""")
    subprocess.run(["gcc", "-g", "-fsanitize=address", "asan.c", "-o", "asan"], cwd=work,
                   check=True)
    raw = run("./asan", work)
    lines = plain(raw)
    return raw, key(lines, r"ERROR: AddressSanitizer: heap-buffer-overflow") + \
        key(lines, r"^\s+#0 0x[0-9a-f]+ in frame_len")


def python_traceback_in_log(work):
    """A Python service's log flood with one traceback in the middle."""
    write(os.path.join(work, "svc.py"), r"""
import logging, sys
logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                    format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger("svc")
def parse(row):
    return int(row["qty"]) / int(row["n"])
for i in range(6000):
    log.info("handled request %d for user %d in %d ms", i, i * 7 % 1000, i * 13 % 900)
    if i == 3000:
        try:
            parse({"qty": "3", "n": "0"})
        except Exception:
            log.exception("request %d failed", i)
""")
    raw = run("python3 svc.py", work)
    lines = plain(raw)
    return raw, key(lines, r'File ".*svc.py", line \d+, in parse', after=1) + \
        key(lines, r"^ZeroDivisionError")


def unittest_many_passing(work):
    """Python's unittest runner, verbose: 400 passing tests and one failure."""
    tests = "".join(f"    def test_case_{i}(self):\n        self.assertEqual({i} + 1, {i + 1})\n"
                    for i in range(400))
    tests += "    def test_parser_roundtrip(self):\n        self.assertEqual('a,b'.split(','), ['a', 'c'])\n"
    write(os.path.join(work, "test_many.py"),
          "import unittest\nclass T(unittest.TestCase):\n" + tests +
          "if __name__ == '__main__':\n    unittest.main(verbosity=2)\n")
    raw = run("python3 test_many.py", work)
    return raw, key(plain(raw), r"^FAIL: test_parser_roundtrip")


def top_batch(work):
    """top in batch mode: a screenful of processes."""
    raw = run("top -b -n 1 -w 120", work)
    return raw, key(plain(raw), r"^\s*PID USER")


def cargo_test_one_failure(work):
    """cargo test: 300 passing tests and one failing."""
    if not shutil.which("cargo"):
        return None
    crate = os.path.join(work, "crate")
    os.makedirs(os.path.join(crate, "src"))
    write(os.path.join(crate, "Cargo.toml"),
          '[package]\nname = "many"\nversion = "0.1.0"\nedition = "2021"\n')
    tests = "".join(f"    #[test]\n    fn case_{i}() {{ assert_eq!({i} + 1, {i + 1}); }}\n"
                    for i in range(300))
    tests += '    #[test]\n    fn parser_roundtrip() { assert_eq!("a,b".split(\',\').count(), 3); }\n'
    write(os.path.join(crate, "src", "lib.rs"), "#[cfg(test)]\nmod tests {\n" + tests + "}\n")
    raw = run("cargo test --color always 2>&1", crate)
    return raw, key(plain(raw), r"^test tests::parser_roundtrip \.\.\. FAILED")


CASES = [gcc_one_root_cause, valgrind_report_in_progress, asan_report, python_traceback_in_log,
         unittest_many_passing, top_batch, cargo_test_one_failure]


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    index = []
    for n, case in enumerate(CASES, 1):
        with tempfile.TemporaryDirectory() as work:
            got = case(work)
        if got is None:
            continue
        raw, keys = got
        name = case.__name__.replace("_", "-")
        folder = f"{n:02d}-{name}"
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        with open(os.path.join(out, folder, "output.raw"), "wb") as f:
            f.write(raw)
        index.append({"name": name, "dir": folder, "key_lines": keys})
        print(f"{folder}: {len(raw)} bytes, {len(keys)} key lines", file=sys.stderr)
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
