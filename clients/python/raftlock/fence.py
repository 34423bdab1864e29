"""Sequencers and the fence a protected resource checks them with.

The rules are those of the Go package ``sequencer`` (docs/DESIGN.md,
"Sequencers"), pinned by the shared vectors in testdata/fence-vectors.json.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass

EXCLUSIVE = "exclusive"
SHARED = "shared"

#: The longest lock name, in bytes of UTF-8, a sequencer may carry.
MAX_NAME_BYTES = 512
_MAX_TOKEN = 2**64 - 1
_TOKEN = re.compile(r"[1-9][0-9]*", re.ASCII)
_SLOT = re.compile(r"p(0|[1-9][0-9]*)/(0|[1-9][0-9]*)", re.ASCII)
_OLD_SLOT = re.compile(r"p(0|[1-9][0-9]*)", re.ASCII)
#: A semaphore has at most this many permits (the cluster's MaxPermits),
#: its slots numbered below its permits.
MAX_SLOTS = 256


class MalformedSequencer(ValueError):
    """Text that is not a canonical sequencer, or an invalid Sequencer."""


class StaleSequencer(Exception):
    """A sequencer whose grant has been superseded (see Fence)."""


def check_name(name: str) -> None:
    """Raises MalformedSequencer unless ``name`` is a valid lock name:
    1 to 512 bytes of UTF-8 without control characters."""
    if not name:
        raise MalformedSequencer("lock name must not be empty")
    try:
        n = len(name.encode("utf-8"))
    except UnicodeEncodeError as e:  # a lone surrogate
        raise MalformedSequencer("lock name is not valid UTF-8") from e
    if n > MAX_NAME_BYTES:
        raise MalformedSequencer(f"lock name is {n} bytes; the limit is {MAX_NAME_BYTES}")
    if name.isascii() and name.isprintable():
        return  # all of U+0020..U+007E: no control character
    for ch in name:
        if unicodedata.category(ch) == "Cc":
            raise MalformedSequencer(f"lock name contains control character U+{ord(ch):04X}")


@dataclass(frozen=True)
class Sequencer:
    """One grant of one lock: its name, mode and fencing token; for one slot
    of a semaphore, ``slot`` names it and ``permits`` gives the semaphore's
    permits (both ``None`` on a plain lock).

    ``str(seq)`` is the stable printable form ``rl1:<x|s>:<token>:<name>``,
    or ``rl1:p<slot>/<permits>:<token>:<name>`` for a slot (mode exclusive,
    slot < permits <= 256)."""

    name: str
    mode: str
    token: int
    slot: int | None = None
    permits: int | None = None

    def __str__(self) -> str:
        m = "s" if self.mode == SHARED else "x"
        if self.slot is not None:
            m = f"p{self.slot}/{self.permits}"
        return f"rl1:{m}:{self.token}:{self.name}"

    def config(self) -> int:
        """What a stored lock keeps until it is freed: 0 for a plain lock's
        sequencer, the permits for a semaphore slot's."""
        return self.permits if self.slot is not None and self.permits is not None else 0

    def validate(self) -> None:
        """Raises MalformedSequencer unless this could have come from parse."""
        check_name(self.name)
        if self.mode not in (EXCLUSIVE, SHARED):
            raise MalformedSequencer(f"lock {self.name!r}: invalid mode {self.mode!r}")
        if not isinstance(self.token, int) or not 0 < self.token <= _MAX_TOKEN:
            raise MalformedSequencer(f"lock {self.name!r}: token must be a positive 64-bit integer")
        if (self.slot is None) != (self.permits is None):
            raise MalformedSequencer(f"lock {self.name!r}: a slot sequencer names both its slot and its permits")
        if self.slot is not None and (
            self.mode != EXCLUSIVE
            or not isinstance(self.slot, int)
            or not isinstance(self.permits, int)
            or not 0 < self.permits <= MAX_SLOTS
            or not 0 <= self.slot < self.permits
        ):
            raise MalformedSequencer(
                f"lock {self.name!r}: a slot sequencer is exclusive, of a slot below its permits, at most {MAX_SLOTS}"
            )

    @staticmethod
    def parse(text: str) -> Sequencer:
        """Parses the printable form; accepts exactly the canonical form.
        The ``p<slot>`` form of unreleased builds, without the permits, is
        refused."""
        parts = text.split(":", 3)
        if len(parts) != 4 or parts[0] != "rl1":
            raise MalformedSequencer(f"{text!r}: want rl1:<x|s>:<token>:<name>")
        slot = permits = None
        if parts[1] == "x":
            mode = EXCLUSIVE
        elif parts[1] == "s":
            mode = SHARED
        elif m := _SLOT.fullmatch(parts[1]):
            mode, slot, permits = EXCLUSIVE, int(m.group(1)), int(m.group(2))
            if not 0 < permits <= MAX_SLOTS or slot >= permits:
                raise MalformedSequencer(
                    f"{text!r}: slot mode must be p<slot>/<permits>, decimal, with slot < permits <= {MAX_SLOTS}"
                )
        elif _OLD_SLOT.fullmatch(parts[1]):
            raise MalformedSequencer(
                f"{text!r}: a slot sequencer must name its semaphore's permits (p<slot>/<permits>); "
                "the p<slot> form of unreleased builds is no longer accepted: acquire the semaphore again"
            )
        else:
            raise MalformedSequencer(f"{text!r}: mode must be x, s or p<slot>/<permits>")
        if not _TOKEN.fullmatch(parts[2]) or int(parts[2]) > _MAX_TOKEN:
            raise MalformedSequencer(f"{text!r}: token must be a positive decimal integer")
        try:
            check_name(parts[3])
        except MalformedSequencer as e:
            raise MalformedSequencer(f"{text!r}: {e}") from None
        return Sequencer(parts[3], mode, int(parts[2]), slot, permits)


def _config_name(c: int) -> str:
    return "plain lock" if c == 0 else f"semaphore of {c}"


class Fence:
    """What a protected resource uses to validate fencing tokens.

    Per lock name it keeps the highest exclusive token and the highest
    token of any mode it admitted, the highest token per semaphore slot,
    the config (0 plain, else permits) of the highest token and the highest
    token admitted with another config:

    * any sequencer is stale below a token of another config (plain, or a
      semaphore of another number of permits): a name's kind and permits
      change only after it was freed, so that grant belongs to a later
      tenure; and below the highest token of another config than its own,
      even if a later tenure took its config back;
    * a shared sequencer is current unless a higher exclusive token was
      admitted (readers are admitted in any order until a writer takes over);
    * an exclusive sequencer is current unless a higher token of either mode
      (or of any slot) was admitted;
    * a slot sequencer (one slot of a semaphore) is current unless a higher
      token of the same slot, or a higher exclusive token, was admitted;
      slot grants do not count as exclusive.

    A token equal to a mark is admitted. For strict fencing, call check and
    do the protected write under one critical section. Safe for concurrent
    use; marks live in memory only.
    """

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._marks: dict[str, tuple[int, int]] = {}  # name -> (any, exclusive)
        self._slots: dict[str, dict[int, int]] = {}  # name -> slot -> highest token
        self._tenure: dict[str, tuple[int, int]] = {}  # name -> (config of any, other)

    def check(self, seq: Sequencer | str) -> None:
        """Admits ``seq`` and raises the marks, or raises StaleSequencer
        (superseded) or MalformedSequencer (not a valid sequencer)."""
        s = Sequencer.parse(seq) if isinstance(seq, str) else seq
        s.validate()
        with self._mu:
            any_, excl = self._marks.get(s.name, (0, 0))
            config, other = self._tenure.get(s.name, (0, 0))
            c = s.config()
            if c != config and s.token < any_:
                raise StaleSequencer(
                    f"lock {s.name!r}: token {s.token} ({_config_name(c)}) is lower than token {any_} "
                    f"({_config_name(config)}): the name's kind or permits changed since the grant"
                )
            if c == config and s.token < other:
                raise StaleSequencer(
                    f"lock {s.name!r}: token {s.token} ({_config_name(c)}) is lower than token {other} "
                    f"(not a {_config_name(c)}): the name's kind or permits changed since the grant"
                )
            self._admit_mode(s, any_, excl)
            if s.token > any_ and c != config:
                self._tenure[s.name] = (c, any_)

    def _admit_mode(self, s: Sequencer, any_: int, excl: int) -> None:
        if s.slot is not None:
            if s.token < excl:
                raise StaleSequencer(
                    f"lock {s.name!r}: slot {s.slot} token {s.token} is lower than the highest exclusive token seen, {excl}"
                )
            slots = self._slots.get(s.name, {})
            high = slots.get(s.slot, 0)
            if s.token < high:
                raise StaleSequencer(
                    f"lock {s.name!r}: slot {s.slot} token {s.token} is lower than the highest token of that slot seen, {high}"
                )
            self._slots.setdefault(s.name, {})[s.slot] = s.token
            self._marks[s.name] = (max(any_, s.token), excl)
            return
        if s.mode == SHARED:
            if s.token < excl:
                raise StaleSequencer(
                    f"lock {s.name!r}: shared token {s.token} is lower than the highest exclusive token seen, {excl}"
                )
            self._marks[s.name] = (max(any_, s.token), excl)
            return
        if s.token < any_:
            raise StaleSequencer(f"lock {s.name!r}: token {s.token} is lower than the highest seen, {any_}")
        self._marks[s.name] = (s.token, s.token)

    def highest(self, name: str) -> int:
        """The highest token of either mode admitted for ``name`` (0: none)."""
        with self._mu:
            return self._marks.get(name, (0, 0))[0]

    def highest_slot(self, name: str, slot: int) -> int:
        """The highest token admitted for ``slot`` of semaphore ``name`` (0: none)."""
        with self._mu:
            return self._slots.get(name, {}).get(slot, 0)

    def highest_exclusive(self, name: str) -> int:
        """The highest exclusive token admitted for ``name`` (0: none)."""
        with self._mu:
            return self._marks.get(name, (0, 0))[1]
