#!/usr/bin/env bash
# One measured run of the 1-client path (docs/RUNS.md, "One pair at one
# client: the hand-offs measured"): three raftlockd processes of RAFTLOCKD on
# 127.0.0.81-83 (free ports, data dirs under WORK, fsync on, raft-wal), one
# raftlock-bench process (BENCH) driving CLIENTS clients for DUR after a 2 s
# warm-up; prints one line: pairs/s, p50/p99, CPU µs per pair of each
# process (utime+stime from /proc/PID/stat over 5 s) and syscalls per pair
# (perf stat -e raw_syscalls:sys_enter over the same 5 s), with the load
# average. Every process it starts is stopped by its PID at the end.
#
#   run.sh LABEL [raftlockd flags...]
#   env: RAFTLOCKD, BENCH (binaries), WORK (default /tmp/onepair), DUR (8s),
#        CLIENTS (1), ENVS / BENVS (environment of the nodes / of the bench,
#        e.g. GOMAXPROCS=1), PERF (empty: no perf stat), HOOK (shell run
#        at the start of the measured window; sees PIDS, BP, LEADER, DP),
#        STREAM (1: the nodes serve the stream protocol and the bench's
#        clients use it, --http stream).
set -u
LABEL=$1; shift
: "${RAFTLOCKD:?set RAFTLOCKD to a raftlockd binary}" "${BENCH:?set BENCH to a raftlock-bench binary}"
WORK=${WORK:-/tmp/onepair}; DUR=${DUR:-8s}; CLIENTS=${CLIENTS:-1}
W=$WORK/run; rm -rf "$W"; mkdir -p "$W"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HP=$(freeport); RP=$(freeport); DP=$(freeport); SP=$(freeport)
PEERS="n1=127.0.0.81:$RP,n2=127.0.0.82:$RP,n3=127.0.0.83:$RP"
PIDS=()
for n in 1 2 3; do
	env ${ENVS:-} "$RAFTLOCKD" --id n$n --data-dir "$W/n$n" --raft-addr 127.0.0.8$n:$RP --http-addr 127.0.0.8$n:$HP \
		--debug-addr 127.0.0.8$n:$DP --peers "$PEERS" --log-level warn ${STREAM:+--stream-addr 127.0.0.8$n:$SP} "$@" >"$W/n$n.log" 2>&1 &
	PIDS+=($!)
done
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap cleanup EXIT
ADDR=127.0.0.81:$HP,127.0.0.82:$HP,127.0.0.83:$HP
for _ in $(seq 100); do
	for n in 1 2 3; do
		curl -s -m 1 "http://127.0.0.8$n:$HP/v1/health" 2>/dev/null | grep -q '"leader"' && break 2
	done
	sleep 0.1
done
sleep 1
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
env ${BENVS:-} "$BENCH" --addr "$ADDR" ${STREAM:+--http stream} --scenario uncontended --clients "$CLIENTS" --duration "$DUR" --warmup 2s --json \
	--pids "n1=${PIDS[0]},n2=${PIDS[1]},n3=${PIDS[2]}" >"$W/res.json" 2>"$W/bench.err" &
BP=$!
sleep 2.5
LEADER=""
for n in 1 2 3; do
	curl -s "http://127.0.0.8$n:$HP/v1/health" | grep -q '"is_leader":true' && LEADER=n$n
done
C0=(); C1=()
for i in 0 1 2; do C0[$i]=$(cpu "${PIDS[$i]}"); done; C0[3]=$(cpu $BP); T0=$(date +%s.%N)
if [ -n "${PERF-1}" ]; then
	for i in 0 1 2; do perf stat -x, -e raw_syscalls:sys_enter -p "${PIDS[$i]}" -o "$W/perf$i.txt" -- sleep 5 & done
	perf stat -x, -e raw_syscalls:sys_enter -p $BP -o "$W/perf3.txt" -- sleep 5 &
fi
[ -n "${HOOK:-}" ] && eval "$HOOK"
sleep 5
for i in 0 1 2; do C1[$i]=$(cpu "${PIDS[$i]}"); done; C1[3]=$(cpu $BP); T1=$(date +%s.%N)
wait $BP
python3 - "$W" "$LABEL" "$(cut -d' ' -f1-3 /proc/loadavg)" "$T0" "$T1" "$LEADER" "${C0[@]}" "${C1[@]}" <<'PY'
import sys, json, os, math
w, label, load, t0, t1, leader = sys.argv[1:7]
c0 = list(map(int, sys.argv[7:11])); c1 = list(map(int, sys.argv[11:15]))
r = json.loads(open(w + '/res.json').read().strip().splitlines()[-1])
pairs = r['rate'] * (float(t1) - float(t0)); hz = os.sysconf('SC_CLK_TCK')
cpus = [(c1[i] - c0[i]) / hz * 1e6 / pairs for i in range(4)]
def syscalls(i):
    try:
        for line in open('%s/perf%d.txt' % (w, i)):
            if 'raw_syscalls' in line:
                return float(line.split(',')[0]) / (r['rate'] * 5)
    except (OSError, ValueError):
        pass
    return math.nan
sc = [syscalls(i) for i in range(4)]
print("%-12s load %s leader %s pairs/s %.0f p50 %.3f p99 %.3f | CPU us/pair n1 %.0f n2 %.0f n3 %.0f client %.0f sum %.0f"
      " | syscalls/pair n1 %.1f n2 %.1f n3 %.1f client %.1f" % (label, load, leader, r['rate'], r['p50_ms'], r['p99_ms'], *cpus, sum(cpus), *sc))
PY
