"""perfcats.py PERF_SCRIPT PID=NAME...: on-CPU shares per process from
`perf record -g` of the nodes and the bench (`perf script -F pid,comm,ip,sym`
output): the top leaf symbols and the share of samples with a frame in each
category (scheduler, GC, socket I/O, net/http, raft stages, metrics, ...)."""
import sys, collections
pids = dict(x.split('=') for x in sys.argv[2:])  # pid=name
samples = collections.defaultdict(list)
cur=None; stack=[]
def flush():
    if cur: samples[cur].append(stack[:])
for line in open(sys.argv[1]):
    if not line.startswith('\t') and line.strip():
        flush(); parts=line.split(); cur=(parts[0],parts[1]); stack=[]
    elif line.strip():
        f=line.split(None,1); stack.append(f[1].strip() if len(f)>1 else '?')
flush()
cats = [
 ('fsync/pwrite (kernel, disk)', ['fsync','ext4_','jbd2','blk_','pwrite']),
 ('scheduler: findRunnable/stealWork/spinning', ['runtime.findRunnable','runtime.stealWork','runtime.schedule','runtime.usleep','runtime.procyield','runtime.sysmon']),
 ('GC (gcBgMarkWorker, assists, sweep)', ['runtime.gcBgMarkWorker','runtime.gcAssist','runtime.bgsweep','runtime.gcDrain','runtime.markroot','runtime.scanobject']),
 ('socket write (net write syscalls)', ['internal/poll.(*FD).Write','syscall.write','internal/poll.(*FD).Writev']),
 ('socket read', ['internal/poll.(*FD).Read']),
 ('net/http server (conn.serve)', ['net/http.(*conn).serve']),
 ('net/http client transport', ['net/http.(*persistConn)','net/http.(*Transport)']),
 ('httpapi ServeHTTP', ['httpapi.(*Server).ServeHTTP']),
 ('raft replication (replicate/pipeline)', ['raft.(*Raft).replicate','raft.(*Raft).pipeline','raft.sendRPC','raft.(*NetworkTransport).genericRPC','raft.(*netPipeline)']),
 ('raft msgpack codec', ['go-msgpack']),
 ('raft leaderLoop/dispatchLogs', ['raft.(*Raft).leaderLoop','raft.(*Raft).dispatchLogs']),
 ('raft follower handleConn/appendEntries', ['raft.(*NetworkTransport).handleConn','raft.(*Raft).appendEntries','raft.(*Raft).processRPC']),
 ('FSM apply (runFSM)', ['raft.(*Raft).runFSM']),
 ('metrics (summary Observe, sink)', ['prometheus.(*summary).Observe','raftMetricsSink','go-metrics']),
 ('malloc', ['runtime.mallocgc']),
 ('bench client loop', ['bench.','session.(*Session)','client.(*Client)']),
]
for key, ss in sorted(samples.items(), key=lambda kv: -len(kv[1])):
    name = pids.get(key[1], key[0]+':'+key[1])
    n=len(ss)
    if n<200: continue
    print("== %s (%d samples)" % (name, n))
    leaf=collections.Counter(s[0] for s in ss if s)
    print("  top leaf:", "; ".join("%s %.1f%%" % (k.replace('github.com/',''),100*v/n) for k,v in leaf.most_common(8)))
    for cname, pats in cats:
        c=sum(1 for s in ss if any(p in fr for fr in s for p in pats))
        if c: print("  %-50s %5.1f%%" % (cname, 100*c/n))
