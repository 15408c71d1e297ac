"""Test cases run in a child process with an address-space limit and a time limit, so that a case that
crashes the interpreter, exhausts memory or hangs fails its own test instead of ending the test run.

A worker (one per test process, restarted after a case that killed it) imports the module that defines
the cases and runs them one at a time: each case is ``(call, error, message)``, where ``call(monkeypatch)``
must raise exactly ``error`` with ``message`` (a regular expression) found in its text, as
``pytest.raises(error, match=message)`` checks.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

WORKER = r"""
import importlib, json, re, resource, sys
import pytest

module_name, table, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
cases = getattr(importlib.import_module(module_name), table)()
print("READY", flush=True)
for line in sys.stdin:
    call, error, message = cases[line.strip()]
    with pytest.MonkeyPatch.context() as monkeypatch:
        try:
            call(monkeypatch)
        except BaseException as raised:
            matched = type(raised) is error and re.search(message, str(raised))
            failure = None if matched else f"raised {type(raised).__name__}: {raised}"
        else:
            failure = "raised nothing"
    print("RESULT " + json.dumps(failure), flush=True)
"""

STARTUP_SECONDS = 300
"""The longest a worker may take to import the package and the cases."""


class IsolatedCases:
    """Runs the cases that ``module``'s function ``table()`` returns ({case id: (call, error, message)}) in a
    worker limited to ``memory_bytes`` of address space, each case within ``seconds``."""

    def __init__(self, module: str, table: str, *, memory_bytes: int, seconds: float):
        self.arguments = [module, table, str(memory_bytes)]
        self.seconds = seconds
        self.process = None
        self.lines: queue.Queue = queue.Queue()
        self.timed_out = False

    def _start(self) -> None:
        tests = str(Path(__file__).parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, *self.arguments], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
        self.lines = lines = queue.Queue()  # this worker's: a killed worker's reader ends into its own queue
        stdout = self.process.stdout
        threading.Thread(target=lambda: [lines.put(line) for line in stdout] + [lines.put(None)], daemon=True).start()
        if self._next_line("READY", STARTUP_SECONDS) is None:
            raise RuntimeError(f"the worker did not start: {self._ended()}")

    def _next_line(self, prefix: str, seconds: float) -> str | None:
        """The next line of the worker's output that starts with ``prefix`` (without it); None when the worker's
        output ends (it died) or ``seconds`` pass first (``self.timed_out``)."""
        self.timed_out = False
        while True:
            try:
                line = self.lines.get(timeout=seconds)
            except queue.Empty:
                self.timed_out = True
                return None
            if line is None:
                return None
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def _ended(self) -> str:
        """Stop the worker; what became of it, for a failure message."""
        process, self.process = self.process, None
        if self.timed_out:
            process.kill()
            process.wait()
            return f"still running after {self.seconds} s, killed"
        # its output ended: it is exiting (the pipe closes a moment before the process is reaped)
        return f"the worker died with exit status {process.wait(timeout=60)}"

    def run(self, case_id: str) -> str | None:
        """None when the case raised what it must; else what went wrong (a wrong or missing exception, a
        crash, or a hang)."""
        if self.process is None:
            self._start()
        self.process.stdin.write(case_id + "\n")
        self.process.stdin.flush()
        result = self._next_line("RESULT ", self.seconds)
        return json.loads(result) if result is not None else self._ended()

    def close(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait(timeout=30)
