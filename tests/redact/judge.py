#!/usr/bin/env python3
"""Judge spillway's redaction with Yelp detect-secrets (pinned: detect-secrets==1.5.0).

usage: judge.py RAW_FILE REDACTED_FILE

Scans both files with every detect-secrets plugin and its default filters, and exits 0 when
RAW has findings, none of them survives in REDACTED, and REDACTED has no findings at all.
Otherwise it prints the findings and exits 1 (2 on a usage or setup error).

detect-secrets picks its rules by file name: for a `.txt` file the keyword plugin wants quoted
values (`password = "x"`), for config files (`.cfg`, `.yaml`, `.ini`) it also takes bare ones
(`PASSWORD=x`, `password: x`). Command output is neither, so each file is scanned as two copies,
`output.txt` and `output.cfg`, and the findings are united: a redaction has to satisfy both.
"""

import os
import shutil
import sys
import tempfile

try:
    from detect_secrets.core.secrets_collection import SecretsCollection
    from detect_secrets.settings import default_settings
except ImportError:  # pragma: no cover
    sys.exit("judge.py needs detect-secrets: pip install detect-secrets==1.5.0")

PINNED = "1.5.0"
MODES = ("output.txt", "output.cfg")


def scan(path):
    """Findings in `path` as a sorted list of (line, type, secret) over every mode."""
    found = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODES:
            copy = os.path.join(tmp, name)
            shutil.copyfile(path, copy)
            with default_settings():
                secrets = SecretsCollection(root=tmp)
                secrets.scan_file(name)
                for _, secret in secrets:
                    found.add((secret.line_number, secret.type, secret.secret_value or ""))
    return sorted(found)


def show(findings, title):
    print(f"{title}: {len(findings)}")
    for line, kind, value in findings:
        shown = value if len(value) <= 12 else f"{value[:6]}...{value[-4:]}"
        print(f"  line {line:>5}  {kind:<34} {shown}")


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        from importlib.metadata import version

        if version("detect-secrets") != PINNED:
            print(f"warning: detect-secrets {version('detect-secrets')}, judge pinned to {PINNED}", file=sys.stderr)
    except Exception:  # pragma: no cover - metadata is informative only
        pass
    with open(argv[1], "rb") as f_raw, open(argv[2], "rb") as f_red:
        raw_lines, red_lines = f_raw.read().count(b"\n"), f_red.read().count(b"\n")
    if raw_lines and red_lines == 0:
        print(f"FAIL: REDACTED is empty ({argv[2]}) while RAW has {raw_lines} lines")
        return 1
    raw, redacted = scan(argv[1]), scan(argv[2])
    show(raw, f"findings in RAW {argv[1]}")
    print("plugins fired on RAW: " + ", ".join(sorted({kind for _, kind, _ in raw})))
    raw_values = {value for _, _, value in raw}
    survivors = [f for f in redacted if f[2] in raw_values]
    if redacted:
        show(redacted, f"findings in REDACTED {argv[2]}")
        if survivors:
            show(survivors, "of which survive from RAW")
    if not raw:
        print("FAIL: RAW has no findings, so the judge proves nothing")
        return 1
    if redacted:
        print("FAIL")
        return 1
    print("OK: every finding in RAW is gone and REDACTED has none")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
