package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftlock/raftlock/api"
)

// abuseStats counts one abuse's requests by outcome, with one sample of
// each outcome's detail, and keeps its figures' highest values.
type abuseStats struct {
	mustNot []string

	mu      sync.Mutex
	counts  map[string]int64
	samples map[string]string
	maxes   map[string]int64
	tallies map[string]int64 // things counted that are not requests
}

func (env *soakEnv) stats(name string) *abuseStats {
	env.mu.Lock()
	defer env.mu.Unlock()
	st, ok := env.byName[name]
	if !ok {
		st = &abuseStats{counts: map[string]int64{}, samples: map[string]string{}, maxes: map[string]int64{}, tallies: map[string]int64{}}
		env.byName[name] = st
		env.names = append(env.names, name)
	}
	return st
}

// note counts one request of outcome; detail is kept for the first.
func (st *abuseStats) note(outcome, detail string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.counts[outcome]++
	if _, ok := st.samples[outcome]; !ok {
		st.samples[outcome] = detail
	}
}

// add counts n requests of outcome.
func (st *abuseStats) add(outcome string, n int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.counts[outcome] += n
}

// tally counts one of what (not a request: a connection, a burst).
func (st *abuseStats) tally(what string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.tallies[what]++
}

// noteErr counts one request by its error's outcome (errOutcome).
func (st *abuseStats) noteErr(err error) {
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	st.note(errOutcome(err), detail)
}

// figure keeps v as the figure name's value if it is the highest yet.
func (st *abuseStats) figure(name string, v int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.maxes[name] = max(st.maxes[name], v)
}

func (st *abuseStats) count(outcome string) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.counts[outcome]
}

func (st *abuseStats) sample(outcome string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.samples[outcome]
}

func (st *abuseStats) total() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int64
	for _, c := range st.counts {
		n += c
	}
	return n
}

// outcomes prints the counts, most frequent first, then the figures.
func (st *abuseStats) outcomes() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var keys []string
	for k := range st.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if st.counts[a] != st.counts[b] {
			return int(st.counts[b] - st.counts[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, st.counts[k]))
	}
	var tallies []string
	for k := range st.tallies {
		tallies = append(tallies, k)
	}
	slices.Sort(tallies)
	for _, k := range tallies {
		parts = append(parts, fmt.Sprintf("%s %d", k, st.tallies[k]))
	}
	var figs []string
	for k := range st.maxes {
		figs = append(figs, k)
	}
	slices.Sort(figs)
	for _, k := range figs {
		parts = append(parts, fmt.Sprintf("max %s %d", k, st.maxes[k]))
	}
	return strings.Join(parts, ", ")
}

// errOutcome names an outcome: "ok", the API error's code, or what
// became of the connection.
func errOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	var e *api.Error
	code := ""
	if errors.As(err, &e) {
		code = string(e.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		if code == "" {
			return "no answer in time"
		}
		return code + ", retried until the deadline"
	}
	if code != "" {
		return code
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "closed by the node"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	return "transport error"
}

// summary is the table for the note: the legitimate client's figures,
// every node's, and every abuse's.
func (env *soakEnv) summary(quiet, soak, after []time.Duration, smp *sampler, cpu [3]cpuSnapshot) string {
	var b strings.Builder
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	build := "unknown commit"
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		build = strings.TrimSpace(string(out))
	}
	only := "all abuses"
	if env.only != "" {
		only = "abuses " + env.only + " only"
	}
	fmt.Fprintf(&b, "Abuse soak (TestAbuseSoak) at %s: %s for %v, %v quiet before and after; %d watches a burst; idle connections fill each node to %d descriptors; 3 nodes, TLS with client certificates, ACLs, stream and metrics ports, ulimit -n %d; %d locks of %d B under %s.\n\n",
		build, only, env.soakFor, env.quietFor, env.watches, soakNofile-env.fdHeadroom, soakNofile, soakBigLocks, soakValueBytes, soakBigPrefix)
	fmt.Fprintf(&b, "| legitimate client (acquire+release) | quiet | under abuse | quiet after |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&b, "| pairs | %d | %d | %d |\n", len(quiet), len(soak), len(after))
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"max", 1}} {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", q.name, ms(quantile(quiet, q.q)), ms(quantile(soak, q.q)), ms(quantile(after, q.q)))
	}
	if qp := quantile(quiet, 0.99); qp > 0 {
		fmt.Fprintf(&b, "| p99 ÷ quiet p99 | | %.2fx (limit 2x) | %.2fx |\n", float64(quantile(soak, 0.99))/float64(qp), float64(quantile(after, 0.99))/float64(qp))
	}
	terms, leaders := smp.termsAndLeaders()
	cores := func(i int, from, to cpuSnapshot) string {
		secs := to.at.Sub(from.at).Seconds()
		if i < 0 {
			return fmt.Sprintf("%.2f", (to.self-from.self)/secs)
		}
		return fmt.Sprintf("%.2f", (to.nodes[i]-from.nodes[i])/secs)
	}
	fmt.Fprintf(&b, "\n| node | role at start | RSS start → peak | VmHWM | fds peak (limit %d) | CPU cores quiet → abuse | exited |\n| --- | --- | --- | --- | --- | --- | --- |\n", soakNofile)
	for i := range env.c.Nodes {
		role := "follower"
		if i == env.leader {
			role = "leader"
		}
		first, peak, hwm, fds := smp.peaks(i)
		code, exited := env.c.Exited(i)
		ex := "no"
		if exited {
			ex = fmt.Sprintf("yes (status %d)", code)
		}
		fmt.Fprintf(&b, "| n%d | %s | %d → %d MB | %d MB | %d | %s → %s | %s |\n", i+1, role, first>>10, peak>>10, hwm>>10, fds,
			cores(i, cpu[0], cpu[1]), cores(i, cpu[1], cpu[2]), ex)
	}
	fmt.Fprintf(&b, "\nThe test process (abusers, legitimate client, sampler) used %s cores quiet, %s under abuse, of the machine's %d; load average %s at the start, %s at the end.\n",
		cores(-1, cpu[0], cpu[1]), cores(-1, cpu[1], cpu[2]), runtime.NumCPU(), cpu[0].load, cpu[2].load)
	fmt.Fprintf(&b, "\nterms seen: %v; leaders seen: %v\n", terms, leaders)
	fmt.Fprintf(&b, "\n| abuse | requests | answers |\n| --- | --- | --- |\n")
	for _, name := range env.names {
		st := env.stats(name)
		fmt.Fprintf(&b, "| %s | %d | %s |\n", name, st.total(), st.outcomes())
	}
	return b.String()
}

// details prints, for every abuse, one answer of each of its outcomes
// but the plain ones.
func (env *soakEnv) details() string {
	var b strings.Builder
	for _, name := range env.names {
		st := env.stats(name)
		st.mu.Lock()
		for outcome, detail := range st.samples {
			if detail != "" {
				fmt.Fprintf(&b, "%s: %s: %.300s\n", name, outcome, detail)
			}
		}
		st.mu.Unlock()
	}
	return b.String()
}

// cpuSnapshot is the CPU time (seconds) each node and the test process
// used until at, and the load average then.
type cpuSnapshot struct {
	at    time.Time
	nodes [3]float64
	self  float64
	load  string
}

func (env *soakEnv) cpuNow() cpuSnapshot {
	s := cpuSnapshot{at: time.Now()}
	for i := range s.nodes {
		s.nodes[i] = procCPU(env.c.PID(i))
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	return s
}

// procCPU reads the user and system CPU time of process pid in seconds
// (/proc/PID/stat, at 100 ticks a second); 0 if it cannot.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || pid == 0 {
		return 0
	}
	// After the command's name in parentheses: fields 3 on; utime and
	// stime are fields 14 and 15.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (u + sys) / 100
}

// sampler records every node's RSS, fds, term and leader once a second.
type sampler struct {
	env  *soakEnv
	done chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	rows []sampleRow
}

type sampleRow struct {
	at    time.Duration
	nodes [3]nodeSample
}

type nodeSample struct {
	up             bool
	rssKB, hwmKB   int
	fds            int
	term           uint64
	leader, health string // health: "ok", or why not
}

func (env *soakEnv) startSampler() *sampler {
	s := &sampler{env: env, done: make(chan struct{})}
	// One kept-alive connection per node's metrics port, from 127.0.0.1
	// (the abuses come from other addresses).
	hcs := make([]*http.Client, 3)
	for i := range hcs {
		hcs[i] = &http.Client{Timeout: 900 * time.Millisecond, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	}
	s.wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var prev *sampleRow
		for {
			row := sampleRow{at: time.Since(env.log.start)}
			for i := range row.nodes {
				row.nodes[i] = sampleNode(env, i, hcs[i])
			}
			s.mu.Lock()
			s.rows = append(s.rows, row)
			s.mu.Unlock()
			if prev != nil {
				for i, n := range row.nodes {
					p := prev.nodes[i]
					if n.up != p.up || n.term != p.term || n.leader != p.leader || (n.health == "ok") != (p.health == "ok") {
						env.log.add("n%d: term %d, leader %q, health %s", i+1, n.term, n.leader, n.health)
					}
					if !n.up && p.up {
						env.log.add("n%d: its process is gone", i+1)
					}
				}
			}
			prev = &row
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

func (s *sampler) stop() {
	close(s.done)
	s.wg.Wait()
}

// sampleNode reads node i's /proc figures and its health (term, leader)
// on its metrics port.
func sampleNode(env *soakEnv, i int, hc *http.Client) nodeSample {
	var n nodeSample
	_, exited := env.c.Exited(i)
	pid := env.c.PID(i)
	n.up = !exited && pid != 0
	if n.up {
		n.rssKB, _ = statusKB(pid, "VmRSS")
		n.hwmKB, _ = statusKB(pid, "VmHWM")
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			n.fds = len(ents)
		}
	}
	resp, err := hc.Get("http://" + env.metrics[i] + "/v1/health")
	if err != nil {
		n.health = "unanswered"
		return n
	}
	defer resp.Body.Close()
	var h api.HealthInfo
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		n.health = "bad answer"
		return n
	}
	n.term, n.leader, n.health = h.Term, h.Leader, "ok"
	if !h.OK {
		n.health = "not ok: " + h.Reason
	}
	return n
}

// statusKB reads a field of /proc/PID/status in kB (VmRSS, VmHWM).
func statusKB(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// termsAndLeaders returns the terms and leaders any node named.
func (s *sampler) termsAndLeaders() (terms []uint64, leaders []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		for _, n := range r.nodes {
			if n.term != 0 && !slices.Contains(terms, n.term) {
				terms = append(terms, n.term)
			}
			if n.leader != "" && !slices.Contains(leaders, n.leader) {
				leaders = append(leaders, n.leader)
			}
		}
	}
	slices.Sort(terms)
	return terms, leaders
}

// peaks returns node i's first and highest RSS, its last VmHWM (kB) and
// its highest fd count.
func (s *sampler) peaks(i int) (first, peak, hwm, fds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		n := r.nodes[i]
		if first == 0 {
			first = n.rssKB
		}
		peak, hwm, fds = max(peak, n.rssKB), max(hwm, n.hwmKB), max(fds, n.fds)
	}
	return first, peak, hwm, fds
}

// table prints the samples, one line a second.
func (s *sampler) table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("     t   node: RSS MB / fds / term / leader / health ...\n")
	for _, r := range s.rows {
		fmt.Fprintf(&b, "%6.0fs", r.at.Seconds())
		for i, n := range r.nodes {
			fmt.Fprintf(&b, "  n%d: %4d / %4d / %d / %s / %s", i+1, n.rssKB>>10, n.fds, n.term, n.leader, n.health)
		}
		b.WriteString("\n")
	}
	return b.String()
}
