"""Errors of the raftlock client: one class per error code of docs/API.md.

Every error carries its ``code`` (the wire's stable code) and a message.
Messages never hold a session id or an ACL secret.
"""

from __future__ import annotations


class RaftlockError(Exception):
    """An error with a stable ``code`` (docs/API.md's table)."""

    code = "internal"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.args[0]}"


class InvalidArgument(RaftlockError):
    """Malformed input: a bad name, a duration out of range, an unknown field."""

    code = "invalid_argument"


class SessionNotFound(RaftlockError):
    """The session is unknown, closed or expired."""

    code = "session_not_found"


class LockBusy(RaftlockError):
    """A try-lock found the lock held, or in lock-delay."""

    code = "lock_busy"


class NotHolder(RaftlockError):
    """A release by a session/holder that does not hold the lock."""

    code = "not_holder"


class WaitTimeout(RaftlockError):
    """A waiting acquire's wait ran out; the caller is no longer queued."""

    code = "wait_timeout"


class WaitCancelled(RaftlockError):
    """A waiting acquire was ended by its own holder."""

    code = "wait_cancelled"


class NoLeader(RaftlockError):
    """No leader reachable now and nothing was applied; retry."""

    code = "no_leader"


class UnknownOutcome(RaftlockError):
    """The client gave up on a request that may have been applied."""

    code = "unknown_outcome"


class Unreachable(RaftlockError):
    """No node answered before the call's deadline (client-side only)."""

    code = "unreachable"


class AlreadyHeld(RaftlockError):
    """The session already holds the lock, or is acquiring it (client-side
    only): locks are not re-entrant; one grant per session and lock name."""

    code = "already_held"


class LockRevoked(RaftlockError):
    """A lock's grant was revoked by the cluster: an operator's revocation
    (``kind`` "admin", with the operator's ``reason``) or the end of its
    hold limit (``kind`` "max_hold"). The lock's ``lost`` was set when a
    keepalive answer named the grant, before the cluster could grant the
    lock again (docs/API.md, "Revocation and operator sessions"). Its code
    is "lock_lost", as ``raftlock exec`` reports it."""

    code = "lock_lost"

    def __init__(self, name: str, token: int, kind: str, reason: str) -> None:
        self.name = name
        self.token = token
        self.kind = kind
        self.reason = reason
        if kind == "max_hold":
            msg = f"lock {name!r} (token {token}) revoked: its hold limit (max_hold) ran out"
        else:
            msg = f"lock {name!r} (token {token}) revoked by an operator: {reason}"
        super().__init__(msg)


_BY_CODE = {
    c.code: c
    for c in (
        InvalidArgument,
        SessionNotFound,
        LockBusy,
        NotHolder,
        WaitTimeout,
        WaitCancelled,
        NoLeader,
        UnknownOutcome,
        Unreachable,
        AlreadyHeld,
    )
}


def from_code(code: str, message: str) -> RaftlockError:
    """Returns the error of class for ``code`` (RaftlockError if none)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return RaftlockError(message, code or "internal")
    return cls(message)
