package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/raftlock/raftlock/api"
)

// Snapshot downloads a backup of the cluster's state (GET /v1/snapshot,
// admin) and writes it to w. Any node answers (a follower forwards to the
// leader); one that cannot is skipped, until ctx ends.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (api.SnapshotInfo, error) {
	var info api.SnapshotInfo
	err := c.raw(ctx, http.MethodGet, "/v1/snapshot", nil, nil, func(resp *http.Response) error {
		info.Index, _ = strconv.ParseUint(resp.Header.Get(api.HeaderSnapshotIndex), 10, 64)
		info.Checksum = resp.Header.Get(api.HeaderSnapshotChecksum)
		n, err := io.Copy(w, resp.Body)
		if err != nil {
			return fmt.Errorf("raftlock GET /v1/snapshot: reading the backup: %w", err)
		}
		if resp.ContentLength >= 0 && n != resp.ContentLength {
			return fmt.Errorf("raftlock GET /v1/snapshot: backup truncated: %d of %d bytes", n, resp.ContentLength)
		}
		return nil
	})
	return info, err
}

// Restore replaces the cluster's state with the backup file data (POST
// /v1/snapshot/restore, admin). Every token granted afterwards is above
// every token the cluster issued before, and above minToken (0: no
// floor of its own). A file that is not a whole backup is refused
// (invalid_argument) and nothing changes. Restore is not retried once the
// request may have reached the leader: an unknown_outcome error means it
// may or may not have happened.
func (c *Client) Restore(ctx context.Context, data []byte, minToken uint64) (api.RestoreInfo, error) {
	var info api.RestoreInfo
	q := url.Values{}
	if minToken > 0 {
		q.Set("min_token", strconv.FormatUint(minToken, 10))
	}
	err := c.raw(ctx, http.MethodPost, "/v1/snapshot/restore", q, data, func(resp *http.Response) error {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&info); err != nil {
			return fmt.Errorf("raftlock POST /v1/snapshot/restore: decode answer: %w", err)
		}
		return nil
	})
	return info, err
}

// raw sends a request whose body or answer is not JSON (a backup file) to
// each address in turn, from the current one, until one serves it: an
// address that cannot be reached, or answers no_leader, is skipped (with
// a backoff after a whole round); any other error ends the call, as does
// a failure after a request with a body was sent (unknown_outcome).
func (c *Client) raw(ctx context.Context, method, path string, q url.Values, body []byte, ok func(*http.Response) error) error {
	what := method + " " + path
	addrs := c.list()
	if len(addrs) == 0 {
		return fmt.Errorf("raftlock %s: %w", what, api.Errorf(api.CodeInvalidArgument, "the client has no fixed address to send it to (WithResolver only)"))
	}
	backoff := c.minBackoff
	var last error
	for round := 0; ; round++ {
		start := c.cur.Load()
		for i := range addrs {
			addr := addrs[(start+uint64(i))%uint64(len(addrs))]
			u := c.url(addr, path)
			if len(q) > 0 {
				u += "?" + q.Encode()
			}
			var rd io.Reader
			if body != nil {
				rd = bytes.NewReader(body)
			}
			req, err := http.NewRequestWithContext(ctx, method, u, rd)
			if err != nil {
				return fmt.Errorf("raftlock %s: %w", what, err)
			}
			if body != nil {
				req.Header.Set("Content-Type", "application/octet-stream")
			}
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := c.hc.Do(req)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("raftlock %s via %s: %w", what, addr, ctx.Err())
				}
				if body != nil && !isDialError(err) {
					return fmt.Errorf("raftlock %s via %s: %w", what, addr, &api.Error{Code: api.CodeUnknownOutcome,
						Message: fmt.Sprintf("connection failed after the request was sent: %v; it may or may not have been processed", err)})
				}
				last = fmt.Errorf("cannot reach %s: %w", addr, err)
				continue
			}
			if resp.StatusCode/100 == 2 {
				err := ok(resp)
				resp.Body.Close()
				return err
			}
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			var er api.ErrorReply
			if json.Unmarshal(data, &er) != nil || er.Error.Code == "" {
				text := strings.TrimSpace(string(data))
				if len(text) > 200 {
					text = text[:200] + "..."
				}
				return fmt.Errorf("raftlock %s via %s: %w", what, addr, api.Errorf(api.CodeInternal, "HTTP %d: %s", resp.StatusCode, text))
			}
			e := &api.Error{Code: api.Code(er.Error.Code), Message: er.Error.Message}
			if e.Code != api.CodeNoLeader {
				return fmt.Errorf("raftlock %s via %s: %w", what, addr, e)
			}
			last = e
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return fmt.Errorf("raftlock %s: %w (gave up: %w)", what, last, err)
		}
		backoff = min(2*backoff, c.maxBackoff)
	}
}

// isDialError reports whether err is a failure to connect (or a TLS
// handshake refused): the request was surely not sent.
func isDialError(err error) bool {
	var op *net.OpError
	return (errors.As(err, &op) && op.Op == "dial") || tlsRefused(err) != nil
}
