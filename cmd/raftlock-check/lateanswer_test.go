package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLateAnswerHoldsOneGrantedAcquire pins the client side of the
// late-answer fault: armed, the layer holds the answer of the next
// granted acquire whose request may last long enough (telling the
// checker which grant, and holder, it holds), lets every other request through meanwhile, and
// delivers the held answer, intact, once released (or its request is
// about to time out).
func TestLateAnswerHoldsOneGrantedAcquire(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/acquire" {
			io.WriteString(w, `{"name":"check/lock0","mode":"exclusive","token":42,"sequencer":"rl1:x:42:check/lock0"}`)
			return
		}
		io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	var out bytes.Buffer
	l := newLink(&out)
	la := newLateAnswers(http.DefaultTransport, l)
	hc := &http.Client{Transport: la}
	post := func(ctx context.Context, path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(`{"name":"check/lock0","holder":"h1"}`))
		return hc.Do(req)
	}
	la.handle(message{T: msgLateArm, ID: 7, WaitFor: int64(time.Minute)})
	// A request that would time out too soon is not held.
	short, cancel := context.WithTimeout(context.Background(), lateAnswerMin-time.Second)
	resp, err := post(short, "/v1/acquire")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if out.Len() != 0 {
		t.Fatalf("a request shorter than the hold was caught: %s", out.String())
	}
	got := make(chan []byte, 1)
	go func() {
		resp, err := post(context.Background(), "/v1/acquire")
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- b
	}()
	var caught message
	for deadline := time.Now().Add(10 * time.Second); ; {
		l.wmu.Lock()
		line := out.String()
		l.wmu.Unlock()
		if line != "" {
			if err := json.Unmarshal([]byte(line), &caught); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the granted acquire was not caught")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if caught.T != msgLateCaught || caught.ID != 7 || caught.Lock != "check/lock0" || caught.Token != 42 || caught.Holder != "h1" {
		t.Fatalf("caught %+v, want late_caught 7 of check/lock0 token 42, holder h1", caught)
	}
	// The rest of the traffic flows while the answer is held.
	resp, err = post(context.Background(), "/v1/keepalive")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case b := <-got:
		t.Fatalf("the held answer arrived before its release: %s", b)
	default:
	}
	la.handle(message{T: msgLateRelease, ID: 7})
	if b := <-got; !strings.Contains(string(b), `"token":42`) {
		t.Fatalf("the released answer is %q, want the grant of token 42", b)
	}
}
