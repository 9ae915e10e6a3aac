"""Warnings a misbehaving peer could repeat on every request (an upstream's broken usage
reports, say), logged at most once per WARN_EVERY_S per subject with the number held
back, so no caller or upstream can flood the log."""

from __future__ import annotations

import logging
import time

WARN_EVERY_S = 10.0
_last: dict[str, tuple[float, int]] = {}


def warn_throttled(log: logging.Logger, subject: str, message: str) -> None:
    now = time.monotonic()
    last, held = _last.get(subject, (-WARN_EVERY_S, 0))
    if now - last < WARN_EVERY_S:
        _last[subject] = (last, held + 1)
        return
    _last[subject] = (now, 0)
    log.warning("%s%s", message, f" ({held} more like it not logged)" if held else "")
