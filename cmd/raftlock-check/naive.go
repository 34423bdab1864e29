package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"
)

// The naive waiter is a client that talks HTTP without the Go client's
// retries: one request per acquire, to one node, and it takes every
// answer at its word. Given no_leader (which promises that nothing was
// appended) it neither retries nor cancels: it walks away. A cluster that
// answers no_leader to a wait it has queued then keeps a place nobody
// will ever use, and later grants the lock to that ghost; the
// no-ghost-grant check catches it. Given an answer that does not say what
// happened (unknown_outcome, a broken connection) it cancels its place
// with a release, as the contract asks of a client that stops waiting.

// naiveSlack is how much longer than its wait the naive waiter waits for
// an answer (like the transport's request timeout).
const naiveSlack = 10 * time.Second

// rawBackend is a api.Backend whose Acquire is one HTTP request to one
// node, picked at random for every call; every other method is inner's.
type rawBackend struct {
	api.Backend
	hc    *http.Client
	addrs []string
	pick  func(n int) int
	// token is the ACL token's secret, sent as a Bearer token when set.
	token string
}

// Acquire implements api.Backend with a single attempt. A request
// that could not be sent (a failed dial) is answered no_leader, as the
// transport does: nothing reached the cluster. A request that broke after
// it was sent, or timed out, is an error without an API code (unknown
// outcome).
func (b *rawBackend) Acquire(ctx context.Context, req api.AcquireRequest) (api.Grant, error) {
	addr := b.addrs[b.pick(len(b.addrs))]
	body := api.AcquireBody{Name: req.Name, Session: req.Session, Holder: req.Holder, Wait: req.Wait.String(), Value: req.Value}
	if req.Mode != 0 {
		body.Mode = req.Mode.String()
	}
	data, err := json.Marshal(body)
	if err != nil {
		return api.Grant{}, fmt.Errorf("naive acquire %s: encode: %w", req.Name, err)
	}
	rctx, cancel := context.WithTimeout(ctx, req.Wait+naiveSlack)
	defer cancel()
	hr, err := http.NewRequestWithContext(rctx, http.MethodPost, nodeURL(addr, "/v1/acquire"), bytes.NewReader(data))
	if err != nil {
		return api.Grant{}, fmt.Errorf("naive acquire %s: %w", req.Name, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if b.token != "" {
		hr.Header.Set("Authorization", "Bearer "+b.token)
	}
	resp, err := b.hc.Do(hr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
			return api.Grant{}, api.Errorf(api.CodeNoLeader, "naive acquire %s: not sent to %s: %v", req.Name, addr, err)
		}
		return api.Grant{}, fmt.Errorf("naive acquire %s via %s: %w", req.Name, addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return api.Grant{}, fmt.Errorf("naive acquire %s via %s: reading the answer: %w", req.Name, addr, err)
	}
	if resp.StatusCode/100 == 2 {
		var out api.GrantReply
		if err := json.Unmarshal(raw, &out); err != nil {
			return api.Grant{}, fmt.Errorf("naive acquire %s via %s: decode grant: %w", req.Name, addr, err)
		}
		term, _ := strconv.ParseUint(resp.Header.Get(api.HeaderTerm), 10, 64)
		g, err := out.Grant(term)
		if err != nil {
			return api.Grant{}, fmt.Errorf("naive acquire %s via %s: %w", req.Name, addr, err)
		}
		return g, nil
	}
	var er api.ErrorReply
	if err := json.Unmarshal(raw, &er); err == nil && er.Error.Code != "" {
		return api.Grant{}, fmt.Errorf("naive acquire %s via %s: %w", req.Name, addr,
			&api.Error{Code: api.Code(er.Error.Code), Message: er.Error.Message})
	}
	return api.Grant{}, fmt.Errorf("naive acquire %s via %s: HTTP %d: %.200s", req.Name, addr, resp.StatusCode, raw)
}

// naiveHolderID returns a fresh holder id for one naive acquire.
func naiveHolderID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:]) + "-naive"
}

// definiteNoPlace reports whether an acquire's answer says that the call
// left its holder neither queued nor holding: no_leader (nothing was
// appended), wait_timeout and wait_cancelled (the wait ended, not
// granted), session_not_found (the session is gone), lock_busy of a try.
func definiteNoPlace(err error, wait bool) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	switch api.CodeOf(err) {
	case api.CodeNoLeader, api.CodeWaitTimeout, codeWaitCancelled, api.CodeSessionNotFound:
		return true
	case api.CodeLockBusy:
		return !wait
	}
	return false
}

// naiveWait is one wait of the naive waiter on lock name, in session s:
// one request; granted, it holds the lock for holdMin..holdMax (without
// writing) and releases it; answered definitely, it walks away; otherwise
// it cancels its place (a release, retried by the Go client).
func (w *workload) naiveWait(ctx context.Context, sid, name string) {
	req := api.AcquireRequest{Name: name, Session: sid, Holder: naiveHolderID(),
		Wait: w.between(naiveWaitMin, naiveWaitMax)}
	_, err := w.naive.Acquire(ctx, req)
	rel := api.ReleaseRequest{Name: name, Session: sid, Holder: req.Holder}
	switch {
	case err == nil:
		sleep(ctx, w.between(holdMin, holdMax))
		uctx, cancel := context.WithTimeout(context.WithValue(context.Background(), unlockIntent{}, true), unlockTimeout)
		defer cancel()
		if err := w.backend.Release(uctx, rel); err != nil {
			w.logf("naive release %s: %v", name, err)
		}
	case definiteNoPlace(err, true):
		// Taken at its word: no place, nothing to cancel.
	default:
		cctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		if err := w.backend.Release(cctx, rel); err != nil {
			w.logf("naive cancel %s: %v", name, err)
		}
	}
}
