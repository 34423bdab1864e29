"""raftlock: the Python client of the raftlock lock service.

    import raftlock
    client = raftlock.Client(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])
    with client.session(ttl=3.0) as session:
        with session.lock("jobs/compactor") as lock:
            ...  # while not lock.lost.is_set(); pass lock.sequencer to resources

Standard library only; durations are seconds (float) or timedelta.
"""

from .client import (
    CLOSED,
    DEFAULT_GRACE,
    EXPIRED,
    JEOPARDY,
    SAFE,
    Client,
    Leader,
    Lock,
    ReleaseRequest,
    Session,
    lost_after,
    lost_margin,
)
from .errors import (
    AlreadyHeld,
    InvalidArgument,
    LockBusy,
    LockRevoked,
    NoLeader,
    NotHolder,
    RaftlockError,
    SessionNotFound,
    UnknownOutcome,
    Unreachable,
    WaitCancelled,
    WaitTimeout,
)
from .fence import EXCLUSIVE, SHARED, Fence, MalformedSequencer, Sequencer, StaleSequencer

__all__ = [
    "AlreadyHeld",
    "CLOSED",
    "DEFAULT_GRACE",
    "EXCLUSIVE",
    "EXPIRED",
    "JEOPARDY",
    "SAFE",
    "SHARED",
    "Client",
    "Fence",
    "Leader",
    "InvalidArgument",
    "Lock",
    "LockBusy",
    "LockRevoked",
    "MalformedSequencer",
    "NoLeader",
    "NotHolder",
    "RaftlockError",
    "ReleaseRequest",
    "Sequencer",
    "Session",
    "SessionNotFound",
    "StaleSequencer",
    "UnknownOutcome",
    "Unreachable",
    "WaitCancelled",
    "WaitTimeout",
    "lost_after",
    "lost_margin",
]
__version__ = "0.1.0"
