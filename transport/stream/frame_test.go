package stream

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/raftlock/raftlock/api"
)

// A request frame decodes to what was encoded: method, target, headers
// (names canonical), body.
func TestRequestFrameRoundTrips(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer x"}, "Content-Type": {"application/json"}, "X-Raftlock-Forwarded": {"n1@3"}}
	body := []byte(`{"name":"a"}`)
	f := appendRequest(nil, 7, "POST", "/v1/locks/a/acquire?wait=1s", h, body)
	fh, err := readHeader(bytes.NewReader(f), make([]byte, headerLen))
	if err != nil {
		t.Fatal(err)
	}
	if fh.typ != typeRequest || fh.stream != 7 || int(fh.length) != len(f)-headerLen {
		t.Fatalf("header %+v", fh)
	}
	rq, err := decodeRequest(f[headerLen:])
	if err != nil {
		t.Fatal(err)
	}
	if rq.method != "POST" || rq.target != "/v1/locks/a/acquire?wait=1s" || !reflect.DeepEqual(rq.header, h) || !bytes.Equal(rq.body, body) {
		t.Fatalf("decoded %+v", rq)
	}
}

// An answer frame decodes to what was encoded.
func TestAnswerFrameRoundTrips(t *testing.T) {
	h := http.Header{"X-Raftlock-Leader-Addr": {"127.0.0.1:7001"}, "Retry-After": {"1"}}
	f := appendAnswer(nil, 9, 503, h, []byte("{}"))
	a, err := decodeAnswer(f[headerLen:])
	if err != nil {
		t.Fatal(err)
	}
	if a.status != 503 || !reflect.DeepEqual(a.header, h) || string(a.body) != "{}" {
		t.Fatalf("decoded %+v", a)
	}
}

// Malformed request payloads are refused with an error, never a panic:
// truncated strings, bad header names and values, a bad method or target,
// headers past the limit.
func TestMalformedRequestFramesAreRefused(t *testing.T) {
	good := appendRequest(nil, 1, "GET", "/v1/health", http.Header{"A": {"b"}}, nil)[headerLen:]
	big := strings.Repeat("x", api.MaxStreamHeaderBytes)
	for name, p := range map[string][]byte{
		"empty":           {},
		"truncated":       good[:len(good)-2],
		"bad method":      appendRequest(nil, 1, "G T", "/v1/health", nil, nil)[headerLen:],
		"relative target": appendRequest(nil, 1, "GET", "v1/health", nil, nil)[headerLen:],
		"target with CR":  appendRequest(nil, 1, "GET", "/v1/health\r\nX: y", nil, nil)[headerLen:],
		"header name":     appendRequest(nil, 1, "GET", "/", http.Header{"A B": {"c"}}, nil)[headerLen:],
		"header value":    appendRequest(nil, 1, "GET", "/", http.Header{"A": {"c\nd"}}, nil)[headerLen:],
		"huge count":      append(appendString(appendString(nil, "GET"), "/"), 0xff, 0xff, 0xff, 0x0f),
		"headers too big": appendRequest(nil, 1, "GET", "/", http.Header{"A": {big}}, nil)[headerLen:],
	} {
		if _, err := decodeRequest(p); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeRequest: any payload decodes or fails cleanly, and one that
// decodes encodes back to a payload that decodes the same.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(appendRequest(nil, 1, "GET", "/v1/health", nil, nil)[headerLen:])
	f.Add(appendRequest(nil, 1, "POST", "/v1/locks/a/acquire", http.Header{"Authorization": {"Bearer s"}, "Content-Type": {"application/json"}},
		[]byte(`{"session":"s1","holder":"h"}`))[headerLen:])
	f.Add(appendRequest(nil, 1, "GET", "/v1/locks?prefix=a&index=3", http.Header{"A": {"1", "2"}}, nil)[headerLen:])
	f.Add([]byte{3, 'G', 'E', 'T', 1, '/', 0x80})
	f.Fuzz(func(t *testing.T, p []byte) {
		rq, err := decodeRequest(p)
		if err != nil {
			return
		}
		again, err := decodeRequest(appendRequest(nil, 1, rq.method, rq.target, rq.header, rq.body)[headerLen:])
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if again.method != rq.method || again.target != rq.target || !reflect.DeepEqual(again.header, rq.header) || !bytes.Equal(again.body, rq.body) {
			t.Fatalf("round trip changed %+v to %+v", rq, again)
		}
	})
}

// FuzzDecodeAnswer: any answer payload decodes or fails cleanly.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add(appendAnswer(nil, 1, 200, http.Header{"Content-Type": {"application/json"}}, []byte("{}"))[headerLen:])
	f.Add([]byte{0, 200, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		a, err := decodeAnswer(p)
		if err != nil {
			return
		}
		if a.status < 100 || a.status > 999 {
			t.Fatalf("status %d decoded", a.status)
		}
	})
}
