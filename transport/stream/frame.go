package stream

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/raftlock/raftlock/api"
)

// Frame types.
const (
	typeRequest = 1
	typeAnswer  = 2
	typeCancel  = 3
	typeGoaway  = 4
)

// headerLen is the length of a frame's header: length, type, stream.
const headerLen = 9

// preface opens a connection, followed by the version byte.
const preface = "RLSP"

// frameHeader is a frame's header.
type frameHeader struct {
	length uint32
	typ    byte
	stream uint32
}

// errMalformed is wrapped by every decoding error of a payload.
var errMalformed = errors.New("malformed frame")

// appendHeader appends a frame header.
func appendHeader(b []byte, typ byte, stream uint32, length int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(length))
	b = append(b, typ)
	return binary.BigEndian.AppendUint32(b, stream)
}

// readHeader reads a frame header from r into buf (at least headerLen).
func readHeader(r io.Reader, buf []byte) (frameHeader, error) {
	if _, err := io.ReadFull(r, buf[:headerLen]); err != nil {
		return frameHeader{}, err
	}
	return frameHeader{length: binary.BigEndian.Uint32(buf), typ: buf[4], stream: binary.BigEndian.Uint32(buf[5:])}, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendHeaders appends h as a header list.
func appendHeaders(b []byte, h http.Header) []byte {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		for _, v := range vs {
			b = appendString(b, k)
			b = appendString(b, v)
		}
	}
	return b
}

// appendRequest appends a whole request frame.
func appendRequest(b []byte, stream uint32, method, target string, h http.Header, body []byte) []byte {
	start := len(b)
	b = appendHeader(b, typeRequest, stream, 0)
	b = appendString(b, method)
	b = appendString(b, target)
	b = appendHeaders(b, h)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-headerLen))
	return b
}

// appendAnswer appends a whole answer frame.
func appendAnswer(b []byte, stream uint32, status int, h http.Header, body []byte) []byte {
	start := len(b)
	b = appendHeader(b, typeAnswer, stream, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(status))
	b = appendHeaders(b, h)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-headerLen))
	return b
}

// appendGoaway appends a goaway frame carrying an API error.
func appendGoaway(b []byte, code api.Code, msg string) []byte {
	body := errorBody(code, msg)
	b = appendHeader(b, typeGoaway, 0, len(body))
	return append(b, body...)
}

// errorBody is the API's error answer body.
func errorBody(code api.Code, msg string) []byte {
	b, _ := json.Marshal(api.ErrorReply{Error: api.ErrorBody{Code: string(code), Message: msg}})
	return b
}

// decoder reads the fields of one payload.
type decoder struct {
	p []byte
}

func (d *decoder) string(max int) (string, error) {
	return d.interned(nil, max)
}

// interned decodes a string, returning the value of common for it when it
// is one of them, without allocating.
func (d *decoder) interned(common map[string]string, max int) (string, error) {
	n, k := binary.Uvarint(d.p)
	if k <= 0 || n > uint64(len(d.p)-k) {
		return "", fmt.Errorf("%w: bad string length", errMalformed)
	}
	if n > uint64(max) {
		// Well formed but past the limit: too_large, as the headers
		// together past it are (API.md, the stream limits).
		return "", fmt.Errorf("%w: a string of %d bytes; the limit is %d", errHeadersTooLarge, n, max)
	}
	b := d.p[k : k+int(n)]
	d.p = d.p[k+int(n):]
	if s, ok := common[string(b)]; ok {
		return s, nil
	}
	return string(b), nil
}

// Strings every request or answer carries, decoded without an
// allocation each (interned).
var (
	commonMethods = internTable("GET", "POST", "PUT", "DELETE", "HEAD")
	commonNames   = internTable("Accept", "Authorization", "Content-Type", "Content-Length", "User-Agent",
		"Accept-Encoding", "Date", "Retry-After", api.HeaderLeader, api.HeaderLeaderAddr, api.HeaderTerm,
		api.HeaderMembers, api.HeaderIndex, api.HeaderForwarded)
	commonValues = internTable("application/json", "application/json; charset=utf-8", "text/plain; charset=utf-8", "true")
)

func internTable(ss ...string) map[string]string {
	m := make(map[string]string, len(ss))
	for _, s := range ss {
		m[s] = s
	}
	return m
}

// headers decodes a header list, canonicalizing names; names must be
// HTTP tokens and values free of control bytes but tab.
func (d *decoder) headers(max int) (http.Header, error) {
	n, k := binary.Uvarint(d.p)
	// Each pair takes at least two bytes.
	if k <= 0 || n > uint64(len(d.p)-k)/2 {
		return nil, fmt.Errorf("%w: bad header count", errMalformed)
	}
	d.p = d.p[k:]
	h := make(http.Header, n)
	for range n {
		name, err := d.interned(commonNames, max)
		if err != nil {
			return nil, err
		}
		value, err := d.interned(commonValues, max)
		if err != nil {
			return nil, err
		}
		if !validName(name) || !validValue(value) {
			return nil, fmt.Errorf("%w: bad header %q", errMalformed, name)
		}
		name = textproto.CanonicalMIMEHeaderKey(name)
		h[name] = append(h[name], value)
	}
	return h, nil
}

// request is a decoded request frame.
type request struct {
	method, target string
	header         http.Header
	body           []byte
}

// decodeRequest decodes a request frame's payload. Its method, target and
// headers together take at most api.MaxStreamHeaderBytes; the body is the
// rest (not copied).
func decodeRequest(p []byte) (request, error) {
	d := decoder{p: p}
	var rq request
	var err error
	if rq.method, err = d.interned(commonMethods, api.MaxStreamHeaderBytes); err != nil {
		return rq, err
	}
	if rq.target, err = d.string(api.MaxStreamHeaderBytes); err != nil {
		return rq, err
	}
	if rq.header, err = d.headers(api.MaxStreamHeaderBytes); err != nil {
		return rq, err
	}
	if len(p)-len(d.p) > api.MaxStreamHeaderBytes {
		return rq, fmt.Errorf("%w: headers of %d bytes; the limit is %d", errHeadersTooLarge, len(p)-len(d.p), api.MaxStreamHeaderBytes)
	}
	if !validName(rq.method) {
		return rq, fmt.Errorf("%w: bad method %q", errMalformed, rq.method)
	}
	if !strings.HasPrefix(rq.target, "/") || !validValue(rq.target) || strings.ContainsAny(rq.target, " \t") {
		return rq, fmt.Errorf("%w: bad target %q", errMalformed, rq.target)
	}
	rq.body = d.p
	return rq, nil
}

// errHeadersTooLarge is a request frame whose headers pass the limit.
var errHeadersTooLarge = errors.New("request headers too large")

// answer is a decoded answer frame.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// decodeAnswer decodes an answer frame's payload (body not copied).
func decodeAnswer(p []byte) (answer, error) {
	if len(p) < 2 {
		return answer{}, fmt.Errorf("%w: short answer", errMalformed)
	}
	a := answer{status: int(binary.BigEndian.Uint16(p))}
	if a.status < 100 || a.status > 999 {
		return a, fmt.Errorf("%w: bad status %d", errMalformed, a.status)
	}
	d := decoder{p: p[2:]}
	var err error
	if a.header, err = d.headers(api.MaxStreamAnswerBytes); err != nil {
		return a, err
	}
	a.body = d.p
	return a, nil
}

// validName reports whether s is a non-empty HTTP token.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validValue reports whether s holds no control byte but tab.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
