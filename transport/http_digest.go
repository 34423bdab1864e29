package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// Digester is what a Service implements to prove that its replica agrees
// with the others (node.Node does): its recent state digests
// (fsm.FSM.Digests), served on the peer port.
type Digester interface {
	DigestReport() api.DigestReport
	// Diverged is told by the leader that this replica's digest differs
	// from the majority's (POST /v1/internal/diverged).
	Diverged(d api.DivergedNotice)
}

const (
	digestsPath  = "/v1/internal/digests"
	divergedPath = "/v1/internal/diverged"
)

func (s *Server) handleDigests(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	d, ok := s.svc.(Digester)
	if !ok {
		return invalidf("this server keeps no digests")
	}
	writeJSON(w, http.StatusOK, d.DigestReport())
	return nil
}

func (s *Server) handleDiverged(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	var n api.DivergedNotice
	if err := decodeBody(w, r, &n); err != nil {
		return err
	}
	d, ok := s.svc.(Digester)
	if !ok {
		return invalidf("this server keeps no digests")
	}
	d.Diverged(n)
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	return nil
}

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
