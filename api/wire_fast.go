package api

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// The hand-written JSON of the hot requests and answers (acquire, release,
// keepalive). Each is exact by construction: a fast decoder accepts only a
// subset of JSON whose meaning to encoding/json is plain (a flat object of
// exactly named members, strings without escapes, plain unsigned integers,
// booleans) and reports false for anything else, which the caller then
// hands to encoding/json as before; so every error answer, and every
// unusual but valid input, is encoding/json's. A fast encoder writes the
// bytes json.Marshal writes (strings that need escaping are escaped by
// json.Marshal itself). FuzzFastJSON compares both with encoding/json.

// JSONAppender is a value with a hand-written JSON encoding.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// FastDecoder is a value with a hand-written decoder of the plain subset
// of its JSON; DecodeFast reports false (leaving the value as it was or
// partly set: the caller decodes it again with encoding/json) for input
// outside it.
type FastDecoder interface {
	DecodeFast(data []byte) bool
}

// appendString appends s as json.Marshal encodes it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil { // unreachable: a string always encodes
				return append(dst, `""`...)
			}
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendField appends "name": (with a leading comma unless first).
func appendField(dst []byte, name string, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

// jsonValue is one member value of the plain subset.
type jsonValue struct {
	// kind is '"' (a string without escapes), '0' (an unsigned integer
	// without sign, fraction or exponent) or 't'/'f' (a boolean).
	kind byte
	raw  []byte // the string's bytes, the number's digits
}

func (v jsonValue) str() (string, bool) { return string(v.raw), v.kind == '"' }

func (v jsonValue) uint() (uint64, bool) {
	if v.kind != '0' {
		return 0, false
	}
	var n uint64
	for _, c := range v.raw {
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false // out of range: encoding/json's error
		}
		n = n*10 + d
	}
	return n, true
}

func (v jsonValue) bool() (bool, bool) { return v.kind == 't', v.kind == 't' || v.kind == 'f' }

// scanObject scans data as one JSON object of the plain subset, with only
// JSON whitespace around it, calling set for every member in order; it
// stops and reports false at anything outside the subset or when set
// does.
func scanObject(data []byte, set func(key []byte, v jsonValue) bool) bool {
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	for {
		key, next, ok := scanString(data, i)
		if !ok {
			return false
		}
		i = skipWS(data, next)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipWS(data, i+1)
		var v jsonValue
		if v, i, ok = scanValue(data, i); !ok || !set(key, v) {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

func skipWS(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// scanString scans a string without escapes or control characters, of
// valid UTF-8, at data[i:]; it returns its bytes and the index after it.
func scanString(data []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s = data[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= 0x80:
			ascii = false
		}
	}
	return nil, 0, false
}

// scanValue scans a value of the plain subset at data[i:].
func scanValue(data []byte, i int) (jsonValue, int, bool) {
	if i >= len(data) {
		return jsonValue{}, 0, false
	}
	switch c := data[i]; {
	case c == '"':
		s, next, ok := scanString(data, i)
		return jsonValue{kind: '"', raw: s}, next, ok
	case c >= '0' && c <= '9':
		j := i + 1
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
		if c == '0' && j > i+1 { // a leading zero: not JSON
			return jsonValue{}, 0, false
		}
		if j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E') {
			return jsonValue{}, 0, false
		}
		return jsonValue{kind: '0', raw: data[i:j]}, j, true
	case c == 't' && hasPrefixAt(data, i, "true"):
		return jsonValue{kind: 't'}, i + 4, true
	case c == 'f' && hasPrefixAt(data, i, "false"):
		return jsonValue{kind: 'f'}, i + 5, true
	}
	return jsonValue{}, 0, false
}

func hasPrefixAt(data []byte, i int, p string) bool {
	return len(data)-i >= len(p) && string(data[i:i+len(p)]) == p
}

// setString sets *dst from a string value; false for another kind.
func setString(dst *string, v jsonValue) bool {
	s, ok := v.str()
	if ok {
		*dst = s
	}
	return ok
}

// DecodeFast implements FastDecoder.
func (b *AcquireBody) DecodeFast(data []byte) bool {
	var out AcquireBody
	if !scanObject(data, func(key []byte, v jsonValue) bool {
		switch string(key) {
		case "name":
			return setString(&out.Name, v)
		case "session":
			return setString(&out.Session, v)
		case "holder":
			return setString(&out.Holder, v)
		case "mode":
			return setString(&out.Mode, v)
		case "wait":
			return setString(&out.Wait, v)
		case "value":
			return setString(&out.Value, v)
		case "max_hold":
			return setString(&out.MaxHold, v)
		case "permits":
			n, ok := v.uint()
			out.Permits = n
			return ok
		}
		return false
	}) {
		return false
	}
	*b = out
	return true
}

// DecodeFast implements FastDecoder.
func (b *ReleaseBody) DecodeFast(data []byte) bool {
	var out ReleaseBody
	if !scanObject(data, func(key []byte, v jsonValue) bool {
		switch string(key) {
		case "name":
			return setString(&out.Name, v)
		case "session":
			return setString(&out.Session, v)
		case "holder":
			return setString(&out.Holder, v)
		}
		return false
	}) {
		return false
	}
	*b = out
	return true
}

// emptyBody is the body of the requests that take none ({} or nothing).
type emptyBody struct{}

// DecodeFastEmpty reports whether data is an empty JSON object, in the
// plain subset FastDecoder reads (the body of a call that takes none).
func DecodeFastEmpty(data []byte) bool { return (*emptyBody)(nil).DecodeFast(data) }

// DecodeFast implements FastDecoder.
func (*emptyBody) DecodeFast(data []byte) bool {
	return scanObject(data, func([]byte, jsonValue) bool { return false })
}

// DecodeFast implements FastDecoder.
func (r *GrantReply) DecodeFast(data []byte) bool {
	var out GrantReply
	if !scanObject(data, func(key []byte, v jsonValue) bool {
		switch string(key) {
		case "name":
			return setString(&out.Name, v)
		case "mode":
			return setString(&out.Mode, v)
		case "sequencer":
			return setString(&out.Sequencer, v)
		case "token":
			n, ok := v.uint()
			out.Token = n
			return ok
		case "permits":
			n, ok := v.uint()
			out.Permits = n
			return ok
		case "slot":
			n, ok := v.uint()
			out.Slot = &n
			return ok
		}
		return false
	}) {
		return false
	}
	*r = out
	return true
}

// DecodeFast implements FastDecoder.
func (r *ReleaseReply) DecodeFast(data []byte) bool {
	var out ReleaseReply
	if !scanObject(data, func(key []byte, v jsonValue) bool {
		if string(key) != "released" {
			return false
		}
		b, ok := v.bool()
		out.Released = b
		return ok
	}) {
		return false
	}
	*r = out
	return true
}

// DecodeFast implements FastDecoder.
func (r *KeepAliveReply) DecodeFast(data []byte) bool {
	var out KeepAliveReply
	if !scanObject(data, func(key []byte, v jsonValue) bool {
		return string(key) == "ttl" && setString(&out.TTL, v)
	}) {
		return false
	}
	*r = out
	return true
}

// AppendJSON implements JSONAppender.
func (r GrantReply) AppendJSON(dst []byte) ([]byte, error) {
	dst = appendString(appendField(append(dst, '{'), "name", true), r.Name)
	dst = appendString(appendField(dst, "mode", false), r.Mode)
	dst = strconv.AppendUint(appendField(dst, "token", false), r.Token, 10)
	dst = appendString(appendField(dst, "sequencer", false), r.Sequencer)
	if r.Permits != 0 {
		dst = strconv.AppendUint(appendField(dst, "permits", false), r.Permits, 10)
	}
	if r.Slot != nil {
		dst = strconv.AppendUint(appendField(dst, "slot", false), *r.Slot, 10)
	}
	return append(dst, '}'), nil
}

// AppendJSON implements JSONAppender.
func (r ReleaseReply) AppendJSON(dst []byte) ([]byte, error) {
	return append(strconv.AppendBool(appendField(append(dst, '{'), "released", true), r.Released), '}'), nil
}

// AppendJSON implements JSONAppender.
func (r KeepAliveReply) AppendJSON(dst []byte) ([]byte, error) {
	if len(r.Revoked) > 0 || len(r.ReleaseRequested) > 0 {
		type plain KeepAliveReply // rare: encoding/json's bytes
		b, err := json.Marshal(plain(r))
		return append(dst, b...), err
	}
	return append(appendString(appendField(append(dst, '{'), "ttl", true), r.TTL), '}'), nil
}

// AppendJSON implements JSONAppender: MarshalJSON's bytes, without
// encoding/json's reflection and re-validation of them.
func (b AcquireBody) AppendJSON(dst []byte) ([]byte, error) {
	if err := checkText("name", b.Name, "session", b.Session, "holder", b.Holder, "value", b.Value,
		"mode", b.Mode, "wait", b.Wait, "max_hold", b.MaxHold); err != nil {
		return nil, err
	}
	dst = appendString(appendField(append(dst, '{'), "name", true), b.Name)
	dst = appendString(appendField(dst, "session", false), b.Session)
	dst = appendString(appendField(dst, "holder", false), b.Holder)
	dst = appendString(appendField(dst, "mode", false), b.Mode)
	dst = appendString(appendField(dst, "wait", false), b.Wait)
	dst = appendString(appendField(dst, "value", false), b.Value)
	if b.MaxHold != "" {
		dst = appendString(appendField(dst, "max_hold", false), b.MaxHold)
	}
	if b.Permits != 0 {
		dst = strconv.AppendUint(appendField(dst, "permits", false), b.Permits, 10)
	}
	return append(dst, '}'), nil
}

// AppendJSON implements JSONAppender (see AcquireBody.AppendJSON).
func (b ReleaseBody) AppendJSON(dst []byte) ([]byte, error) {
	if err := checkText("name", b.Name, "session", b.Session, "holder", b.Holder); err != nil {
		return nil, err
	}
	dst = appendString(appendField(append(dst, '{'), "name", true), b.Name)
	dst = appendString(appendField(dst, "session", false), b.Session)
	dst = appendString(appendField(dst, "holder", false), b.Holder)
	return append(dst, '}'), nil
}

// checkText refuses text fields (name, value pairs) that are not valid
// UTF-8 (see MarshalJSON of the request bodies).
func checkText(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if !utf8.ValidString(fields[i+1]) {
			return Errorf(CodeInvalidArgument, "%s %q is not valid UTF-8", fields[i], fields[i+1])
		}
	}
	return nil
}
