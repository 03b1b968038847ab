"""A node process that has done its work and exited 0 at once: what a test puts in place of
``subprocess.Popen`` to run ``probench eval`` without a ROS graph (a subclass writes the run
folder and the evaluator's result record the way the real node would)."""

from __future__ import annotations

import json
from pathlib import Path


class ExitedNode:
    def __init__(self, cmd: list[str], **_: object) -> None:
        self.returncode = 0
        if Path(cmd[0]).name == "evaluator_node":
            result = next(a for a in cmd if a.startswith("result_file:="))
            self.evaluate(Path(json.loads(result.split(":=", 1)[1])))

    def evaluate(self, result_file: Path) -> None:
        """The evaluator's work: write the run and its result record at ``result_file``."""

    def poll(self) -> int:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        raise AssertionError("an exited node is not signalled")
