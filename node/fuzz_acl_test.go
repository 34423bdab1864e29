package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/transport/client"
)

// fuzzACLRoutes are the routes FuzzACLTokenPaths calls (the fuzzer picks
// one by index), SID standing for a session the admin token opened.
var fuzzACLRoutes = []struct{ method, path string }{
	{"POST", "/v1/sessions"}, {"POST", "/v1/sessions/SID/keepalive"}, {"GET", "/v1/sessions/SID"},
	{"DELETE", "/v1/sessions/SID"}, {"POST", "/v1/acquire"}, {"POST", "/v1/release"},
	{"GET", "/v1/lock?name=jobs/a"}, {"GET", "/v1/locks?prefix="}, {"POST", "/v1/sequencer/check"},
	{"GET", "/v1/cluster"}, {"GET", "/v1/health"}, {"POST", "/v1/acl/bootstrap"},
	{"POST", "/v1/acl/tokens"}, {"GET", "/v1/acl/tokens"}, {"DELETE", "/v1/acl/tokens/x"},
}

// FuzzACLTokenPaths sends random Authorization headers and bodies to the
// routes of a node with ACLs on, through its HTTP server: no answer is a
// 500; a header that does not carry an issued secret gets 401
// unauthenticated on every route but the open ones (health, bootstrap);
// an issued secret is never answered 401; and no answer carries an issued
// secret, nor the session id but on the session's own routes.
func FuzzACLTokenPaths(f *testing.F) {
	c := newTestCluster(f, 1, func(cfg *Config) { cfg.ACL = true }, withHTTP)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	anon, err := client.NewClient(c.httpAddrs)
	if err != nil {
		f.Fatal(err)
	}
	boot, err := anon.ACLBootstrap(ctx)
	if err != nil {
		f.Fatal(err)
	}
	admin, err := client.NewClient(c.httpAddrs, client.WithToken(boot.Secret))
	if err != nil {
		f.Fatal(err)
	}
	reader, err := admin.CreateToken(ctx, api.TokenRequest{Name: "reader", Rules: []string{"read:"}})
	if err != nil {
		f.Fatal(err)
	}
	info, err := admin.OpenSession(ctx, api.OpenRequest{Name: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	secrets := map[string]bool{boot.Secret: true, reader.Secret: true}
	for i := range fuzzACLRoutes {
		for _, h := range []string{"", "Bearer " + boot.Secret, "Bearer " + reader.Secret, "bearer  " + reader.Secret,
			"Bearer " + boot.Secret + "x", "Basic " + boot.Secret, "Bearer " + info.ID, "Bearer \x00"} {
			f.Add(uint8(i), h, []byte(`{"name":"jobs/a","session":"SID","holder":"h","rules":["read:"]}`))
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, route uint8, header string, body []byte) {
		r := fuzzACLRoutes[int(route)%len(fuzzACLRoutes)]
		path := strings.ReplaceAll(r.path, "SID", info.ID)
		body = bytes.ReplaceAll(body, []byte("SID"), []byte(info.ID))
		req, err := http.NewRequest(r.method, "http://"+c.httpAddrs[0]+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", header)
		if req.Header.Get("Authorization") != header {
			return // not a header value net/http would send
		}
		resp, err := hc.Do(req)
		if err != nil {
			return // a header value the transport refuses to send
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		if resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s %s with %q: 500 %s", r.method, path, header, data)
		}
		open := r.path == "/v1/health" || r.path == "/v1/acl/bootstrap"
		secret, perr := api.ParseBearer(header)
		known := perr == nil && secrets[secret]
		switch {
		case !known && !open && (resp.StatusCode != http.StatusUnauthorized || e.Error.Code != string(api.CodeUnauthenticated)):
			t.Fatalf("%s %s with %q (no issued secret): %d %s, want 401 unauthenticated", r.method, path, header, resp.StatusCode, data)
		case known && resp.StatusCode == http.StatusUnauthorized:
			t.Fatalf("%s %s with an issued secret: 401 %s", r.method, path, data)
		}
		for s := range secrets {
			if bytes.Contains(data, []byte(s)) {
				t.Fatalf("%s %s with %q: the answer carries a secret: %s", r.method, path, header, data)
			}
		}
		// A session's own routes may name it: their caller has its id.
		if !strings.HasPrefix(r.path, "/v1/sessions") && bytes.Contains(data, []byte(info.ID)) {
			t.Fatalf("%s %s with %q: the answer carries the session id: %s", r.method, path, header, data)
		}
	})
}
