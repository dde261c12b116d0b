"""Progress of long work, on stderr: silent for work that ends within a few seconds (most runs), then one
line per stage with the time so far, so a user of a large rules file sees what stampgen is doing."""

from __future__ import annotations

import os
import time
from typing import TextIO

# Seconds of work before the first progress line; STAMPGEN_PROGRESS_AFTER overrides it (tests set 0).
DEFAULT_AFTER = 2.0


class Progress:
    def __init__(self, command: str, err: TextIO, *, enabled: bool = True) -> None:
        self.command = command
        self.err = err
        self.enabled = enabled
        self.start = time.monotonic()
        try:
            self.after = float(os.environ.get("STAMPGEN_PROGRESS_AFTER", DEFAULT_AFTER))
        except ValueError:
            self.after = DEFAULT_AFTER

    def stage(self, what: str) -> None:
        """A stage begins: say so once the work has taken longer than `after` seconds."""
        elapsed = time.monotonic() - self.start
        if self.enabled and elapsed >= self.after:
            print(f"stampgen {self.command}: {what} ({elapsed:.1f} s)", file=self.err, flush=True)
