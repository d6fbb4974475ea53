#!/usr/bin/env python3
"""Builds a corpus of real outputs whose key line no highlight pattern was written for.

Each case runs a real tool (linters, package builders, VCS, test runners of other languages,
shells, checksum and archive tools, network clients, interpreters) on input made here, under
util-linux `script` as `capture_corpus.py` does, and keeps the raw bytes. Its key
lines (what a reader must see to act) are picked from the output by what the case is about,
not by position, so they stay true whatever the tool's version prints around them.

A third of the cases are held out (`"held_out": true`): tune on the others, then report both.

Usage: scripts/needles_corpus.py OUT_DIR   then   cargo bench --bench recall -- OUT_DIR
  OUT_DIR/cases.json and OUT_DIR/NN-name/output.raw, the layout `cargo bench --bench recall`
  reads; OUT_DIR/.venv holds the pinned PyPI tools (flake8, pylint, setuptools).
Needs python3 (venv, pip reaching PyPI), gcc, git, perl (prove), node, tclsh, sqlite3, curl,
javac, script.
"""

import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from capture_corpus import plain, run

PINNED = ["flake8==7.1.1", "pylint==3.3.1", "setuptools==75.1.0", "wheel==0.44.0"]


def shell(*argv):
    """`argv` as one shell command line, for `run`."""
    return " ".join(shlex.quote(str(a)) for a in argv)


def keys_where(raw, *needles):
    """The first line containing each needle, exactly as shown."""
    lines = plain(raw)
    found = []
    for needle in needles:
        match = next((l for l in lines if needle in l), None)
        if match is None:
            raise SystemExit(f"key line with {needle!r} not in the output")
        found.append(match)
    return found


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# Each case: (name, held_out, make(work_dir, tools) -> (raw bytes, key lines)).


def flake8_undefined_name(work, tools):
    body = [f"value_{i} = {i}  ;other_{i}=1 " for i in range(340)]
    body.insert(170, "def total():\n    return undefined_total + 1")
    write(work / "settings.py", "\n".join(body) + "\n")
    raw = run(shell(tools / "flake8", "settings.py"), work)
    return raw, keys_where(raw, "F821")


def pylint_undefined_variable(work, tools):
    body = ['"""Settings."""'] + [f"def Handler{i}(a,b): return a+b" for i in range(220)]
    body.insert(120, "def lookup():\n    return REGISTRY_TABLE['x']")
    write(work / "handlers.py", "\n".join(body) + "\n")
    raw = run(shell(tools / "pylint", "--score=n", "handlers.py"), work)
    return raw, keys_where(raw, "E0602")


def pip_c_extension(work, tools):
    sources = []
    for i in range(60):
        name = f"src/part{i}.c"
        body = f"int part{i}(int x, int y) {{ int unused{i}; long w = x; return w + {i}u; }}\n"
        write(work / name, body)
        sources.append(name)
    write(
        work / "src/fastsum.c",
        textwrap.dedent(
            """\
            #include <Python.h>
            static PyObject *total(PyObject *self, PyObject *args) {
                long n;
                if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
                return PyLong_FromLong(n * undeclared_scale);
            }
            static PyMethodDef M[] = {{"total", total, METH_VARARGS, ""}, {NULL}};
            static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "fastsum", NULL, -1, M};
            PyMODINIT_FUNC PyInit_fastsum(void) { return PyModule_Create(&D); }
            """
        ),
    )
    write(
        work / "setup.py",
        "from setuptools import setup, Extension\n"
        "flags = ['-Wall', '-Wextra']\n"
        "setup(name='fastsum', version='0.1', ext_modules=[\n"
        f"    Extension('helpers', {sources!r}, extra_compile_args=flags),\n"
        "    Extension('fastsum', ['src/fastsum.c'], extra_compile_args=flags),\n"
        "])\n",
    )
    raw = run(shell(tools / "pip", "install", "-v", "--no-build-isolation", "."), work)
    return raw, keys_where(raw, "error: \u2018undeclared_scale\u2019")


def git(work, *args):
    subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)


def git_merge_conflict(work, _tools):
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.email", "a@example.com")
    git(work, "config", "user.name", "A")
    for i in range(240):
        write(work / f"conf/f{i:03}.txt", "".join(f"line {n}\n" for n in range(40)))
    git(work, "add", ".")
    git(work, "commit", "-qm", "base")
    git(work, "checkout", "-qb", "other")
    for i in range(240):
        path = work / f"conf/f{i:03}.txt"
        path.write_text(path.read_text().replace("line 30\n", "line 30 other\n"))
    git(work, "commit", "-qam", "other")
    git(work, "checkout", "-q", "main")
    for i in range(240):
        path = work / f"conf/f{i:03}.txt"
        edit = "line 30 main\n" if i == 157 else "line 29\nline 2 main\n"
        path.write_text(path.read_text().replace("line 30\n" if i == 157 else "line 2\n", edit))
    git(work, "commit", "-qam", "main")
    raw = run(shell("git", "-c", "merge.verbosity=3", "merge", "other"), work)
    return raw, keys_where(raw, "CONFLICT (content)")


def perl_prove(work, _tools):
    tests = "use Test::More tests => 300;\n" + "".join(
        f"is(parse_{'dates' if i == 157 else 'ok'}({i}), {i}, 'case {i} parses');\n"
        for i in range(1, 301)
    )
    helpers = "sub parse_ok { $_[0] }\nsub parse_dates { $_[0] + 1 }\n"
    write(work / "t/parse.t", helpers + tests)
    raw = run(shell("prove", "-v", "t/"), work)
    return raw, keys_where(raw, "not ok 157", "Failed test 'case 157 parses'")


def node_tap(work, _tools):
    body = "const test = require('node:test');\nconst assert = require('node:assert');\n"
    body += "".join(
        f"test('rounds price {i}', () => assert.strictEqual(Math.round({i}.4), "
        f"{i + 1 if i == 212 else i}));\n"
        for i in range(300)
    )
    write(work / "price.test.js", body)
    raw = run(shell("node", "--test", "--test-reporter=tap", "price.test.js"), work)
    return raw, keys_where(raw, "not ok 213 - rounds price 212")


def tcl_unknown_command(work, _tools):
    script = 'for {set i 0} {$i < 1500} {incr i} { puts "loading record $i of 1500" }\n'
    script += "proc load {} { frobnicate_index cache }\nload\n"
    write(work / "load.tcl", script)
    raw = run(shell("tclsh", "load.tcl"), work)
    return raw, keys_where(raw, 'invalid command name "frobnicate_index"')


def perl_missing_module(work, _tools):
    script = 'for my $i (1..1200) { print "migrating row $i\\n" }\n'
    script += "require Data::Frobnicator;\n"
    write(work / "migrate.pl", script)
    raw = run(shell("perl", "migrate.pl"), work)
    return raw, keys_where(raw, "Can't locate Data/Frobnicator.pm")


def perl_strict(work, _tools):
    lines = ["use strict;", "use warnings;", "sub total {"]
    lines += [f"    my $v{i} = {i};" for i in range(40)]
    lines += ["    return $totl;", "}", "1;"]
    write(work / "Totals.pm", "\n".join(lines) + "\n")
    script = 'for my $i (1..1500) { print "summing ledger $i\\n" }\n'
    script += "use lib '.';\nrequire Totals;\n"
    write(work / "report.pl", script)
    raw = run(shell("perl", "report.pl"), work)
    return raw, keys_where(raw, 'Global symbol "$totl"')


def sqlite_parse_error(work, _tools):
    sql = ".echo on\nCREATE TABLE users(id INTEGER, name TEXT);\n"
    sql += "".join(f"INSERT INTO users VALUES({i}, 'user{i}');\n" for i in range(600))
    sql += "SELECT count(*) FROM userz;\n"
    sql += "".join(f"INSERT INTO users VALUES({i}, 'late{i}');\n" for i in range(600, 700))
    write(work / "load.sql", sql)
    raw = run("sqlite3 app.db < load.sql", work)
    return raw, keys_where(raw, "no such table: userz")


def sha256_mismatch(work, _tools):
    for i in range(400):
        write(work / f"blobs/b{i:03}.bin", f"blob {i}\n" * 10)
    listing = subprocess.run(
        "sha256sum blobs/*.bin", shell=True, cwd=work, check=True, capture_output=True, text=True
    ).stdout
    write(work / "SHA256SUMS", listing)
    write(work / "blobs/b241.bin", "tampered\n")
    raw = run(shell("sha256sum", "-c", "SHA256SUMS"), work)
    return raw, keys_where(raw, "b241.bin: FAILED")


def tar_damaged_header(work, _tools):
    for i in range(900):
        write(work / f"site/page{i:03}.html", f"<p>page {i}</p>\n" * 40)
    subprocess.run(["tar", "-cf", "site.tar", "site"], cwd=work, check=True)
    with tarfile.open(work / "site.tar") as archive:
        damaged = archive.getmembers()[450].offset
    with open(work / "site.tar", "r+b") as f:
        f.seek(damaged)
        f.write(b"x" * 512)
    (work / "out").mkdir()
    raw = run(shell("tar", "-xvf", "site.tar", "-C", "out"), work)
    return raw, keys_where(raw, "Skipping to next header")


def curl_fail(work, _tools):
    for i in range(200):
        write(work / f"www/item{i}.json", f'{{"id": {i}}}\n')
    handler = partial(QuietHandler, directory=str(work / "www"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    names = [f"item{i}.json" for i in range(200)]
    names[133] = "item-133.json"
    script = "".join(
        f"curl -sS --fail -o /dev/null -w 'fetched %{{url_effective}} in %{{time_total}}s\\n' "
        f"http://127.0.0.1:{port}/{n}\n"
        for n in names
    )
    write(work / "fetch.sh", script)
    raw = run(shell("bash", "fetch.sh"), work)
    server.shutdown()
    return raw, keys_where(raw, "The requested URL returned error: 404")


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def json_tool_error(work, _tools):
    for i in range(300):
        body = '{"id": %d, "tags": ["a", "b"]}' % i
        if i == 188:
            body = '{"id": 188 "tags": ["a", "b"]}'
        write(work / f"records/r{i:03}.json", body + "\n")
    script = (
        "for f in records/*.json; do python3 -m json.tool \"$f\" > /dev/null "
        '&& echo "valid $f"; done\n'
    )
    write(work / "check.sh", script)
    raw = run(shell("bash", "check.sh"), work)
    return raw, keys_where(raw, "Expecting ',' delimiter")


def bash_trace(work, _tools):
    script = "set -x\n" + "".join(f"cp -f /etc/hostname staging/host{i}\n" for i in range(300))
    script += "source ./deploy.env\n"
    script += "".join(f"chmod 0644 staging/host{i}\n" for i in range(300))
    (work / "staging").mkdir(parents=True)
    write(work / "deploy.sh", script)
    raw = run(shell("bash", "deploy.sh"), work)
    return raw, keys_where(raw, "./deploy.env")[-1:] + keys_where(raw, "deploy.sh: line 302")


def tsan_race(work, _tools):
    write(
        work / "race.c",
        textwrap.dedent(
            """\
            #include <pthread.h>
            #include <stdio.h>
            static long hits;
            static void *worker(void *arg) {
                for (int i = 0; i < 1000; i++) { hits++; if (i % 2 == 0) printf("worker %ld step %d\\n", (long)arg, i); }
                return NULL;
            }
            int main(void) {
                pthread_t a, b;
                pthread_create(&a, NULL, worker, (void *)1);
                pthread_create(&b, NULL, worker, (void *)2);
                pthread_join(a, NULL);
                pthread_join(b, NULL);
                printf("hits=%ld\\n", hits);
                return 0;
            }
            """
        ),
    )
    subprocess.run(
        ["gcc", "-g", "-O1", "-fsanitize=thread", "-o", "race", "race.c"], cwd=work, check=True
    )
    raw = run("TSAN_OPTIONS=halt_on_error=0 ./race", work)
    return raw, keys_where(raw, "data race", "#0 worker")


def unittest_verbose(work, _tools):
    body = "import unittest\n\nclass Prices(unittest.TestCase):\n"
    for i in range(300):
        check = "self.assertEqual(round(2.675, 2), 2.68)" if i == 201 else "self.assertTrue(True)"
        body += f"    def test_price_{i:03}(self):\n        {check}\n"
    write(work / "test_prices.py", body)
    raw = run(shell("python3", "-m", "unittest", "-v", "test_prices"), work)
    return raw, keys_where(raw, "FAIL: test_price_201", "AssertionError: 2.67 != 2.68")


def make_keep_going(work, _tools):
    rules = "all: " + " ".join(f"out/o{i}" for i in range(600)) + "\n"
    rules += "out/%: src/%\n\t@mkdir -p out && cmp -s $< ref/$* && cp $< $@ && echo \"built $@\"\n"
    write(work / "Makefile", rules)
    for i in range(600):
        write(work / f"src/o{i}", f"data {i}\n")
        write(work / f"ref/o{i}", f"data {i}\n" if i != 97 else "stale\n")
    raw = run(shell("make", "-k", "--no-print-directory"), work)
    return raw, keys_where(raw, "out/o97] Error 1")


def javac_lint(work, _tools):
    body = "import java.util.*;\npublic class Report {\n"
    for i in range(120):
        body += f"  List raw{i}() {{ List l = new ArrayList(); l.add({i}); return l; }}\n"
    body += "  int broken() { return missingCounter; }\n}\n"
    write(work / "Report.java", body)
    raw = run(shell("javac", "-Xlint:all", "-Xmaxwarns", "1000", "Report.java"), work)
    return raw, keys_where(raw, "cannot find symbol")


def python_warnings(work, _tools):
    body = "import warnings, datetime\n"
    body += "for i in range(900):\n    print(f'row {i} stamped', datetime.datetime.utcnow().year)\n"
    body += "open('ledger.txt', 'w').write('x')\n"
    body += "import sys; sys.exit(int('7 rows'))\n"
    write(work / "stamp.py", body)
    raw = run(shell("python3", "-W", "always", "stamp.py"), work)
    return raw, keys_where(raw, "invalid literal for int()")


def git_rebase_conflict(work, _tools):
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.email", "a@example.com")
    git(work, "config", "user.name", "A")
    write(work / "notes.txt", "".join(f"note {n}\n" for n in range(50)))
    git(work, "add", ".")
    git(work, "commit", "-qm", "base")
    git(work, "checkout", "-qb", "topic")
    for i in range(60):
        write(work / f"topic/t{i}.txt", f"topic {i}\n")
        if i == 41:
            text = (work / "notes.txt").read_text().replace("note 20\n", "note 20 topic\n")
            (work / "notes.txt").write_text(text)
        git(work, "add", ".")
        git(work, "commit", "-qm", f"topic step {i}")
    git(work, "checkout", "-q", "main")
    text = (work / "notes.txt").read_text().replace("note 20\n", "note 20 main\n")
    (work / "notes.txt").write_text(text)
    git(work, "commit", "-qam", "main edit")
    git(work, "checkout", "-q", "topic")
    raw = run("GIT_EDITOR=true git rebase --verbose main", work)
    return raw, keys_where(raw, "CONFLICT (content): Merge conflict in notes.txt")


def sort_check(work, _tools):
    for i in range(300):
        rows = [f"{n:05}" for n in range(20)]
        if i == 173:
            rows[12], rows[13] = rows[13], rows[12]
        write(work / f"shards/s{i:03}.txt", "\n".join(rows) + "\n")
    script = 'for f in shards/*.txt; do sort -c "$f" && echo "in order: $f"; done\n'
    write(work / "check.sh", script)
    raw = run(shell("bash", "check.sh"), work)
    return raw, keys_where(raw, "s173.txt:14: disorder")


def gzip_test(work, _tools):
    for i in range(250):
        write(work / f"logs/day{i:03}.log", f"entry {i}\n" * 200)
    subprocess.run("gzip logs/*.log", shell=True, cwd=work, check=True)
    damaged = work / "logs/day144.log.gz"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    raw = run("gzip -tv logs/*.gz", work)
    return raw, keys_where(raw, "day144.log.gz: invalid compressed data")


def iconv_convert(work, _tools):
    for i in range(300):
        text = f"caf\u00e9 menu {i}\n".encode("latin-1")
        if i == 211:
            text = b"caf\xc3 menu 211\n"
        (work / "menus").mkdir(exist_ok=True)
        (work / f"menus/m{i:03}.txt").write_bytes(text)
    script = (
        'for f in menus/*.txt; do iconv -f utf-8 -t ascii//TRANSLIT "$f" > /dev/null '
        '&& echo "converted $f"; done\n'
    )
    write(work / "convert.sh", script)
    raw = run(shell("bash", "convert.sh"), work)
    return raw, keys_where(raw, "illegal input sequence")


CASES = [
    ("flake8-undefined-name", False, flake8_undefined_name),
    ("pylint-undefined-variable", True, pylint_undefined_variable),
    ("pip-c-extension", False, pip_c_extension),
    ("git-merge-conflict", False, git_merge_conflict),
    ("perl-prove", True, perl_prove),
    ("node-tap", False, node_tap),
    ("tcl-unknown-command", False, tcl_unknown_command),
    ("perl-missing-module", True, perl_missing_module),
    ("perl-strict", False, perl_strict),
    ("sqlite-parse-error", False, sqlite_parse_error),
    ("sha256-mismatch", True, sha256_mismatch),
    ("tar-damaged-header", False, tar_damaged_header),
    ("curl-fail", False, curl_fail),
    ("json-tool-error", True, json_tool_error),
    ("bash-trace", False, bash_trace),
    ("tsan-race", False, tsan_race),
    ("unittest-verbose", True, unittest_verbose),
    ("make-keep-going", False, make_keep_going),
    ("javac-lint", True, javac_lint),
    ("python-warnings", False, python_warnings),
    ("git-rebase-conflict", True, git_rebase_conflict),
    ("sort-check", False, sort_check),
    ("gzip-test", False, gzip_test),
    ("iconv-convert", False, iconv_convert),
]


def tools_venv(out):
    venv = out / ".venv"
    if not (venv / "bin" / "pylint").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([venv / "bin" / "pip", "install", "-q", *PINNED], check=True)
    return venv / "bin"


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tools = tools_venv(out)
    cases = []
    for number, (name, held_out, make) in enumerate(CASES, 1):
        folder = f"{number:02}-{name}"
        work = out / ".work" / folder
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        raw, keys = make(work, tools)
        (out / folder).mkdir(exist_ok=True)
        (out / folder / "output.raw").write_bytes(raw)
        cases.append({"name": name, "dir": folder, "key_lines": keys, "held_out": held_out})
        print(f"{folder}: {len(raw)} bytes, key lines {keys}")
    (out / "cases.json").write_text(json.dumps(cases, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
