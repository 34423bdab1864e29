package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// The abuses' bounds: rates, counts and concurrency (see also the
// constants of soak_test.go).
const (
	// Descriptors: idle connections fill every node up to soakNofile
	// less the headroom (RAFTLOCK_SOAK_FD_HEADROOM, default
	// soakFDHeadroom), soakMetricsIdleMax of them on the metrics port
	// (api.MetricsConnsPerIP from each of many addresses) and
	// soakAPIIdleMax on the API port, one every soakFillEvery at most;
	// soakStreamDials stream connections per node, one replaced every
	// soakStreamDialEvery, count in the fill. The default headroom is
	// less than the other abuses' own connections take (watches over
	// the stream port and HTTP/2, their forwarding by a follower), so
	// that together they meet the limit, as in issue 40's item 1.
	soakFDHeadroom      = 48
	soakMetricsIdleMax  = 480
	soakAPIIdleMax      = 600
	soakFillEvery       = 20 * time.Millisecond
	soakStreamDials     = 40
	soakStreamDialEvery = 250 * time.Millisecond
	// The metrics flood: soakFloodEvery apart, at most soakFloodConns at
	// once, each held a second after its answer, from one address.
	soakFloodEvery = 10 * time.Millisecond
	soakFloodConns = 32
	// Watch bursts: each watch waits soakWatchWait on one of
	// soakWatchedLocks held locks; a burst's watches all answered, the
	// next one follows soakBurstPause later.
	soakWatchedLocks = 64
	soakWatchWait    = 20 * time.Second
	soakBurstPause   = 10 * time.Second
	// Never-read stream clients: soakDeafConns per target node, each
	// holding soakDeafHold once the node stopped reading it.
	soakDeafConns    = 4
	soakDeafRequests = 3000
	soakDeafHold     = 15 * time.Second
	// Large answers: one worker per kind and target, soakLargeEvery
	// between requests.
	soakLargeEvery = 250 * time.Millisecond
	// The small abuses' paces.
	soakBootstrapEvery = 100 * time.Millisecond
	soakForgeEvery     = 100 * time.Millisecond
	soakBidiEvery      = 500 * time.Millisecond
	soakHeaderEvery    = time.Second
)

// Source addresses: the legitimate client, the sampler and the admin use
// 127.0.0.1; each abuse its own.
const (
	ipFlood    = "127.0.0.2"
	ipIdleAPI  = "127.0.0.3"
	ipStream   = "127.0.0.4"
	ipWatch    = "127.0.0.5"
	ipSmall    = "127.0.0.6"
	ipMetrics0 = 16 // 127.0.0.16 and up: idle metrics connections
)

// abuse is one of issue 40's abuses, run until ctx ends. mustNot are the
// outcomes that fail the soak (a bootstrap won, a forged sequencer
// valid).
type abuse struct {
	name    string
	mustNot []string
	run     func(ctx context.Context, env *soakEnv, st *abuseStats)
}

// abuses lists the abuses of the soak, registering their statistics:
// every one, or those whose number only names (a comma-separated list,
// e.g. "3,5"; RAFTLOCK_SOAK_ONLY), to see which does what.
func (env *soakEnv) abuses(only string) []abuse {
	as := []abuse{
		{name: "1 idle conns to the fd limit (metrics from many IPs, API)", run: fillDescriptors},
		{name: "1 stream dials", run: streamDials},
		{name: "2 metrics flood from one IP", run: metricsFlood},
		{name: "3 watches, stream → leader", run: watchBursts(false, false, 0)},
		{name: "3 watches, stream → follower", run: watchBursts(true, false, 5*time.Second)},
		{name: "3 watches, HTTP/2 → leader", run: watchBursts(false, true, 10*time.Second)},
		{name: "3 watches, HTTP/2 → follower", run: watchBursts(true, true, 15*time.Second)},
		{name: "4 stream clients that never read", run: deafStreams},
		{name: "5 large answers: listing pages", run: largeAnswers(false)},
		{name: "5 large answers: prefix-watch resets", run: largeAnswers(true)},
		{name: "6 POST /v1/acl/bootstrap polling", mustNot: []string{"ok"}, run: bootstrapPolling},
		{name: "7 forged sequencers", mustNot: []string{"valid"}, run: forgedSequencers},
		{name: "7 bidi names", run: bidiNames},
		{name: "7 stream headers over 16 KiB", run: bigHeaders},
	}
	var run []abuse
	for _, a := range as {
		num, _, _ := strings.Cut(a.name, " ")
		if only != "" && !slices.Contains(strings.Split(only, ","), num) {
			continue
		}
		env.stats(a.name).mustNot = a.mustNot
		run = append(run, a)
	}
	if len(run) == 0 {
		env.t.Fatalf("RAFTLOCK_SOAK_ONLY=%q names no abuse (1 to 7)", only)
	}
	return run
}

// sourced is a dialer from the local address ip.
func sourced(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
}

// readerClient is a Go client of the read-only token at the given nodes,
// from ip, with opts.
func (env *soakEnv) readerClient(nodes []int, ip string, opts ...client.ClientOption) *client.Client {
	var addrs []string
	for _, i := range nodes {
		addrs = append(addrs, "https://"+env.api[i])
	}
	opts = append([]client.ClientOption{client.WithTLS(env.tls.Clone()), client.WithToken(env.reader),
		client.WithDialer(sourced(ip).DialContext)}, opts...)
	cl, err := client.NewClient(addrs, opts...)
	if err != nil {
		env.t.Error(err)
		return nil
	}
	return cl
}

// tlsConn dials addr from ip over TLS with the cluster's client
// certificate (HTTP/1.1 or the stream protocol: no ALPN).
func (env *soakEnv) tlsConn(ctx context.Context, ip, addr string) (net.Conn, error) {
	cfg := env.tls.Clone()
	cfg.NextProtos = nil
	cfg.ServerName = "127.0.0.1"
	d := &tls.Dialer{NetDialer: sourced(ip), Config: cfg}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return d.DialContext(hctx, "tcp", addr)
}

// pause waits d or until ctx ends (load pacing, not synchronisation).
func pause(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// idleRequest sends GET /v1/health on c and reads the answer.
func idleRequest(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c.SetDeadline(time.Time{})
}

// fillDescriptors holds idle connections to every node, each after one
// request, until the node holds soakNofile-env.fdHeadroom descriptors:
// on the metrics port (no certificate, no token) from many addresses,
// on the API port (TLS) from one. A connection the node closes (its idle
// timeout) is replaced.
func fillDescriptors(ctx context.Context, env *soakEnv, st *abuseStats) {
	var wg sync.WaitGroup
	for i := range env.c.Nodes {
		wg.Go(func() { fillNode(ctx, env, st, i) })
	}
	wg.Wait()
}

func fillNode(ctx context.Context, env *soakEnv, st *abuseStats, i int) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	perIP := map[int]int{} // metrics connections by last octet
	apiOpen := 0
	var readers sync.WaitGroup
	defer func() {
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		readers.Wait()
	}()
	tick := time.NewTicker(soakFillEvery)
	defer tick.Stop()
	metricsNext := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pid := env.c.PID(i)
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if pid == 0 || err != nil || len(ents) >= soakNofile-env.fdHeadroom {
			continue
		}
		mu.Lock()
		octet := 0
		for o := ipMetrics0; o < ipMetrics0+soakMetricsIdleMax/api.MetricsConnsPerIP; o++ {
			if octet == 0 && perIP[o] < api.MetricsConnsPerIP {
				octet = o
			}
		}
		useMetrics := octet != 0 && (metricsNext || apiOpen >= soakAPIIdleMax)
		if !useMetrics && apiOpen >= soakAPIIdleMax {
			mu.Unlock()
			continue
		}
		metricsNext = !metricsNext
		mu.Unlock()
		var c net.Conn
		kind := "api"
		if useMetrics {
			kind = "metrics"
			c, err = sourced(fmt.Sprintf("127.0.0.%d", octet)).DialContext(ctx, "tcp", env.metrics[i])
		} else {
			c, err = env.tlsConn(ctx, ipIdleAPI, env.api[i])
		}
		if err == nil {
			if err = idleRequest(c); err != nil {
				c.Close()
			}
		}
		if ctx.Err() != nil {
			if err == nil {
				c.Close()
			}
			return
		}
		if err != nil {
			st.note(kind+" not answered: "+errOutcome(err), err.Error())
			continue
		}
		st.note(kind+" held", "")
		mu.Lock()
		open[c] = true
		if useMetrics {
			perIP[octet]++
		} else {
			apiOpen++
		}
		mu.Unlock()
		readers.Go(func() {
			_, _ = c.Read(make([]byte, 1)) // until the node or the end closes it
			mu.Lock()
			delete(open, c)
			if useMetrics {
				perIP[octet]--
			} else {
				apiOpen--
			}
			mu.Unlock()
			c.Close()
			if ctx.Err() == nil {
				st.note(kind+" closed by the node", "")
			}
		})
	}
}

// streamDials keeps soakStreamDials stream connections (TLS, preface, no
// request) open to every node, replacing the oldest every
// soakStreamDialEvery: dials while the node's descriptors run out.
func streamDials(ctx context.Context, env *soakEnv, st *abuseStats) {
	var wg sync.WaitGroup
	for i := range env.c.Nodes {
		wg.Go(func() {
			var ring []net.Conn
			defer func() {
				for _, c := range ring {
					c.Close()
				}
			}()
			for pause(ctx, soakStreamDialEvery) {
				c, err := env.tlsConn(ctx, ipStream, env.stream[i])
				if err == nil {
					_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					_, err = c.Write([]byte{'R', 'L', 'S', 'P', api.StreamVersion})
				}
				if ctx.Err() != nil {
					return
				}
				st.noteErr(err)
				if err != nil {
					if c != nil {
						c.Close()
					}
					continue
				}
				ring = append(ring, c)
				if len(ring) > soakStreamDials {
					ring[0].Close()
					ring = ring[1:]
				}
			}
		})
	}
	wg.Wait()
}

// metricsFlood opens connections to the leader's metrics port from one
// address, soakFloodEvery apart, at most soakFloodConns at once: each
// asks for /metrics or /v1/health and is held a second after its answer.
func metricsFlood(ctx context.Context, env *soakEnv, st *abuseStats) {
	sem := make(chan struct{}, soakFloodConns)
	var wg sync.WaitGroup
	defer wg.Wait()
	d := sourced(ipFlood)
	for n := 0; pause(ctx, soakFloodEvery); n++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		path := []string{"/metrics", "/v1/health"}[n%2]
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := d.DialContext(ctx, "tcp", env.metrics[env.leader])
			if err != nil {
				if ctx.Err() == nil {
					st.note("dial failed", err.Error())
				}
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			var resp *http.Response
			if err == nil {
				resp, err = http.ReadResponse(bufio.NewReader(c), nil)
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				st.note("unanswered: "+errOutcome(err), err.Error())
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			st.note(strconv.Itoa(resp.StatusCode), path)
			pause(ctx, time.Second)
		})
	}
}

// watchBursts sends bursts of env.watches/4 blocking single-lock watches
// of the admin's held soak/watched/ locks (each waits soakWatchWait) to
// the leader or a follower, over the stream protocol or HTTP/2, the
// first after offset; a burst's watches all answered, the next follows
// soakBurstPause later.
func watchBursts(toFollower, h2 bool, offset time.Duration) func(context.Context, *soakEnv, *abuseStats) {
	return func(ctx context.Context, env *soakEnv, st *abuseStats) {
		target := env.leader
		if toFollower {
			target = env.follower
		}
		var opts []client.ClientOption
		if h2 {
			opts = append(opts, client.WithHTTP2())
		}
		cl := env.readerClient([]int{target}, ipWatch, opts...)
		if cl == nil {
			return
		}
		defer cl.CloseIdleConnections()
		n := env.watches / 4
		for burst := 1; pause(ctx, offset); burst++ {
			offset = soakBurstPause
			// Each watch waits for a change after the lock's index: the
			// admin holds these locks throughout.
			idx := make([]uint64, soakWatchedLocks)
			for j := range idx {
				s, err := cl.LockState(ctx, soakWatchedName(j))
				if err != nil {
					if ctx.Err() == nil {
						st.note("index read: "+errOutcome(err), err.Error())
					}
					continue
				}
				idx[j] = s.Index
			}
			start := time.Now()
			var wg sync.WaitGroup
			for k := range n {
				wg.Go(func() {
					wctx, cancel := context.WithTimeout(ctx, soakWatchWait+30*time.Second)
					defer cancel()
					_, err := cl.WatchLock(wctx, soakWatchedName(k%soakWatchedLocks), idx[k%soakWatchedLocks], soakWatchWait)
					if ctx.Err() == nil {
						st.noteErr(err)
					} else {
						st.note("still waiting at the end", "")
					}
				})
			}
			wg.Wait()
			if ctx.Err() == nil {
				st.tally("bursts")
				st.figure("burst seconds", int64(time.Since(start).Seconds()))
				env.log.add("watch burst %d of %d watches (%s) answered in %v", burst, n, map[bool]string{false: "stream", true: "HTTP/2"}[h2]+map[bool]string{false: " → leader", true: " → follower"}[toFollower], time.Since(start).Round(100*time.Millisecond))
			}
		}
	}
}

// soakWatchedName is the j-th of the admin's held locks the watches wait
// on.
func soakWatchedName(j int) string { return fmt.Sprintf("soak/watched/%02d", j) }

// streamFrame appends a stream request frame (API.md, "The stream
// protocol"): length, type 1, stream id; method, target, headers as
// uvarint-prefixed strings.
func streamFrame(b []byte, id uint32, method, target string, headers ...[2]string) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, id)
	b = str(b, method)
	b = str(b, target)
	b = binary.AppendUvarint(b, uint64(len(headers)))
	for _, h := range headers {
		b = str(str(b, h[0]), h[1])
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-9))
	return b
}

// deafStreams runs soakDeafConns stream clients per target (the leader,
// a follower) that each send soakDeafRequests lock reads of a 4 KiB-valued
// lock, as fast as the node takes them, and never read an answer; each
// holds its connection soakDeafHold after its last write (or after a
// write blocked 3 s: the node stopped reading it, and the kernel's
// buffers are full), then is replaced.
func deafStreams(ctx context.Context, env *soakEnv, st *abuseStats) {
	var wg sync.WaitGroup
	for _, target := range []int{env.leader, env.follower} {
		for range soakDeafConns {
			wg.Go(func() {
				for ctx.Err() == nil {
					deafStream(ctx, env, st, target)
				}
			})
		}
	}
	wg.Wait()
}

func deafStream(ctx context.Context, env *soakEnv, st *abuseStats, target int) {
	c, err := env.tlsConn(ctx, ipStream, env.stream[target])
	if err != nil {
		if ctx.Err() == nil {
			st.note("dial failed", err.Error())
			pause(ctx, time.Second)
		}
		return
	}
	defer c.Close()
	buf := []byte{'R', 'L', 'S', 'P', api.StreamVersion}
	path := "/v1/lock?name=" + url.QueryEscape(soakBigPrefix+"00000")
	sent := 0
	for sent < soakDeafRequests && ctx.Err() == nil {
		for k := range 10 {
			buf = streamFrame(buf, uint32(sent+k+1), "GET", path, [2]string{"Authorization", "Bearer " + env.reader})
		}
		_ = c.SetWriteDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write(buf); err != nil {
			if ctx.Err() != nil {
				return
			}
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				st.note("write failed: "+errOutcome(err), err.Error())
				return
			}
			st.tally("connections the node stopped reading")
			break
		}
		buf = buf[:0]
		sent += 10
	}
	if ctx.Err() != nil {
		return
	}
	st.add("written", int64(sent))
	st.figure("requests written on one connection", int64(sent))
	if sent == soakDeafRequests {
		st.tally("connections that took every request")
	}
	pause(ctx, soakDeafHold)
}

// largeAnswers asks the leader and a follower, soakLargeEvery apart
// each, for the admin's whole big prefix: a listing page of up to
// api.MaxLocksPage locks, or (reset) a prefix watch from index 0, which
// answers every lock at once.
func largeAnswers(reset bool) func(context.Context, *soakEnv, *abuseStats) {
	return func(ctx context.Context, env *soakEnv, st *abuseStats) {
		q := url.Values{"prefix": {soakBigPrefix}, "limit": {strconv.Itoa(api.MaxLocksPage)}}
		if reset {
			q = url.Values{"prefix": {soakBigPrefix}, "index": {"0"}, "wait": {"1s"}}
		}
		var wg sync.WaitGroup
		for _, target := range []int{env.leader, env.follower} {
			hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
				DialContext: sourced(ipSmall).DialContext, TLSClientConfig: env.tls.Clone(), MaxIdleConnsPerHost: 2}}
			u := "https://" + env.api[target] + "/v1/locks?" + q.Encode()
			wg.Go(func() {
				defer hc.CloseIdleConnections()
				for pause(ctx, soakLargeEvery) {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
					req.Header.Set("Authorization", "Bearer "+env.reader)
					start := time.Now()
					resp, err := hc.Do(req)
					var n int64
					var head []byte
					if err == nil {
						head, _ = io.ReadAll(io.LimitReader(resp.Body, 300))
						n, err = io.Copy(io.Discard, resp.Body)
						n += int64(len(head))
						resp.Body.Close()
					}
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						st.note(errOutcome(err), err.Error())
						continue
					}
					detail := ""
					if resp.StatusCode != http.StatusOK {
						detail = string(head)
					}
					st.note(strconv.Itoa(resp.StatusCode), detail)
					st.figure("answer KiB", n>>10)
					st.figure("answer ms", time.Since(start).Milliseconds())
				}
			})
		}
		wg.Wait()
	}
}

// bootstrapPolling polls POST /v1/acl/bootstrap on every node with no
// token (with and without a guessed reset secret), soakBootstrapEvery
// apart. From 40% of its run to 15 s later the operator's reset file
// (the reset index the refusals name, and a secret) is in every node's
// data dir, as when an operator prepares a reset: the polls must still
// never win.
func bootstrapPolling(ctx context.Context, env *soakEnv, st *abuseStats) {
	var cls []*client.Client
	for i := range env.c.Nodes {
		cl, err := client.NewClient([]string{"https://" + env.api[i]}, client.WithTLS(env.tls.Clone()),
			client.WithDialer(sourced(ipSmall).DialContext), client.WithStreamProtocol(false))
		if err != nil {
			env.t.Error(err)
			return
		}
		cls = append(cls, cl)
	}
	dl, _ := ctx.Deadline()
	fileAt := time.Now().Add(time.Until(dl) * 2 / 5)
	var files []string
	defer func() {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}()
	resetIndex := regexp.MustCompile(`reset index: (\d+)`)
	var index string
	for n := 0; pause(ctx, soakBootstrapEvery); n++ {
		if files == nil && index != "" && time.Now().After(fileAt) {
			secret := make([]byte, 16)
			_, _ = rand.Read(secret)
			for i := range env.c.Nodes {
				f := filepath.Join(env.c.Flag(i, "--data-dir"), "acl-bootstrap-reset")
				if err := os.WriteFile(f, []byte(index+" "+hex.EncodeToString(secret)+"\n"), 0o600); err != nil {
					env.t.Error(err)
				}
				files = append(files, f)
			}
			env.log.add("operator: reset file (index %s) written in every data dir", index)
		}
		if len(files) > 0 && time.Now().After(fileAt.Add(15*time.Second)) {
			for _, f := range files {
				_ = os.Remove(f)
			}
			files = files[:0]
			env.log.add("operator: reset files removed")
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		if n%2 == 0 {
			_, err = cls[n%3].ACLBootstrap(rctx)
		} else {
			_, err = cls[n%3].ACLBootstrapReset(rctx, "guessed-secret-"+strconv.Itoa(n))
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		st.noteErr(err)
		if m := resetIndex.FindStringSubmatch(fmt.Sprint(err)); m != nil {
			index = m[1]
		}
	}
}

// forgedSequencers asks POST /v1/sequencer/check about forged
// sequencers, soakForgeEvery apart: the legitimate lock's with the
// highest token, another mode, a semaphore slot, an unknown lock's, a
// malformed one, one whose name has a bidi control. None may be valid.
func forgedSequencers(ctx context.Context, env *soakEnv, st *abuseStats) {
	cl := env.readerClient([]int{0, 1, 2}, ipSmall)
	if cl == nil {
		return
	}
	forged := []string{
		fmt.Sprintf("rl1:x:%d:%s", uint64(math.MaxUint64), soakLegitLock),
		fmt.Sprintf("rl1:x:%d:%s", uint64(1)<<40, soakLegitLock),
		"rl1:s:1:" + soakBigPrefix + "00000",
		"rl1:p0/3:5:" + soakLegitLock,
		"rl1:x:18446744073709551615:a",
		"rl1:x:abc:" + soakLegitLock,
		"rl1:x:7:soak/\u202egpj.exe",
	}
	for n := 0; pause(ctx, soakForgeEvery); n++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		chk, err := cl.CheckSequencer(rctx, forged[n%len(forged)])
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			st.noteErr(err)
		case chk.Valid:
			st.note("valid", forged[n%len(forged)])
		default:
			st.note("invalid", "")
		}
	}
}

// bidiNames opens sessions whose names hold a bidi override and reads a
// lock whose name holds one, soakBidiEvery apart (a session it opens is
// closed at once).
func bidiNames(ctx context.Context, env *soakEnv, st *abuseStats) {
	cl := env.readerClient([]int{0, 1, 2}, ipSmall)
	if cl == nil {
		return
	}
	for n := 0; pause(ctx, soakBidiEvery); n++ {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		what := "session name"
		if n%2 == 0 {
			var info api.Info
			info, err = cl.OpenSession(rctx, api.OpenRequest{TTL: 10 * time.Second, Name: "admin\u202etxt.exe"})
			if err == nil {
				_ = cl.CloseSession(rctx, info.ID)
			}
		} else {
			what = "lock name"
			_, err = cl.LockState(rctx, "soak/\u202egpj.exe")
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		detail := ""
		if err != nil {
			detail = err.Error()
		}
		st.note(what+": "+errOutcome(err), detail)
	}
}

// bigHeaders sends, soakHeaderEvery apart, alternately to the leader and
// a follower, a stream request with a header value of 17 KiB (past
// api.MaxStreamHeaderBytes) and reads what the node answers: a goaway
// with its code, as API.md's stream limits say.
func bigHeaders(ctx context.Context, env *soakEnv, st *abuseStats) {
	pad := strings.Repeat("p", 17<<10)
	for n := 0; pause(ctx, soakHeaderEvery); n++ {
		target := []int{env.leader, env.follower}[n%2]
		c, err := env.tlsConn(ctx, ipStream, env.stream[target])
		if err != nil {
			if ctx.Err() == nil {
				st.note("dial failed", err.Error())
			}
			continue
		}
		buf := append([]byte{'R', 'L', 'S', 'P', api.StreamVersion}, streamFrame(nil, 1, "GET", "/v1/health", [2]string{"X-Pad", pad})...)
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		outcome, detail := "", ""
		if _, err = c.Write(buf); err == nil {
			outcome, detail, err = readStreamOutcome(c)
		}
		c.Close()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			st.note(errOutcome(err), err.Error())
			continue
		}
		st.note(outcome, detail)
	}
}

// readStreamOutcome reads one frame from c: "goaway CODE", or "answer
// STATUS".
func readStreamOutcome(c net.Conn) (outcome, detail string, err error) {
	var hdr [9]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return "", "", err
	}
	length := binary.BigEndian.Uint32(hdr[:])
	if length > 1<<20 {
		return "", "", fmt.Errorf("a frame of %d bytes", length)
	}
	payload := make([]byte, length)
	if _, err := io.ReadFull(c, payload); err != nil {
		return "", "", err
	}
	switch hdr[4] {
	case 4:
		var er api.ErrorReply
		if err := json.Unmarshal(payload, &er); err != nil {
			return "", "", fmt.Errorf("goaway body %q: %w", payload, err)
		}
		return "goaway " + er.Error.Code, er.Error.Message, nil
	case 2:
		if len(payload) < 2 {
			return "", "", errors.New("short answer frame")
		}
		return "answer " + strconv.Itoa(int(binary.BigEndian.Uint16(payload))), "", nil
	}
	return fmt.Sprintf("frame type %d", hdr[4]), "", nil
}
