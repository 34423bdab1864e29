package sequencer

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// errChecker is a Checker that always fails with err.
type errChecker struct{ err error }

func (c errChecker) Check(Sequencer) error { return c.err }

func TestMiddleware(t *testing.T) {
	f := NewFence()
	if err := f.CheckString("rl1:x:10:res"); err != nil {
		t.Fatal(err)
	}
	var gotSeq Sequencer
	var called bool
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		var ok bool
		gotSeq, ok = FromContext(r.Context())
		if !ok {
			t.Error("FromContext found no sequencer")
		}
		w.WriteHeader(http.StatusNoContent)
	})

	tests := []struct {
		name    string
		checker Checker
		headers []string // nil: header absent
		status  int
		code    string
	}{
		{"missing", f, nil, http.StatusPreconditionRequired, "sequencer_required"},
		{"empty", f, []string{""}, http.StatusPreconditionRequired, "sequencer_required"},
		{"malformed", f, []string{"rl1:x:zero:res"}, http.StatusBadRequest, "invalid_argument"},
		{"token zero", f, []string{"rl1:x:0:res"}, http.StatusBadRequest, "invalid_argument"},
		{"repeated", f, []string{"rl1:x:10:res", "rl1:x:11:res"}, http.StatusBadRequest, "invalid_argument"},
		{"stale", f, []string{"rl1:x:9:res"}, http.StatusConflict, "stale_sequencer"},
		{"equal", f, []string{"rl1:x:10:res"}, http.StatusNoContent, ""},
		{"newer", f, []string{"rl1:x:12:res"}, http.StatusNoContent, ""},
		{"older than newer", f, []string{"rl1:x:11:res"}, http.StatusConflict, "stale_sequencer"},
		{"other lock", f, []string{"rl1:s:1:other"}, http.StatusNoContent, ""},
		{"checker failure", errChecker{errors.New("disk on fire")}, []string{"rl1:x:1:res"}, http.StatusInternalServerError, "internal"},
		{"checker says malformed", errChecker{ErrMalformed}, []string{"rl1:x:1:res"}, http.StatusBadRequest, "invalid_argument"},
		{"nil checker", nil, []string{"rl1:x:1:res"}, http.StatusInternalServerError, "internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			called = false
			req := httptest.NewRequest(http.MethodPut, "/resource", nil)
			for _, h := range tc.headers {
				req.Header.Add(Header, h)
			}
			rec := httptest.NewRecorder()
			Middleware(tc.checker, next).ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", rec.Code, tc.status, rec.Body)
			}
			if tc.code == "" {
				if !called {
					t.Fatal("next not called")
				}
				if gotSeq.String() != tc.headers[0] {
					t.Fatalf("FromContext = %v, want %s", gotSeq, tc.headers[0])
				}
				return
			}
			if called {
				t.Fatal("next called for a rejected request")
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var body struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if body.Error.Code != tc.code || body.Error.Message == "" {
				t.Fatalf("error = %+v, want code %s and a message", body.Error, tc.code)
			}
		})
	}
}

func TestMiddlewareWithFileFence(t *testing.T) {
	f, _ := openTemp(t)
	h := Middleware(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tc := range []struct {
		seq    string
		status int
	}{
		{"rl1:x:3:f", http.StatusOK},
		{"rl1:x:2:f", http.StatusConflict},
		{"rl1:x:3:f", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set(Header, tc.seq)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.seq, resp.StatusCode, tc.status)
		}
	}
}

func TestFromContextEmpty(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	if s, ok := FromContext(req.Context()); ok {
		t.Fatalf("FromContext on a bare context = %v, true", s)
	}
}

func TestMiddlewareAdmitsConcurrentReaders(t *testing.T) {
	for _, impl := range fenceImpls {
		t.Run(impl.name, func(t *testing.T) {
			f, _ := impl.open(t)
			h := Middleware(f, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			for _, tc := range []struct {
				seq    string
				status int
			}{
				{"rl1:s:10:cfg", http.StatusOK},
				{"rl1:s:12:cfg", http.StatusOK},
				{"rl1:s:10:cfg", http.StatusOK}, // the older reader still holds the lock
				{"rl1:x:11:cfg", http.StatusConflict},
				{"rl1:x:15:cfg", http.StatusOK},
				{"rl1:s:12:cfg", http.StatusConflict},
			} {
				req := httptest.NewRequest(http.MethodPut, "/resource", nil)
				req.Header.Set(Header, tc.seq)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tc.status {
					t.Fatalf("%s: status %d, want %d (body %s)", tc.seq, rec.Code, tc.status, rec.Body)
				}
			}
		})
	}
}
