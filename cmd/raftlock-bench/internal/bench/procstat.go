package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc times; 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// ProcCPU returns the CPU time (user + system) a process has used, from
// /proc/PID/stat.
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields after it start
	// behind the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("cpu of pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of pid %d: short stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu of pid %d: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// ProcRSS returns the resident set size of a process in bytes, from
// /proc/PID/status.
func ProcRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rss of pid %d: %q: %w", pid, rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("rss of pid %d: %w", pid, err)
	}
	return 0, fmt.Errorf("rss of pid %d: no VmRSS line", pid)
}

// selfCPU returns the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineTicks returns the busy and total jiffies of all CPUs from
// /proc/stat (busy excludes idle and iowait).
func machineTicks() (busy, total int64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("machine cpu: unexpected /proc/stat line %q", line)
	}
	var idle int64
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("machine cpu: %q: %w", s, err)
		}
		// guest and guest_nice (fields 9, 10) are already in user/nice.
		if i >= 8 {
			break
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total - idle, total, nil
}

// CPUProbe measures CPU use over a window: the leader's, all servers',
// this process's and the whole machine's.
type CPUProbe struct {
	start      time.Time
	leaderPID  int
	pids       map[string]int
	procStart  map[int]time.Duration
	selfStart  time.Duration
	busy, tot  int64
	machineErr error
}

// StartCPUProbe starts a window. leaderPID is 0 when unknown; pids are all
// server processes (may be empty).
func StartCPUProbe(leaderPID int, pids map[string]int) *CPUProbe {
	p := &CPUProbe{start: time.Now(), leaderPID: leaderPID, pids: pids, procStart: map[int]time.Duration{}, selfStart: selfCPU()}
	for _, pid := range pids {
		if c, err := ProcCPU(pid); err == nil {
			p.procStart[pid] = c
		}
	}
	p.busy, p.tot, p.machineErr = machineTicks()
	return p
}

// Finish ends the window and records the percentages in r (a process that
// died in the window is left out).
func (p *CPUProbe) Finish(r *Result) {
	wall := time.Since(p.start)
	if wall <= 0 {
		return
	}
	pct := func(d time.Duration) float64 { return 100 * float64(d) / float64(wall) }
	r.SetMetric(MetricClientCPU, round1(pct(selfCPU()-p.selfStart)))
	var sum time.Duration
	complete := len(p.pids) > 0
	for _, pid := range p.pids {
		c0, ok := p.procStart[pid]
		c1, err := ProcCPU(pid)
		if !ok || err != nil {
			complete = false
			continue
		}
		sum += c1 - c0
		if pid == p.leaderPID {
			r.SetMetric(MetricLeaderCPU, round1(pct(c1-c0)))
		}
	}
	if complete {
		r.SetMetric(MetricServersCPU, round1(pct(sum)))
	}
	if p.machineErr == nil {
		if busy, tot, err := machineTicks(); err == nil && tot > p.tot {
			b := 100 * float64(busy-p.busy) / float64(tot-p.tot)
			r.SetMetric(MetricMachineBusy, round1(b))
			if b > 90 {
				r.Notes = append(r.Notes, fmt.Sprintf("machine %.0f%% busy: CPU-bound, client and servers share the cores", b))
			}
		}
	}
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
