package raftnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/raftlock/raftlock/api"
)

const (
	digestsPath  = "/v1/internal/digests"
	divergedPath = "/v1/internal/diverged"
)

// peerCall makes one request to the peer port at addr (dialling with dial,
// nil: a plain dialer) and decodes a 200 answer into out.
func peerCall(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), method, addr, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", path, addr, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", path, addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", path, addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", path, addr, resp.StatusCode, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", path, addr, err)
	}
	return nil
}

// GetDigests asks the replica at peer port addr for its recent digests.
func GetDigests(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (api.DigestReport, error) {
	var rep api.DigestReport
	err := peerCall(ctx, dial, http.MethodGet, addr, digestsPath, nil, &rep)
	return rep, err
}

// TellDiverged tells the replica at peer port addr that it diverged.
func TellDiverged(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, n api.DivergedNotice) error {
	var out map[string]bool
	return peerCall(ctx, dial, http.MethodPost, addr, divergedPath, n, &out)
}

// PostMember asks the leader, at its peer port addr, to record member m in
// the member table (POST /v1/internal/members, served on the peer port
// only), dialling with dial (nil: a plain dialer).
func PostMember(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string, m api.Member) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("register %s: %w", m.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/internal/members", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("register %s: %w", m.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("register %s at %s: %w", m.ID, addr, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		var er api.ErrorReply
		if json.Unmarshal(data, &er) == nil && er.Error.Code != "" {
			return fmt.Errorf("register %s at %s: %s: %s", m.ID, addr, er.Error.Code, er.Error.Message)
		}
		return fmt.Errorf("register %s at %s: HTTP %d", m.ID, addr, resp.StatusCode)
	}
	return nil
}

// ServeBootstrapProbe serves the bootstrap probe alone (GET
// /v1/internal/bootstrap-state, answered by state) on ln, a node's peer
// port, while the node decides whether to bootstrap, before it serves its
// API. Every other request is answered no_leader. The returned stop closes
// the server at once.
func ServeBootstrapProbe(ln net.Listener, state func() api.BootstrapState) (stop func() error) {
	srv := &http.Server{Handler: bootstrapProbeHandler(state), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv.Close
}

func bootstrapProbeHandler(state func() api.BootstrapState) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == bootstrapStatePath {
			writeJSON(w, http.StatusOK, state())
			return
		}
		writeJSON(w, api.StatusOf(api.CodeNoLeader), api.ErrorReply{Error: api.ErrorBody{Code: string(api.CodeNoLeader),
			Message: "node is starting: it is deciding whether to bootstrap"}})
	})
}

// writeJSON writes v as a JSON answer, as the API server does.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":{"code":"internal","message":"encoding the answer failed"}}`)
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

const bootstrapStatePath = "/v1/internal/bootstrap-state"

// GetBootstrapState asks the node at peer port addr whether it holds Raft
// state (the bootstrap probe), dialling with dial (nil: a plain dialer).
func GetBootstrapState(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (api.BootstrapState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+bootstrapStatePath, nil)
	if err != nil {
		return api.BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return api.BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return api.BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return api.BootstrapState{}, fmt.Errorf("bootstrap probe of %s: HTTP %d: %s", addr, resp.StatusCode, bytes.TrimSpace(data))
	}
	var st api.BootstrapState
	if err := json.Unmarshal(data, &st); err != nil {
		return api.BootstrapState{}, fmt.Errorf("bootstrap probe of %s: %w", addr, err)
	}
	return st, nil
}
