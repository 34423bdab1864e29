package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// strictDecode is the server's encoding/json decoding of a body (as
// decodeBody without its fast path): no unknown fields, no trailing data.
func strictDecode(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data")
	}
	return nil
}

// fastDecodeCases are the values with a fast decoder, each a fresh zero
// value per call.
var fastDecodeCases = []struct {
	name string
	new  func() FastDecoder
}{
	{"AcquireBody", func() FastDecoder { return &AcquireBody{} }},
	{"ReleaseBody", func() FastDecoder { return &ReleaseBody{} }},
	{"emptyBody", func() FastDecoder { return &emptyBody{} }},
	{"GrantReply", func() FastDecoder { return &GrantReply{} }},
	{"ReleaseReply", func() FastDecoder { return &ReleaseReply{} }},
	{"KeepAliveReply", func() FastDecoder { return &KeepAliveReply{} }},
}

// checkFastDecode fails t unless every fast decoder that accepts data
// decodes what encoding/json strictly decodes from it.
func checkFastDecode(t *testing.T, data []byte) {
	t.Helper()
	for _, c := range fastDecodeCases {
		fast := c.new()
		if !fast.DecodeFast(data) {
			continue
		}
		slow := c.new()
		if err := strictDecode(data, slow); err != nil {
			t.Fatalf("%s: fast decoder accepted %q, encoding/json refuses it: %v", c.name, data, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: %q decodes fast as %+v, by encoding/json as %+v", c.name, data, fast, slow)
		}
	}
}

// checkFastEncode fails t unless every fast encoder writes json.Marshal's
// bytes for values made of s and n.
func checkFastEncode(t *testing.T, s string, n uint64) {
	t.Helper()
	for _, v := range []JSONAppender{
		GrantReply{Name: s, Mode: s, Token: n, Sequencer: s},
		GrantReply{Name: s, Mode: s, Token: n, Sequencer: s, Permits: n % 300, Slot: &n},
		ReleaseReply{Released: n%2 == 0},
		KeepAliveReply{TTL: s},
		AcquireBody{Name: s, Session: s, Holder: s, Mode: s, Wait: s, Value: s},
		AcquireBody{Name: s, Session: s, Holder: s, Mode: s, Wait: s, Value: s, Permits: n},
		ReleaseBody{Name: s, Session: s, Holder: s},
	} {
		fast, ferr := v.AppendJSON(nil)
		slow, serr := json.Marshal(v)
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("%T %q: fast error %v, json.Marshal error %v", v, s, ferr, serr)
		}
		if ferr != nil {
			if ferr.Error() != errors.Unwrap(serr).Error() {
				t.Fatalf("%T %q: fast error %q, json.Marshal error %q", v, s, ferr, serr)
			}
			continue
		}
		if !bytes.Equal(fast, slow) {
			t.Fatalf("%T %q: fast %s, json.Marshal %s", v, s, fast, slow)
		}
	}
}

var fastJSONSeeds = []string{
	`{"name":"a","session":"s","holder":"h","mode":"shared","wait":"0s","value":"v"}`,
	`{"name":"a","session":"s","holder":"h"}`,
	` { "name" : "a" , "name":"b" } `,
	`{"NAME":"a"}`,
	`{"name":"a\u00e9"}`,
	`{"name":"\ud800"}`,
	"{\"name\":\"caf\xc3\xa9\"}",
	"{\"name\":\"inv\xff\"}",
	`{"name":null}`,
	`{"name":1}`,
	`{}`,
	`{} {}`,
	`{"name":"a",}`,
	`{"name":"a","token":18446744073709551615,"mode":"exclusive","sequencer":"x"}`,
	`{"token":18446744073709551616}`,
	`{"token":01}`,
	`{"token":1.0}`,
	`{"token":1e3}`,
	`{"token":-1}`,
	`{"released":true}`,
	`{"released":false }`,
	`{"released":truex}`,
	`{"ttl":"15s"}`,
	"{\"ttl\":\"a\tb\"}",
	`{"x":"<>&"}`,
	`{"name":"a","session":"s","holder":"h","permits":3}`,
	`{"name":"a","permits":0}`,
	`{"name":"a","permits":null}`,
	`{"name":"a","mode":"exclusive","token":7,"sequencer":"rl1:p2/3:7:a","permits":3,"slot":2}`,
	`{"slot":0,"slot":1}`,
	`{"slot":null}`,
}

// FuzzFastJSON pins the hand-written JSON to encoding/json: a fast
// decoder accepts only what encoding/json strictly decodes, as the same
// value, and a fast encoder writes json.Marshal's bytes.
func FuzzFastJSON(f *testing.F) {
	for i, s := range fastJSONSeeds {
		f.Add([]byte(s), s, uint64(i)*1e17)
	}
	f.Fuzz(func(t *testing.T, data []byte, s string, n uint64) {
		checkFastDecode(t, data)
		checkFastEncode(t, s, n)
	})
}

// TestFastDecodersTakeThePlainRequests pins that the usual requests and
// answers take the fast path (else it would be dead code, and the hot path
// encoding/json's again).
func TestFastDecodersTakeThePlainRequests(t *testing.T) {
	for _, c := range []struct {
		v    FastDecoder
		data string
		want any
	}{
		{&AcquireBody{}, `{"name":"a","session":"s","holder":"h","mode":"","wait":"","value":"café"}`,
			&AcquireBody{Name: "a", Session: "s", Holder: "h", Value: "café"}},
		{&AcquireBody{}, "{\"name\":\"a\",\"value\":\"caf\xc3\xa9\"}\n", &AcquireBody{Name: "a", Value: "café"}},
		{&ReleaseBody{}, `{"name":"a","session":"s","holder":"h"}`, &ReleaseBody{Name: "a", Session: "s", Holder: "h"}},
		{&emptyBody{}, ` {} `, &emptyBody{}},
		{&GrantReply{}, `{"name":"a","mode":"exclusive","token":42,"sequencer":"rl1:a:42:e"}`,
			&GrantReply{Name: "a", Mode: "exclusive", Token: 42, Sequencer: "rl1:a:42:e"}},
		{&AcquireBody{}, `{"name":"a","session":"s","holder":"h","permits":3}`,
			&AcquireBody{Name: "a", Session: "s", Holder: "h", Permits: 3}},
		{&GrantReply{}, `{"name":"a","mode":"exclusive","token":7,"sequencer":"rl1:p0/3:7:a","permits":3,"slot":0}`,
			&GrantReply{Name: "a", Mode: "exclusive", Token: 7, Sequencer: "rl1:p0/3:7:a", Permits: 3, Slot: new(uint64)}},
		{&ReleaseReply{}, `{"released":true}`, &ReleaseReply{Released: true}},
		{&KeepAliveReply{}, `{"ttl":"15s"}`, &KeepAliveReply{TTL: "15s"}},
	} {
		if !c.v.DecodeFast([]byte(c.data)) {
			t.Errorf("%T: %s not decoded fast", c.v, c.data)
			continue
		}
		if !reflect.DeepEqual(c.v, c.want) {
			t.Errorf("%T: %s decoded as %+v, want %+v", c.v, c.data, c.v, c.want)
		}
	}
}
