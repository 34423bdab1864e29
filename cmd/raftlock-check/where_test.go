package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftlock/raftlock/api"
)

// whereReply feeds the link a msgWhere and returns the client's answer.
func whereReply(t *testing.T, out *bytes.Buffer, l *link) string {
	t.Helper()
	out.Reset()
	if err := l.readLoop(strings.NewReader(`{"t":"where","id":7}` + "\n")); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if m.T == msgWhereReply && m.ID == 7 {
			return m.Node
		}
	}
	t.Fatal("no answer to msgWhere")
	return ""
}

// A client answers msgWhere with the node it talks to now: the one its Go
// client's last request went to, after moving on from a node that did not
// serve (the freeze-node fault counts the clients it meets with it).
func TestClientTellsWhichNodeItTalksTo(t *testing.T) {
	var downAsked atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downAsked.Add(1)
		apiError(w, http.StatusServiceUnavailable, api.CodeNoLeader)
	}))
	t.Cleanup(down.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.KeepAliveReply{TTL: "3s"})
	}))
	t.Cleanup(up.Close)
	upAddr := strings.TrimPrefix(up.URL, "http://")
	var out bytes.Buffer
	l := newLink(&out)
	// Seed 1 shuffles the addresses into this order: down first.
	w, err := newWorkload(clientConfig{Addrs: []string{strings.TrimPrefix(down.URL, "http://"), upAddr}, Locks: []string{lk}, Seed: 1}, l, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := whereReply(t, &out, l); got != "" {
		t.Errorf("before any request the client talks to %q, want none", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.backend.KeepAlive(ctx, sA); err != nil {
		t.Fatal(err)
	}
	if downAsked.Load() == 0 {
		t.Fatal("the client never asked the node that does not serve: the test proves nothing")
	}
	if got := whereReply(t, &out, newLinkLike(l, &out)); got != upAddr {
		t.Errorf("the client talks to %q, want %q (the node that served)", got, upAddr)
	}
}

// newLinkLike returns a fresh link (a link stops after its input ends)
// writing to out and answering msgWhere as l does.
func newLinkLike(l *link, out *bytes.Buffer) *link {
	n := newLink(out)
	n.where = l.where
	return n
}
