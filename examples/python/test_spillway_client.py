"""Exercises spillway_client.py against a live daemon ($SPILLWAY_SOCKET): run, read, grep."""

import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spillway_client import SpillwayError, bash_tool, grep, read, run  # noqa: E402


class ClientTest(unittest.TestCase):
    def test_run_read_grep(self):
        exit = run("seq 1 50000", max_lines=10)
        self.assertEqual(exit["exit_code"], 0)
        self.assertTrue(exit["truncated"])
        self.assertEqual(exit["total_lines"], 50000)
        self.assertIn("--offset 6", exit["content"])
        page = read(exit["id"], offset=6, limit=3)
        self.assertEqual(page["text"], "6\n7\n8\n")
        self.assertEqual(page["next_offset"], 9)
        found = grep(exit["id"], r"^4999[89]$")
        self.assertEqual([(l["line"], l["text"]) for l in found["lines"]], [(49998, "49998"), (49999, "49999")])

    def test_a_failing_command_and_the_bash_tool_text(self):
        text = bash_tool("echo oops; exit 7")
        self.assertTrue(text.startswith("oops\n[exit code 7; run "), text)

    def test_errors_say_what_is_wrong(self):
        with self.assertRaises(SpillwayError) as caught:
            read("20200101-000000-aaaa")
        self.assertEqual(caught.exception.code, "unknown_run")
        exit = run("true")
        with self.assertRaises(SpillwayError) as caught:
            grep(exit["id"], "(")
        self.assertEqual(caught.exception.code, "bad_pattern")

    def test_a_daemon_of_another_user_is_refused_before_anything_is_sent(self):
        me = os.geteuid()
        with mock.patch("os.geteuid", return_value=me + 1):
            with self.assertRaises(SpillwayError) as caught:
                run("echo secret")
        self.assertEqual(caught.exception.code, "forbidden")
        self.assertIn(f"it runs as uid {me}, not as this user (uid {me + 1})", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
