"""chain.py TRACE TASKS: follows each request of a 1-client run through a
`perf trace -e read,write,pwrite64,fsync` of the three nodes and the bench
(timeline.sh writes both files; TASKS: per process "PID LEADER TIDS...", the
nodes n1-n3 then the bench) and prints the median and p90 of every stage:
the client's write, the leader's read of it, its pwrite and fsync, the
AppendEntries writes, the first follower's read, pwrite, fsync and answer,
the leader's read of that answer and its answer to the client, the client's
read, and the client's time to its next request. Requests are matched by
message sizes and order; a chain that crosses the next request is dropped."""
import sys, re, statistics, bisect
trace, tasks = sys.argv[1], sys.argv[2]
tid2p = {}; roles = {}
lines = open(tasks).read().split('\n')
leader = None
for i, l in enumerate(l for l in lines if l.strip()):
    f = l.split(); pid, ld = f[0], f[1]; leader = ld
    name = ['n1','n2','n3','client'][i]
    for t in f[2:]: tid2p[t] = name
rx = re.compile(r'^\s*([\d.?]+) \(\s*([\d.]*)\s*(?:ms)?\): \S+?/(\d+)\s+(\.\.\. \[continued\]: )?(\w+)\((.*?)\)\)?\s+(\.\.\.|= (-?\d+))')
ev = []; pending = {}
for l in open(trace):
    m = rx.match(l)
    if not m: continue
    ts, dur, tid, cont, name, args, tail, ret = m.groups()
    fdm = re.match(r'fd: (\d+)', args or '')
    fd = int(fdm.group(1)) if fdm else None
    if tail == '...':
        pending[tid] = (ts, fd); continue
    if cont:
        ts0, fd = pending.pop(tid, (ts, None))
        if ts == '?': ts = ts0
    if ts == '?' or not dur: continue
    p = tid2p.get(tid)
    if p is None: continue
    start = float(ts)*1000; end = start + float(dur)*1000  # us
    ev.append((start, end, p, name, fd, int(ret) if ret else -1))
ev.sort()
by = {}
for e in ev: by.setdefault((e[2], e[3]), []).append(e)
starts = {k: [e[0] for e in v] for k, v in by.items()}
def first(p, name, after, pred=lambda e: True, key='start'):
    lst = by.get((p, name), []); i = bisect.bisect_left(starts[(p,name)], after - 5000) if lst else 0
    for e in lst[i:]:
        t = e[0] if key == 'start' else e[1]
        if t >= after and pred(e): return e
    return None
L = leader; F = [n for n in ('n1','n2','n3') if n != L]
rows = []
for w in by.get(('client','write'), []):
    if w[5] <= 8: continue
    try:
        lr = first(L, 'read', w[0], lambda e: e[5] == w[5], 'end'); fdc = lr[4]
        pw = first(L, 'pwrite64', lr[1]); fs = first(L, 'fsync', pw[0])
        ae1 = first(L, 'write', fs[1], lambda e: e[4] != fdc and e[5] > 8)
        ae2 = first(L, 'write', ae1[1], lambda e: e[4] != fdc and e[5] > 8 and e[4] != ae1[4])
        cands = [first(f, 'read', ae1[0], lambda e: e[5] == ae1[5], 'end') for f in F]
        cands = [c for c in cands if c]
        fr = min(cands, key=lambda e: e[1]); fp = fr[2]
        fpw = first(fp, 'pwrite64', fr[1]); ffs = first(fp, 'fsync', fpw[0])
        fw = first(fp, 'write', ffs[1], lambda e: e[5] > 8)
        lresp = first(L, 'read', fw[0], lambda e: e[5] == fw[5] and e[4] != fdc, 'end')
        ans = first(L, 'write', lresp[1], lambda e: e[4] == fdc)
        cr = first('client', 'read', ans[0], lambda e: e[5] == ans[5], 'end')
        nw = first('client', 'write', cr[1], lambda e: e[5] > 8)
    except (TypeError, ValueError):
        continue
    nxt = first('client', 'write', w[0] + 0.001, lambda e: e[5] > 8)
    if nxt is not None and (cr[1] > nxt[0] + 50 or lr[1] > nxt[0]):
        continue
    total = cr[1] - w[0]
    if total > 20000 or total <= 0: continue
    rows.append({
      'client write -> leader has the request': lr[1]-w[0],
      'leader: parse, auth, propose, raft batch (gap)': pw[0]-lr[1],
      'leader pwrite': pw[1]-pw[0],
      'leader fsync': fs[1]-fs[0],
      'fsync end -> AppendEntries written, 1st follower': ae1[1]-fs[1],
      'fsync end -> AppendEntries written, 2nd follower': ae2[1]-fs[1],
      'AE written -> follower has it (1st to read)': fr[1]-ae1[1] if fr[0] >= ae1[0] else fr[1]-ae2[1],
      'follower: read -> pwrite start (gap)': fpw[0]-fr[1],
      'follower pwrite': fpw[1]-fpw[0],
      'follower fsync': ffs[1]-ffs[0],
      'follower fsync end -> answer written (gap)': fw[1]-ffs[1],
      'follower answer -> leader has it': lresp[1]-fw[1],
      'leader: commit, apply, answer written (gaps)': ans[1]-lresp[1],
      'answer written -> client has it': cr[1]-ans[1],
      'total (client write -> client read)': total,
      'client: answer read -> next request written': (nw[0]-cr[1]) if nw and nw[0]-cr[1] < 20000 else float('nan'),
    })
print("chains matched:", len(rows), "leader", L)
for k in rows[0]:
    vals = sorted(r[k] for r in rows if r[k] == r[k])
    print("%-52s p50 %6.0f  p90 %6.0f" % (k, statistics.median(vals), vals[int(len(vals)*0.9)]))
