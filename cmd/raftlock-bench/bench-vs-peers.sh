#!/usr/bin/env bash
# bench-vs-peers.sh: raftlock against etcd 3.4 and ZooKeeper 3.8 on this
# machine, one table.
#
# Installs etcd and ZooKeeper if missing (Debian's etcd-server and
# zookeeperd; any service the packages start is stopped and disabled),
# starts a 3-member etcd cluster on 127.0.0.31-33, a 3-server ZooKeeper
# ensemble on 127.0.0.51-53 and a 3-node raftlockd cluster on
# 127.0.0.41-43, data dirs of all under one work dir (same disk, fsync on in
# all: etcd's and ZooKeeper's defaults, raftlock always), then runs every
# scenario against etcd, ZooKeeper and raftlock in turn:
#   20000 sessions kept alive for 30 s (1 lock each); uncontended 1, 16, 64
#   clients; contended 16 clients; failover, 5 rounds of kill -9 of the
#   leader under the load of 16 uncontended clients, the killed member
#   restarted.
# Each ZooKeeper run follows a discarded warm-up run of WARMUP (3 s) of the
# same scenario (the JVM runs cold at half speed and swings run to run);
# for (c) with a tenth of the sessions, for (d) the load of (d) without
# the kills.
# It prints each run's line, then the table: scenario, etcd, zookeeper,
# raftlock, the best peer of each row and raftlock against it. Every
# process it started is killed on exit. Not run in CI.
#
# Usage: cmd/raftlock-bench/bench-vs-peers.sh
# Environment (defaults): DURATION=10s SESSIONS=20000 SESSION_TIME=30s
#   ROUNDS=5 TTL=15s WARMUP=3s ZK_HEAP=1g WORK=<new dir under /var/tmp>
#   KEEP=0 (1: keep WORK) PEERS="etcd zookeeper" (a subset leaves the
#   other out; its column then reads n/a)
#   SCENARIOS="c a1 a16 a64 i64 b16 d" (a subset runs only those; c runs first
#   so that its memory figures start from freshly started servers, whose RSS
#   holds no garbage of earlier load; the table is in a-d order anyway;
#   iN is raftlock's in-process ceiling at N clients: node's BenchmarkCluster,
#   three nodes in one process without HTTP, data under WORK, same disk)
#   RL_PROTO=stream (raftlock's clients: stream, the stream protocol its
#   nodes serve on --stream-addr; 1.1 for HTTP/1.1; docs/RUNS.md, "The
#   stream protocol against HTTP/1.1")
#   Scenarios of the other clients (cmd/raftlock-bench/README.md, "Other
#   clients"): p16 and j16 (CLIENT_ROUNDS=2 CLIENT_WARMUP=8s) and k
#   (KA_SESSIONS=2000 KA_TIME=20s KA_OPEN_RATE=KA_SESSIONS/(TTL/3)
#   KA_CLIENTS="go python java")
# Internal: bench-vs-peers.sh restart etcd|zookeeper|raftlock ID  (the
#   --restart-cmd)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SELF="$HERE/$(basename "${BASH_SOURCE[0]}")"
export PATH="$PATH:/usr/local/go/bin"

ETCD_CLIENT_PORT=2379
ETCD_PEER_PORT=2380
ZK_CLIENT_PORT=2181
ZK_QUORUM_PORT=2888
ZK_ELECTION_PORT=3888
RL_HTTP_PORT=9001
RL_RAFT_PORT=9101
RL_STREAM_PORT=9201
ETCD_CLUSTER="e1=http://127.0.0.31:$ETCD_PEER_PORT,e2=http://127.0.0.32:$ETCD_PEER_PORT,e3=http://127.0.0.33:$ETCD_PEER_PORT"
RL_PEERS="n1=127.0.0.41:$RL_RAFT_PORT,n2=127.0.0.42:$RL_RAFT_PORT,n3=127.0.0.43:$RL_RAFT_PORT"
ETCD_ADDRS="127.0.0.31:$ETCD_CLIENT_PORT,127.0.0.32:$ETCD_CLIENT_PORT,127.0.0.33:$ETCD_CLIENT_PORT"
ZK_ADDRS="127.0.0.51:$ZK_CLIENT_PORT,127.0.0.52:$ZK_CLIENT_PORT,127.0.0.53:$ZK_CLIENT_PORT"
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

# start_zookeeper N: starts server zN (myid N) in the background with the
# packaged java command line (the zookeeperd init script's: QuorumPeerMain
# on a zoo.cfg, the package's jar whose manifest names its dependencies),
# and prints its PID. The log4j binding is added so that warnings reach
# the server's log.
start_zookeeper() {
	local n=$1 cp="$WORK/zookeeper/conf:/usr/share/java/zookeeper.jar" jar
	for jar in /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
		[ -e "$jar" ] && cp+=":$jar"
	done
	nohup java -cp "$cp" -Xmx"${ZK_HEAP:-1g}" -Dzookeeper.log.dir="$WORK/logs" \
		-Dzookeeper.root.logger=WARN,CONSOLE -Dlog4j.configuration=file:"$WORK/zookeeper/conf/log4j.properties" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$WORK/zookeeper/conf/zoo-z$n.cfg" \
		>>"$WORK/logs/zookeeper-z$n.log" 2>&1 </dev/null &
	echo $! >"$WORK/pids/zookeeper-z$n"
	echo $!
	disown $!
}

# start_raftlock N: starts node nN in the background, prints its PID.
start_raftlock() {
	local n=$1 ip=127.0.0.4$1
	nohup "$WORK/bin/raftlockd" --id "n$n" --data-dir "$WORK/data/raftlock/n$n" \
		--raft-addr "$ip:$RL_RAFT_PORT" --http-addr "$ip:$RL_HTTP_PORT" --peers "$RL_PEERS" \
		--stream-addr "$ip:$RL_STREAM_PORT" --log-level warn >>"$WORK/logs/raftlock-n$n.log" 2>&1 </dev/null &
	echo $! >"$WORK/pids/raftlock-n$n"
	echo $!
	disown $!
}

if [ "${1:-}" = restart ]; then
	# Called by the benchmark as --restart-cmd: restart etcd eN, ZooKeeper zN
	# or raftlock nN.
	: "${WORK:?restart needs WORK}"
	case "$2:$3" in
	etcd:e[123]) start_etcd "${3#e}" ;;
	zookeeper:z[123]) start_zookeeper "${3#z}" ;;
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
WARMUP=${WARMUP:-3s}
PEERS=${PEERS:-etcd zookeeper}
SCENARIOS=${SCENARIOS:-c a1 a16 a64 i64 b16 d}
RL_PROTO=${RL_PROTO:-stream}
KEEP=${KEEP:-0}
WORK=${WORK:-$(mktemp -d /var/tmp/raftlock-bench.XXXXXX)}
export WORK
mkdir -p "$WORK"/{bin,logs,pids,data/etcd,data/zookeeper,data/raftlock,zookeeper/conf}

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
	stop_service etcd
}

# stop_service NAME stops and disables a service a package started.
stop_service() {
	if [ -d /run/systemd/system ]; then
		systemctl stop "$1" 2>/dev/null || true
		systemctl disable "$1" 2>/dev/null || true
	elif [ -x "/etc/init.d/$1" ]; then
		service "$1" stop 2>/dev/null || true
		update-rc.d "$1" disable 2>/dev/null || true
	fi
}

install_zookeeper() {
	if [ -e /usr/share/java/zookeeper.jar ] && command -v java >/dev/null; then
		return
	fi
	log "installing zookeeperd (Debian)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeperd >/dev/null
	# The package may start its own server on port 2181: stop it.
	stop_service zookeeper
}

# write_zookeeper_config writes zoo-zN.cfg and myid of each server: the
# package's defaults (tickTime 2000, initLimit 10, syncLimit 5; forceSync
# on), each server's client port on its own address, no limit of
# connections per client address (scenario c opens one per session), the
# admin server off, and the four-letter words zkbench reads.
write_zookeeper_config() {
	local n m
	cp /etc/zookeeper/conf/log4j.properties "$WORK/zookeeper/conf/"
	for n in 1 2 3; do
		mkdir -p "$WORK/data/zookeeper/z$n"
		echo "$n" >"$WORK/data/zookeeper/z$n/myid"
		{
			echo "tickTime=2000"
			echo "initLimit=10"
			echo "syncLimit=5"
			echo "dataDir=$WORK/data/zookeeper/z$n"
			echo "clientPortAddress=127.0.0.5$n"
			echo "clientPort=$ZK_CLIENT_PORT"
			echo "maxClientCnxns=0"
			echo "admin.enableServer=false"
			echo "4lw.commands.whitelist=srvr,conf,ruok,mntr"
			for m in 1 2 3; do
				echo "server.$m=127.0.0.5$m:$ZK_QUORUM_PORT:$ZK_ELECTION_PORT"
			done
		} >"$WORK/zookeeper/conf/zoo-z$n.cfg"
	done
}

check_free() {
	local addr
	for addr in 127.0.0.3{1,2,3}:$ETCD_CLIENT_PORT 127.0.0.3{1,2,3}:$ETCD_PEER_PORT \
		127.0.0.5{1,2,3}:$ZK_CLIENT_PORT 127.0.0.5{1,2,3}:$ZK_QUORUM_PORT 127.0.0.5{1,2,3}:$ZK_ELECTION_PORT \
		127.0.0.4{1,2,3}:$RL_HTTP_PORT 127.0.0.4{1,2,3}:$RL_RAFT_PORT 127.0.0.4{1,2,3}:$RL_STREAM_PORT; do
		if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then
			echo "bench-vs-peers: $addr is in use" >&2
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
	echo "bench-vs-peers: $desc: not within 30s" >&2
	exit 1
}

etcd_healthy() {
	local n
	for n in 1 2 3; do
		curl -sf "http://127.0.0.3$n:$ETCD_CLIENT_PORT/health" | grep -q '"health":"true"' || return 1
	done
}
# zk_word ADDR WORD: a four-letter word's answer.
zk_word() { timeout 2 bash -c 'exec 3<>"/dev/tcp/${1%:*}/${1#*:}" && printf %s "$2" >&3 && cat <&3' _ "$1" "$2"; }
# zookeeper_healthy: one server leads and the two others follow.
zookeeper_healthy() {
	local out
	out=$(for n in 1 2 3; do zk_word "127.0.0.5$n:$ZK_CLIENT_PORT" srvr; done | grep '^Mode:' | sort | tr '\n' ' ')
	[ "$out" = "Mode: follower Mode: follower Mode: leader " ]
}
raftlock_healthy() { curl -sf "http://127.0.0.41:$RL_HTTP_PORT/v1/cluster" | grep -q '"leader":"n'; }

pids_of() { # pids_of etcd|zookeeper|raftlock -> e1=PID,e2=PID,e3=PID
	local sys=$1 f out=""
	for f in "$WORK"/pids/"$sys"-*; do
		out+="${f##*/$sys-}=$(cat "$f"),"
	done
	echo "${out%,}"
}

has_peer() { [[ " $PEERS " == *" $1 "* ]]; }
for p in $PEERS; do
	case $p in
	etcd | zookeeper) ;;
	*) echo "bench-vs-peers: unknown peer $p (PEERS: etcd, zookeeper)" >&2; exit 2 ;;
	esac
done

has_peer etcd && install_etcd
has_peer zookeeper && install_zookeeper
# Scenario (c) opens one connection per ZooKeeper session, on the client's
# side and the server's: raise the open-file limit (inherited by both).
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt 65536 ]; then ulimit -Hn 65536 2>/dev/null || true; fi
ulimit -n "$(ulimit -Hn)"
check_free
log "work dir $WORK ($(df -h --output=source,fstype "$WORK" | tail -1 | tr -s ' '))"
log "building raftlockd, raftlock-bench, etcdbench, zkbench"
(cd "$ROOT" && go build -o "$WORK/bin/raftlockd" ./cmd/raftlockd && go build -o "$WORK/bin/raftlock-bench" ./cmd/raftlock-bench)
(cd "$HERE/etcdbench" && go build -o "$WORK/bin/etcdbench" .)
(cd "$HERE/zkbench" && go build -o "$WORK/bin/zkbench" .)

if has_peer etcd; then
	log "starting etcd on 127.0.0.31-33 ($(etcd --version | head -1))"
	for n in 1 2 3; do start_etcd "$n" >/dev/null; done
fi
if has_peer zookeeper; then
	log "starting ZooKeeper on 127.0.0.51-53 ($(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo '?'), $(java -version 2>&1 | head -1))"
	write_zookeeper_config
	for n in 1 2 3; do start_zookeeper "$n" >/dev/null; done
fi
log "starting raftlockd on 127.0.0.41-43"
for n in 1 2 3; do start_raftlock "$n" >/dev/null; done
if has_peer etcd; then wait_until "etcd healthy" etcd_healthy; fi
if has_peer zookeeper; then wait_until "ZooKeeper leader elected" zookeeper_healthy; fi
wait_until "raftlock leader" raftlock_healthy

# bench SYSTEM ARGS...: one run, JSON line appended to WORK/SYSTEM.jsonl
# (OUT=warmup: to WORK/SYSTEM-warmup.jsonl, not compared).
bench() {
	local sys=$1 bin addrs out="$WORK/$1.jsonl"
	shift
	case $sys in
	etcd) bin=etcdbench addrs=$ETCD_ADDRS ;;
	zookeeper) bin=zkbench addrs=$ZK_ADDRS ;;
	*) bin=raftlock-bench addrs=$RL_ADDRS ;;
	esac
	if [ "${OUT:-}" = warmup ]; then out="$WORK/$sys-warmup.jsonl"; fi
	if [ "$sys" = raftlock ]; then set -- "$@" --http "$RL_PROTO"; fi
	if ! "$WORK/bin/$bin" --addr "$addrs" --pids "$(pids_of "$sys")" --ttl "$TTL" --json "$@" >>"$out"; then
		log "$sys $*: FAILED (see above); going on"
	fi
}

# warmup ARGS...: the discarded warm-up run of ZooKeeper before a measured
# one (ARGS are the warm-up's own). A warm-up that completed nothing warmed
# nothing up (a run on 2026-11-27 measured ZooKeeper's contended scenario at
# half its speed after one): it is run again, up to three times in all.
warmup() {
	local try ops lines f="$WORK/zookeeper-warmup.jsonl"
	for try in 1 2 3; do
		log "zookeeper warm-up: $*"
		touch "$f"
		lines=$(wc -l <"$f")
		OUT=warmup bench zookeeper "$@"
		# Its line's ops; none if the run failed without a line.
		ops=$(tail -n +$((lines + 1)) "$f" | tail -n 1 | sed -n 's/.*"ops":\([0-9]*\).*/\1/p')
		if [ "${ops:-0}" -gt 0 ]; then
			return
		fi
		log "zookeeper warm-up completed nothing (try $try of 3)"
	done
}

# all ARGS...: one run of each system; ZooKeeper's after a warm-up run of
# the same scenario for WARMUP.
all() {
	if has_peer etcd; then bench etcd "$@"; fi
	if has_peer zookeeper; then
		warmup "$@" --duration "$WARMUP"
		bench zookeeper "$@"
	fi
	bench raftlock "$@"
}

# ceiling N: raftlock's in-process ceiling at N clients, in the same run:
# node's BenchmarkCluster (three nodes in one process, real Raft over TCP,
# fsync, the leader's Node API without HTTP), its data under WORK (the
# same disk as the servers'), appended to raftlock.jsonl as scenario
# "ceiling" (a row of its own in the table). The raftlockd cluster idles
# meanwhile.
ceiling() {
	local n=$1 out rate
	log "raftlock in-process ceiling, $n clients (node BenchmarkCluster)"
	mkdir -p "$WORK/data/ceiling"
	out=$(cd "$ROOT" && TMPDIR="$WORK/data/ceiling" go test -run '^$' -bench "^BenchmarkCluster\$/^clients=$n\$" \
		-benchtime "$DURATION" ./node 2>&1) || { log "ceiling: FAILED: $out"; return; }
	echo "$out" | grep -E '^Benchmark' >&2
	rate=$(echo "$out" | grep -E "^BenchmarkCluster/clients=$n" | grep -oE '[0-9.]+ pairs/s' | head -1 | cut -d' ' -f1)
	if [ -z "$rate" ]; then
		log "ceiling: no pairs/s in the benchmark's output"
		return
	fi
	printf '{"system":"raftlock","scenario":"ceiling","clients":%d,"rate":%s,"unit":"pairs/s"}\n' "$n" "$rate" >>"$WORK/raftlock.jsonl"
}
# bench_client go|python|java ARGS...: one raftlock run with that client
# (issue 34), JSON line appended to WORK/client-KIND.jsonl.
bench_client() {
	local kind=$1
	shift
	if ! (cd "$ROOT" && "$WORK/bin/raftlock-bench" --addr "$RL_ADDRS" --pids "$(pids_of raftlock)" --ttl "$TTL" --json \
		--driver "$kind" "$@" >>"$WORK/client-$kind.jsonl"); then
		log "raftlock $kind client $*: FAILED (see above); going on"
	fi
}
if [[ " $SCENARIOS " == *" j"* ]] || [[ " $SCENARIOS " == *" k "* ]]; then
	log "building the Java client's bench driver (mvn install)"
	(cd "$ROOT/clients/java" && mvn -B -ntp -q install -DskipTests)
fi

log "$(nproc) cores; $(uptime | sed 's/.*load/load/')"
for s in $SCENARIOS; do
	case $s in
	a*) all --scenario uncontended --clients "${s#a}" --duration "$DURATION" ;;
	b*) all --scenario contended --clients "${s#b}" --duration "$DURATION" ;;
	i*) ceiling "${s#i}" ;;
	c)
		if has_peer etcd; then bench etcd --scenario sessions --sessions "$SESSIONS" --session-time "$SESSION_TIME"; fi
		if has_peer zookeeper && [ "$(ulimit -n)" != unlimited ] && [ $((SESSIONS + 100)) -gt "$(ulimit -n)" ]; then
			# A ZooKeeper session is a connection: SESSIONS sockets in zkbench
			# and in the leader, beyond the limit (zkbench refuses the run).
			log "zookeeper sessions: $SESSIONS connections do not fit the open-file limit $(ulimit -n) of this box: not run (n/a)"
		elif has_peer zookeeper; then
			warmup --scenario sessions --sessions "$(((SESSIONS + 9) / 10))" --session-time "$WARMUP"
			bench zookeeper --scenario sessions --sessions "$SESSIONS" --session-time "$SESSION_TIME"
		fi
		bench raftlock --scenario sessions --sessions "$SESSIONS" --session-time "$SESSION_TIME"
		;;
	d)
		for sys in $PEERS raftlock; do
			if [ "$sys" = zookeeper ]; then
				warmup --scenario uncontended --clients 16 --duration "$WARMUP"
			fi
			bench "$sys" --scenario failover --clients 16 --rounds "$ROUNDS" \
				--restart-cmd "WORK='$WORK' bash '$SELF' restart $sys {id}"
		done
		;;
	p* | j*)
		# Issue 34: the Python (p16) or Java (j16) client, uncontended, N
		# clients, through its own API (raftlock-bench --driver), in
		# rounds alternating with the Go client's (go against it in the
		# client table below). The JVM gets CLIENT_WARMUP to compile.
		kind=python
		[ "${s:0:1}" = j ] && kind=java
		for r in $(seq "${CLIENT_ROUNDS:-2}"); do
			bench_client go --scenario uncontended --clients "${s#?}" --duration "$DURATION" --warmup "${CLIENT_WARMUP:-8s}"
			bench_client "$kind" --scenario uncontended --clients "${s#?}" --duration "$DURATION" --warmup "${CLIENT_WARMUP:-8s}"
		done
		;;
	k)
		# Issue 34: the keepalive cost of each client: KA_SESSIONS sessions
		# holding a lock each, kept alive for KA_TIME by the Go keeper,
		# the Python client's Sessions and the Java client's; the leader's
		# CPU per keepalive with its idle CPU (measured first) taken off.
		# Opened two at a time and paced, KA_OPEN_RATE a second (default:
		# KA_SESSIONS over one keepalive interval, TTL/3), so that every
		# client's keepalives arrive evenly spread in time, at the same
		# rate, as a program's do. Unpaced, each client's keepalives came
		# in waves as fast as it had opened its sessions, and the leader,
		# which confirms keepalives that arrive together with one
		# leadership round (node/keepalive_confirm.go), served the
		# fastest opener's for the least CPU each (docs/RUNS.md, "The
		# keepalive cost of each client").
		ka_sessions=${KA_SESSIONS:-2000}
		ka_rate=${KA_OPEN_RATE:-$(awk -v n="$ka_sessions" -v t="${TTL%s}" 'BEGIN { printf "%g", n / (t / 3) }')}
		for kind in ${KA_CLIENTS:-go python java}; do
			bench_client "$kind" --scenario sessions --sessions "$ka_sessions" \
				--session-time "${KA_TIME:-20s}" --idle-baseline 5s --workers 2 --open-rate "$ka_rate"
		done
		;;
	*) echo "bench-vs-peers: unknown scenario $s" >&2; exit 2 ;;
	esac
done

touch "$WORK/etcd.jsonl" "$WORK/zookeeper.jsonl" "$WORK/raftlock.jsonl"
for kind in python java; do
	# Issue 34: each client against the Go client (rounds of p16/j16, k).
	if [ -s "$WORK/client-$kind.jsonl" ]; then
		echo
		echo "== the $kind client against the Go client"
		"$WORK/bin/raftlock-bench" compare "$WORK/client-go.jsonl" "$WORK/client-$kind.jsonl" | tee "$WORK/table-$kind.txt"
	fi
done
echo
"$WORK/bin/raftlock-bench" compare "$WORK/etcd.jsonl" "$WORK/zookeeper.jsonl" "$WORK/raftlock.jsonl" | tee "$WORK/table.txt"
# raftlock's 64 clients through its API against its in-process ceiling
# (issue 34's target: 90 % or more).
python3 - "$WORK/raftlock.jsonl" <<'PY' || true
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
api = {r["clients"]: r["rate"] for r in rs if r.get("scenario") == "uncontended"}
for r in rs:
    if r.get("scenario") == "ceiling" and r["clients"] in api and r["rate"]:
        print(f"raftlock {r['clients']} clients: {api[r['clients']]:.0f} pairs/s through the API = {100 * api[r['clients']] / r['rate']:.0f} % of the in-process ceiling ({r['rate']:.0f})")
PY
