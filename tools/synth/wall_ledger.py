"""Wall-clock time of every train_all invocation, kept so that a killed run still counts.

Each invocation owns one small JSON file under <train dir>/invocations/ and rewrites it every
`interval` seconds with the time it has run so far. A run that is killed (SIGKILL, a closed
session, a rebooted machine) therefore loses at most one interval from the family's total
instead of its whole wall time, and two invocations never write the same file.
"""
import json
import os
import threading
import time

import trainer


class WallLedger:
    def __init__(self, directory, interval=30.0):
        self.interval = interval
        self.start = time.time()
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{int(self.start * 1000)}-{os.getpid()}.json")
        self._stop = threading.Event()
        self._thread = None
        self.write()

    def write(self):
        trainer.write_json(self.path, {"start": self.start,
                                       "seconds": round(time.time() - self.start, 1)})

    def __enter__(self):
        def beat():
            while not self._stop.wait(self.interval):
                self.write()

        self._thread = threading.Thread(target=beat, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.write()
        return False


def invocations(directory):
    """The seconds of every invocation recorded under `directory`, oldest first."""
    if not os.path.isdir(directory):
        return []
    entries = []
    for name in os.listdir(directory):
        if name.endswith(".json"):
            with open(os.path.join(directory, name)) as f:
                entry = json.load(f)
            entries.append((entry["start"], entry["seconds"]))
    return [seconds for _, seconds in sorted(entries)]
