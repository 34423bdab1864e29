#!/usr/bin/env python3
"""raftlock-bench's driver for the Python client (cmd/raftlock-bench
README, "Other clients"): runs the clients of a scenario through the
client's public API (raftlock.Client, Session, Lock), one thread per client,
and speaks the driver protocol: work as flags, one JSON object per line on
stdout, one command per line on stdin. Standard library only.

  --mode pairs     --clients N sessions, each looping ``with s.lock(name):``
                   on its own lock (NAME/i; --shared: all on NAME). Prints
                   {"event":"ready"}; counts from "measure" until "stop",
                   then prints {"event":"result","pairs","errors","lat_us"}.
  --mode sessions  --sessions S sessions opened (--workers at a time, at
                   most --open-rate a second, spread evenly), each
                   kept alive by its own Session; prints {"event":"ready",
                   "lat_us": opens, "errors"}; "hold N": the first N take a
                   lock each ({"event":"held"}); "stats": {"event":"stats",
                   "expired","jeopardy"} (counted by on_state).
End of stdin: every session is closed and the driver exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import raftlock  # noqa: E402
from raftlock.errors import RaftlockError  # noqa: E402


def _say(**msg: object) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _duration(s: str) -> float:
    """A Go duration of the forms time.Duration.String() prints (1m30s, 15s, 500ms)."""
    total, num = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    i = 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        for u in ("ms", "us", "µs", "ns", "h", "m", "s"):
            if s.startswith(u, i):
                total += float(num) * units[u]
                num = ""
                i += len(u)
                break
        else:
            raise ValueError(f"duration {s!r}")
    if num:
        raise ValueError(f"duration {s!r}: no unit")
    return total


class Pairs:
    def __init__(self, client: raftlock.Client, args: argparse.Namespace) -> None:
        self.client, self.args = client, args
        self.measuring = False
        self.stop = threading.Event()
        self.lat: list[list[int]] = []
        self.pairs = [0] * args.clients
        self.errors = [0] * args.clients
        self.last_error = ""
        with ThreadPoolExecutor(16) as ex:
            self.sessions = list(ex.map(self._open, range(args.clients)))
        self.threads = []
        for i in range(args.clients):
            self.lat.append([])
            t = threading.Thread(target=self._run, args=(i,), name=f"bench-{i}", daemon=True)
            self.threads.append(t)

    def _open(self, i: int) -> raftlock.Session:
        return self.client.session(ttl=self.args.ttl, lock_delay=0, name=f"bench-py-{i}")

    def _lock_name(self, i: int) -> str:
        return self.args.lock if self.args.shared else f"{self.args.lock}/{i}"

    def _run(self, i: int) -> None:
        name, lat = self._lock_name(i), self.lat[i]
        while not self.stop.is_set():
            s = self.sessions[i]
            t0 = time.perf_counter_ns()
            try:
                with s.lock(name):
                    pass
            except RaftlockError as e:
                if self.stop.is_set():
                    return
                self.last_error = f"{type(e).__name__}: {e}"
                if self.measuring:
                    self.errors[i] += 1
                if s.state == raftlock.EXPIRED:
                    try:
                        self.sessions[i] = self._open(i)
                    except RaftlockError:
                        pass
                time.sleep(0.02)
                continue
            if self.measuring:
                lat.append((time.perf_counter_ns() - t0) // 1000)
                self.pairs[i] += 1

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()
        lat = [v for one in self.lat for v in one]
        _say(event="result", pairs=sum(self.pairs), errors=sum(self.errors), lat_us=lat, last_error=self.last_error)

    def close(self) -> None:
        with ThreadPoolExecutor(16) as ex:
            list(ex.map(lambda s: s.close(), self.sessions))


class Sessions:
    def __init__(self, client: raftlock.Client, args: argparse.Namespace) -> None:
        self.client, self.args = client, args
        self.mu = threading.Lock()
        self.expired = 0
        self.jeopardy = 0
        self.open_errors = 0
        self.locks: list[raftlock.Lock] = []
        lat: list[int] = []

        start = time.monotonic()

        def open_one(i: int) -> raftlock.Session:
            if args.open_rate > 0:  # session i opens no earlier than i/rate s in
                time.sleep(max(0.0, start + i / args.open_rate - time.monotonic()))
            while True:
                t0 = time.perf_counter_ns()
                try:
                    s = client.session(ttl=args.ttl, lock_delay=0, name=f"keep-py-{i}", on_state=self._on_state)
                except RaftlockError:
                    with self.mu:
                        self.open_errors += 1
                    time.sleep(0.05)
                    continue
                with self.mu:
                    lat.append((time.perf_counter_ns() - t0) // 1000)
                return s

        with ThreadPoolExecutor(args.workers) as ex:
            self.sessions = list(ex.map(open_one, range(args.sessions)))
        _say(event="ready", lat_us=lat, errors=self.open_errors)

    def _on_state(self, st: str) -> None:
        with self.mu:
            if st == raftlock.EXPIRED:
                self.expired += 1
            elif st == raftlock.JEOPARDY:
                self.jeopardy += 1

    def hold(self, n: int) -> None:
        def take(i: int) -> raftlock.Lock:
            return self.sessions[i].try_lock(f"{self.args.lock}/{i}")

        with ThreadPoolExecutor(self.args.workers) as ex:
            self.locks = list(ex.map(take, range(n)))
        _say(event="held")

    def stats(self) -> None:
        with self.mu:
            _say(event="stats", expired=self.expired, jeopardy=self.jeopardy)

    def close(self) -> None:
        with ThreadPoolExecutor(self.args.workers) as ex:
            list(ex.map(lambda s: s.close(), self.sessions))


def spread(args: argparse.Namespace) -> int:
    """Runs the pairs mode's clients in args.procs child processes of this
    driver (each its own Client and GIL) and relays the protocol: ready
    when all are (with their PIDs, whose CPU the bench counts), measure
    and stop to each, one merged result."""
    import subprocess

    procs = []
    n = args.clients
    for k in range(args.procs):
        share = n // args.procs + (1 if k < n % args.procs else 0)
        if share == 0:
            continue
        lock = args.lock if args.shared else f"{args.lock}/p{k}"
        cmd = [sys.executable, os.path.abspath(__file__), "--mode", "pairs", "--addr", args.addr,
               "--clients", str(share), "--lock", lock, "--ttl", str(args.ttl) + "s"]
        if args.shared:
            cmd.append("--shared")
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1))
    for p in procs:
        json.loads(p.stdout.readline())  # ready
    _say(event="ready", pids=[p.pid for p in procs])
    for line in sys.stdin:
        cmd = line.strip()
        if cmd in ("measure", "stop"):
            for p in procs:
                p.stdin.write(cmd + "\n")
                p.stdin.flush()
        if cmd == "stop":
            merged: dict = {"event": "result", "pairs": 0, "errors": 0, "lat_us": [], "last_error": ""}
            for p in procs:
                r = json.loads(p.stdout.readline())
                merged["pairs"] += r["pairs"]
                merged["errors"] += r["errors"]
                merged["lat_us"] += r["lat_us"]
                merged["last_error"] = r["last_error"] or merged["last_error"]
            _say(**merged)
    for p in procs:
        p.stdin.close()
    for p in procs:
        p.wait()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("pairs", "sessions"), default="pairs")
    ap.add_argument("--addr", required=True, help="host:port,... (the leader's first)")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--lock", default="bench")
    ap.add_argument("--shared", action="store_true")
    ap.add_argument("--ttl", type=_duration, default=15.0)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument(
        "--open-rate",
        type=float,
        default=0.0,
        help="sessions mode: sessions opened per second at most, spread evenly (0: as fast as --workers go)",
    )
    ap.add_argument(
        "--procs",
        type=int,
        default=1,
        help="pairs mode: spread the clients over this many processes (one Client each), "
        "so that the GIL of one process does not bound them",
    )
    args = ap.parse_args()
    if args.mode == "pairs" and args.procs > 1:
        return spread(args)
    client = raftlock.Client(args.addr.split(","))
    if args.mode == "pairs":
        p = Pairs(client, args)
        p.start()
        _say(event="ready")
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "measure":
                p.measuring = True
            elif cmd == "stop":
                p.finish()
        p.stop.set()
        p.close()
        return 0
    s = Sessions(client, args)
    for line in sys.stdin:
        cmd = line.split()
        if cmd and cmd[0] == "hold":
            s.hold(int(cmd[1]))
        elif cmd == ["stats"]:
            s.stats()
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
