"""Durations: seconds (float) or timedelta in the API, Go strings on the wire."""

from __future__ import annotations

import re
from datetime import timedelta

Duration = float | int | timedelta

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)


def seconds(d: Duration) -> float:
    """Returns ``d`` in seconds."""
    if isinstance(d, timedelta):
        return d.total_seconds()
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError(f"a duration is seconds (float) or a timedelta, not {type(d).__name__}")
    return float(d)


def to_wire(d: Duration) -> str:
    """Formats ``d`` as a Go duration string, to the microsecond ("1500000us")."""
    s = seconds(d)
    us = round(s * 1e6)
    if us % 1_000_000 == 0:
        return f"{us // 1_000_000}s"
    if us % 1000 == 0:
        return f"{us // 1000}ms"
    return f"{us}us"


def from_wire(text: str) -> float:
    """Parses a Go duration string ("1m30s", "1.5s", "0s") into seconds."""
    t = text.strip()
    sign = 1.0
    if t[:1] in "+-" and t:
        sign = -1.0 if t[0] == "-" else 1.0
        t = t[1:]
    if t == "0":
        return 0.0
    total, pos = 0.0, 0
    for m in _PART.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(t) or not t:
        raise ValueError(f"not a duration: {text!r}")
    return sign * total
