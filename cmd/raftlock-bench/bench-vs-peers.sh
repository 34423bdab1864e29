#!/usr/bin/env bash
# bench-vs-etcd.sh: raftlock against etcd 3.4 on this machine, one table.
#
# Installs etcd if missing (Debian's etcd-server; any etcd service the
# package starts is stopped and disabled), starts a 3-member etcd cluster on
# 127.0.0.31-33 and a 3-node raftlockd cluster on 127.0.0.41-43, data dirs
# of both under one work dir (same disk, fsync on in both), then runs every
# scenario against etcd and right after against raftlock:
#   20000 sessions kept alive for 30 s (1 lock each); uncontended 1, 16, 64
#   clients; contended 16 clients; failover, 5 rounds of kill -9 of the
#   leader under the load of 16 uncontended clients, the killed member
#   restarted.
# It prints each run's line, then the table: scenario, etcd, raftlock,
# raftlock/etcd. Every process it started is killed on exit. Not run in CI.
#
# Usage: cmd/raftlock-bench/bench-vs-etcd.sh
# Environment (defaults): DURATION=10s SESSIONS=20000 SESSION_TIME=30s
#   ROUNDS=5 TTL=15s WORK=<new dir under /var/tmp> KEEP=0 (1: keep WORK)
#   SCENARIOS="c a1 a16 a64 b16 d" (a subset runs only those; c runs first
#   so that its memory figures start from freshly started servers, whose RSS
#   holds no garbage of earlier load; the table is in a-d order anyway)
# Internal: bench-vs-etcd.sh restart etcd|raftlock ID  (the --restart-cmd)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
export PATH="$PATH:/usr/local/go/bin"

ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
RL_HTTP_PORT=9001
RL_RAFT_PORT=9101
ETCD_CLUSTER="e1=http://127.0.0.31:$ETCD_PEER_PORT,e2=http://127.0.0.32:$ETCD_PEER_PORT,e3=http://127.0.0.33:$ETCD_PEER_PORT"
RL_PEERS="n1=127.0.0.41:$RL_RAFT_PORT,n2=127.0.0.42:$RL_RAFT_PORT,n3=127.0.0.43:$RL_RAFT_PORT"
ETCD_ADDRS="127.0.0.31:$ETCD_CLIENT_PORT,127.0.0.32:$ETCD_CLIENT_PORT,127.0.0.33:$ETCD_CLIENT_PORT"
RL_ADDRS="127.0.0.41:$RL_HTTP_PORT,127.0.0.42:$RL_HTTP_PORT,127.0.0.43:$RL_HTTP_PORT"

log() { echo "== $*" >&2; }

# start_etcd N: starts member eN in the background, prints its PID.
start_etcd() {
	local n=$1 ip=127.0.0.3$1
	nohup etcd --name "e$n" --data-dir "$WORK/data/etcd/e$n" \
		--listen-client-urls "http://$ip:$ETCD_CLIENT_PORT" --advertise-client-urls "http://$ip:$ETCD_CLIENT_PORT" \
		--listen-peer-urls "http://$ip:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://$ip:$ETCD_PEER_PORT" \
		--initial-cluster "$ETCD_CLUSTER" --initial-cluster-state new --initial-cluster-token raftlock-bench \
		--logger zap --log-level warn >>"$WORK/logs/etcd-e$n.log" 2>&1 </dev/null &
	echo $! >"$WORK/pids/etcd-e$n"
	echo $!
	disown $! # the benchmark kills it with -9: no job notice
}

# start_raftlock N: starts node nN in the background, prints its PID.
start_raftlock() {
	local n=$1 ip=127.0.0.4$1
	nohup "$WORK/bin/raftlockd" --id "n$n" --data-dir "$WORK/data/raftlock/n$n" \
		--raft-addr "$ip:$RL_RAFT_PORT" --http-addr "$ip:$RL_HTTP_PORT" --peers "$RL_PEERS" \
		--log-level warn >>"$WORK/logs/raftlock-n$n.log" 2>&1 </dev/null &
	echo $! >"$WORK/pids/raftlock-n$n"
	echo $!
	disown $!
}

if [ "${1:-}" = restart ]; then
	# Called by the benchmark as --restart-cmd: restart etcd eN / raftlock nN.
	: "${WORK:?restart needs WORK}"
	case "$2:$3" in
	etcd:e[123]) start_etcd "${3#e}" ;;
	raftlock:n[123]) start_raftlock "${3#n}" ;;
	*) echo "restart: unknown member $2 $3" >&2; exit 2 ;;
	esac
	exit 0
fi

DURATION=${DURATION:-10s}
SESSIONS=${SESSIONS:-20000}
SESSION_TIME=${SESSION_TIME:-30s}
ROUNDS=${ROUNDS:-5}
TTL=${TTL:-15s}
SCENARIOS=${SCENARIOS:-c a1 a16 a64 b16 d}
KEEP=${KEEP:-0}
WORK=${WORK:-$(mktemp -d /var/tmp/raftlock-bench.XXXXXX)}
export WORK
mkdir -p "$WORK"/{bin,logs,pids,data/etcd,data/raftlock}

# cleanup kills every process this script started (by the PIDs it wrote).
cleanup() {
	local f pid i
	for f in "$WORK"/pids/*; do
		[ -e "$f" ] || continue
		kill -TERM "$(cat "$f")" 2>/dev/null || true
	done
	for f in "$WORK"/pids/*; do
		[ -e "$f" ] || continue
		pid=$(cat "$f")
		for i in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		rm -f "$f"
	done
	wait 2>/dev/null || true
	if [ "$KEEP" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

install_etcd() {
	if command -v etcd >/dev/null; then
		return
	fi
	log "installing etcd-server (Debian)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
	# The package may start its own etcd on 127.0.0.1:2379: stop it.
	if [ -d /run/systemd/system ]; then
		systemctl stop etcd 2>/dev/null || true
		systemctl disable etcd 2>/dev/null || true
	elif [ -x /etc/init.d/etcd ]; then
		service etcd stop 2>/dev/null || true
		update-rc.d etcd disable 2>/dev/null || true
	fi
}

check_free() {
	local addr
	for addr in 127.0.0.3{1,2,3}:$ETCD_CLIENT_PORT 127.0.0.3{1,2,3}:$ETCD_PEER_PORT \
		127.0.0.4{1,2,3}:$RL_HTTP_PORT 127.0.0.4{1,2,3}:$RL_RAFT_PORT; do
		if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then
			echo "bench-vs-etcd: $addr is in use" >&2
			exit 1
		fi
	done
}

# wait_until DESC CMD...: polls CMD for up to 30 s.
wait_until() {
	local desc=$1 i
	shift
	for i in $(seq 300); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "bench-vs-etcd: $desc: not within 30s" >&2
	exit 1
}

etcd_healthy() {
	local n
	for n in 1 2 3; do
		curl -sf "http://127.0.0.3$n:$ETCD_CLIENT_PORT/health" | grep -q '"health":"true"' || return 1
	done
}
raftlock_healthy() { curl -sf "http://127.0.0.41:$RL_HTTP_PORT/v1/cluster" | grep -q '"leader":"n'; }

pids_of() { # pids_of etcd|raftlock -> e1=PID,e2=PID,e3=PID
	local sys=$1 f out=""
	for f in "$WORK"/pids/"$sys"-*; do
		out+="${f##*/$sys-}=$(cat "$f"),"
	done
	echo "${out%,}"
}

install_etcd
check_free
log "work dir $WORK ($(df -h --output=source,fstype "$WORK" | tail -1 | tr -s ' '))"
log "building raftlockd, raftlock-bench, etcdbench"
(cd "$ROOT" && go build -o "$WORK/bin/raftlockd" ./cmd/raftlockd && go build -o "$WORK/bin/raftlock-bench" ./cmd/raftlock-bench)
(cd "$HERE/etcdbench" && go build -o "$WORK/bin/etcdbench" .)

log "starting etcd on 127.0.0.31-33 ($(etcd --version | head -1)) and raftlockd on 127.0.0.41-43"
for n in 1 2 3; do start_etcd "$n" >/dev/null; done
for n in 1 2 3; do start_raftlock "$n" >/dev/null; done
wait_until "etcd healthy" etcd_healthy
wait_until "raftlock leader" raftlock_healthy

# bench SYSTEM ARGS...: one run, JSON line appended to WORK/SYSTEM.jsonl.
bench() {
	local sys=$1 bin addrs
	shift
	if [ "$sys" = etcd ]; then bin=etcdbench addrs=$ETCD_ADDRS; else bin=raftlock-bench addrs=$RL_ADDRS; fi
	if ! "$WORK/bin/$bin" --addr "$addrs" --pids "$(pids_of "$sys")" --ttl "$TTL" --json "$@" >>"$WORK/$sys.jsonl"; then
		log "$sys $*: FAILED (see above); going on"
	fi
}

both() {
	bench etcd "$@"
	bench raftlock "$@"
}

log "$(nproc) cores; $(uptime | sed 's/.*load/load/')"
for s in $SCENARIOS; do
	case $s in
	a*) both --scenario uncontended --clients "${s#a}" --duration "$DURATION" ;;
	b*) both --scenario contended --clients "${s#b}" --duration "$DURATION" ;;
	c) both --scenario sessions --sessions "$SESSIONS" --session-time "$SESSION_TIME" ;;
	d)
		bench etcd --scenario failover --clients 16 --rounds "$ROUNDS" \
			--restart-cmd "WORK='$WORK' bash '$SELF' restart etcd {id}"
		bench raftlock --scenario failover --clients 16 --rounds "$ROUNDS" \
			--restart-cmd "WORK='$WORK' bash '$SELF' restart raftlock {id}"
		;;
	*) echo "bench-vs-etcd: unknown scenario $s" >&2; exit 2 ;;
	esac
done

echo
"$WORK/bin/raftlock-bench" compare "$WORK/etcd.jsonl" "$WORK/raftlock.jsonl" | tee "$WORK/table.txt"
