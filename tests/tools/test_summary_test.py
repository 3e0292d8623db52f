"""tools/test_summary.py against build events Bazel wrote for three probe targets (one passed,
one killed itself with SIGSEGV, one slept past its 60 s timeout; recorded once with
`bazel test --build_event_json_file`, only the fields the summary reads kept): a timed-out or
crashed target counts as failed even though neither reported a failed test case."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SUMMARY = "tools/test_summary.py"
EVENTS = "tests/tools/data/build_events_timeout.json"


def run(events_path):
    done = subprocess.run([sys.executable, SUMMARY, events_path], capture_output=True, text=True)
    return done.returncode, done.stdout


def events_without(kind_and_label):
    """The recorded events minus those of `kind` for `label`, in a temporary file."""
    kind, label = kind_and_label
    kept = []
    with open(EVENTS) as f:
        for line in f:
            ident = json.loads(line)["id"]
            if kind in ident and ident[kind]["label"] == label:
                continue
            kept.append(line)
    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    handle.writelines(kept)
    handle.close()
    return handle.name


class TestSummaryTest(unittest.TestCase):
    def test_timeout_and_crash_count_as_failed(self):
        code, out = run(EVENTS)
        self.assertEqual(code, 1, out)
        self.assertIn("test targets: 1 passed, 2 failed", out)
        self.assertIn("failed: //tests/probe:crashes_test (FAILED)", out)
        self.assertIn("failed: //tests/probe:sleeps_test (TIMEOUT)", out)

    def test_slowest_targets_are_shown_against_their_timeout(self):
        _, out = run(EVENTS)
        lines = out.splitlines()
        first = lines.index("slowest targets (time / Bazel timeout):") + 1
        self.assertEqual(lines[first].split(), ["//tests/probe:sleeps_test", "small", "60.0", "s",
                                                "/", "60", "s", "(100%)"])
        self.assertIn("over half its timeout: //tests/probe:sleeps_test 60.0 s (small, 60 s)", out)

    def test_all_passed_exits_zero(self):
        path = events_without(("testSummary", "//tests/probe:never"))  # a copy
        with open(path) as f:
            text = f.read().replace('"overallStatus":"FAILED"', '"overallStatus":"PASSED"')
            text = text.replace('"overallStatus":"TIMEOUT"', '"overallStatus":"PASSED"')
        with open(path, "w") as f:
            f.write(text)
        code, out = run(path)
        os.unlink(path)
        self.assertEqual(code, 0, out)
        self.assertIn("test targets: 3 passed, 0 failed", out)

    def test_a_target_without_a_summary_is_failed(self):
        # A target that did not build, or a run stopped before it, reports no summary.
        path = events_without(("testSummary", "//tests/probe:passes_test"))
        code, out = run(path)
        os.unlink(path)
        self.assertEqual(code, 1, out)
        self.assertIn("failed: //tests/probe:passes_test (NO_STATUS)", out)

    def test_no_target_at_all_is_not_a_pass(self):
        handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        handle.close()
        code, out = run(handle.name)
        os.unlink(handle.name)
        self.assertEqual(code, 1, out)
        self.assertIn("no test target reported", out)


if __name__ == "__main__":
    unittest.main()
