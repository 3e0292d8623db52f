#!/usr/bin/python3
"""Summarises a `bazel test` run from its build event file (--build_event_json_file).

Bazel's own summary counts targets, and a target that timed out or crashed reports no failed
test case, so counting cases alone would call such a run green. This prints

  test targets: N passed, M failed
  failed: //label (TIMEOUT) ...
  slowest targets (time / Bazel timeout):
    //label  size  12.3 s / 60 s (21%)

and exits 1 when any target did not pass. A target that ran over half its timeout is named
as well: on a busy machine it is the next to time out (docs/testing.md).
"""
import json
import sys

TIMEOUT_BY_SIZE = {"SMALL": 60, "MEDIUM": 300, "LARGE": 900, "ENORMOUS": 3600}


def main(argv):
    if len(argv) < 2:
        print("usage: test_summary.py BUILD_EVENTS.json [SLOWEST=10]", file=sys.stderr)
        return 2
    slowest = int(argv[2]) if len(argv) > 2 else 10
    size = {}      # label -> SMALL / MEDIUM / ...
    status = {}    # label -> overall status
    seconds = {}   # label -> longest attempt (a shard's or a run's) in seconds
    with open(argv[1]) as events:
        for line in events:
            event = json.loads(line)
            ident = event.get("id", {})
            if "targetConfigured" in ident and "configured" in event:
                test_size = event["configured"].get("testSize")
                if test_size:
                    size[ident["targetConfigured"]["label"]] = test_size
            elif "testResult" in ident and "testResult" in event:
                label = ident["testResult"]["label"]
                millis = int(event["testResult"].get("testAttemptDurationMillis", 0))
                seconds[label] = max(seconds.get(label, 0.0), millis / 1000.0)
            elif "testSummary" in ident and "testSummary" in event:
                status[ident["testSummary"]["label"]] = event["testSummary"].get(
                    "overallStatus", "NO_STATUS")
            elif "targetCompleted" in ident and event.get("aborted") is not None:
                label = ident["targetCompleted"]["label"]
                if label in size:
                    status.setdefault(label, "FAILED_TO_BUILD")
    # A test target that never reported a summary (it did not build, or the run stopped).
    for label in size:
        status.setdefault(label, "NO_STATUS")
    failed = sorted(label for label, s in status.items() if s not in ("PASSED", "FLAKY"))
    print(f"test targets: {len(status) - len(failed)} passed, {len(failed)} failed")
    for label in failed:
        print(f"  failed: {label} ({status[label]})")
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    print("slowest targets (time / Bazel timeout):")
    for label, secs in ranked[:slowest]:
        limit = TIMEOUT_BY_SIZE.get(size.get(label, ""), 0)
        share = f" ({100 * secs / limit:.0f}%)" if limit else ""
        print(f"  {label}  {size.get(label, '?').lower()}  {secs:.1f} s / {limit} s{share}")
    over = [(label, secs) for label, secs in ranked
            if TIMEOUT_BY_SIZE.get(size.get(label, ""), 0) and
            secs > TIMEOUT_BY_SIZE[size[label]] / 2]
    for label, secs in over:
        print(f"  over half its timeout: {label} {secs:.1f} s "
              f"({size[label].lower()}, {TIMEOUT_BY_SIZE[size[label]]} s)")
    if not status:
        print("  no test target reported: the run did not start or did not build")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
