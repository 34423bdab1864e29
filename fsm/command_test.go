package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/fsm")

// goldenDir holds the repository's fixtures for this package.
var goldenDir = filepath.Join("..", "testdata", "fsm")

// sampleCommands has one command of every type with every field set.
func sampleCommands() []Command {
	return []Command{
		{Type: CmdOpenSession, Now: 1_700_000_000_000_000_001, OpenSession: &OpenSession{ID: "9f86d081884c7d659a2feaa0c55ad015", Name: "worker-1", TTL: 12_000_000_000, LockDelay: 10_000_000_000}},
		{Type: CmdCloseSession, Now: 2, CloseSession: &SessionRef{ID: "sess-close"}},
		{Type: CmdExpireSession, Now: 3, ExpireSession: &SessionRef{ID: "sess-expire"}},
		{Type: CmdAcquire, Now: 4, Acquire: &Acquire{Lock: "jobs/leader", Session: "s", Holder: "h-1", Mode: Exclusive, Wait: true, Value: "10.0.0.1:8080"}},
		{Type: CmdAcquire, Now: 5, Acquire: &Acquire{Lock: "ünïcode/路径", Session: "s", Holder: "h-2", Mode: Shared}},
		{Type: CmdRelease, Now: 6, Release: &LockRef{Lock: "jobs/leader", Session: "s", Holder: "h-1"}},
		{Type: CmdCancelWait, Now: 7, CancelWait: &LockRef{Lock: "jobs/leader", Session: "s", Holder: "h-3"}},
		{Type: CmdEndDelay, Now: 8, EndDelay: &EndDelay{Lock: "jobs/leader", Until: 1_700_000_010_000_000_000}},
		{Type: CmdSetMember, Now: -9, SetMember: &Member{ID: "node-1", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8000"}},
		{Type: CmdACLBootstrap, Now: 10, ACLBootstrap: &Token{ID: "t0", Name: "management", Hash: "h0", Rules: []string{"admin"}}},
		{Type: CmdCreateToken, Now: 11, CreateToken: &Token{ID: "t1", Hash: "h1", Rules: []string{"write:jobs/", "read:"}}},
		{Type: CmdDeleteToken, Now: 12, DeleteToken: &TokenRef{ID: "t1"}},
		{Type: CmdEndHold, Now: 13, EndHold: &EndHold{Until: 1_700_000_360_000_000_000}},
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	seen := map[CommandType]bool{}
	for _, c := range sampleCommands() {
		seen[c.Type] = true
		data, err := c.Encode()
		if err != nil {
			t.Fatalf("Encode(%s): %v", c.Type, err)
		}
		if data[0] != Version || CommandType(data[1]) != c.Type {
			t.Fatalf("%s: header % x", c.Type, data[:2])
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("Decode(%s): %v", c.Type, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip of %s:\n got %+v\nwant %+v", c.Type, got, c)
		}
		jd, err := c.EncodeAs(VersionJSON)
		if err != nil {
			t.Fatalf("EncodeAs(VersionJSON, %s): %v", c.Type, err)
		}
		if got, err := Decode(jd); err != nil || jd[0] != VersionJSON || !reflect.DeepEqual(got, c) {
			t.Fatalf("JSON round trip of %s: %+v, %v", c.Type, got, err)
		}
		// Zero-valued payloads survive too.
		z := Command{Type: c.Type}
		reflect.ValueOf(&z).Elem().FieldByName(payloadField(c.Type)).Set(reflect.New(reflect.TypeOf(mustPayload(t, c)).Elem()))
		zd, err := z.Encode()
		if err != nil {
			t.Fatalf("Encode(zero %s): %v", c.Type, err)
		}
		if zg, err := Decode(zd); err != nil || !reflect.DeepEqual(zg, z) {
			t.Fatalf("round trip of zero %s: %+v, %v", c.Type, zg, err)
		}
	}
	for typ := CmdOpenSession; typ <= CmdEndHold; typ++ {
		if !seen[typ] {
			t.Errorf("no sample of %s", typ)
		}
	}
}

func payloadField(t CommandType) string {
	return map[CommandType]string{CmdOpenSession: "OpenSession", CmdCloseSession: "CloseSession",
		CmdExpireSession: "ExpireSession", CmdAcquire: "Acquire", CmdRelease: "Release",
		CmdCancelWait: "CancelWait", CmdEndDelay: "EndDelay", CmdSetMember: "SetMember",
		CmdACLBootstrap: "ACLBootstrap", CmdCreateToken: "CreateToken", CmdDeleteToken: "DeleteToken", CmdEndHold: "EndHold"}[t]
}

func mustPayload(t *testing.T, c Command) any {
	p, set, err := c.variant(false)
	if err != nil || !set {
		t.Fatalf("payload of %s: set=%v err=%v", c.Type, set, err)
	}
	return p
}

// TestCommandTypeValues pins the log format: the numbers are written into
// every entry and must never change.
func TestCommandTypeValues(t *testing.T) {
	want := map[CommandType]uint8{CmdOpenSession: 1, CmdCloseSession: 2, CmdExpireSession: 3, CmdAcquire: 4,
		CmdRelease: 5, CmdCancelWait: 6, CmdEndDelay: 7, CmdSetMember: 8,
		CmdACLBootstrap: 9, CmdCreateToken: 10, CmdDeleteToken: 11, CmdEndHold: 12}
	for typ, v := range want {
		if uint8(typ) != v {
			t.Errorf("%s = %d, want %d", typ, typ, v)
		}
		if strings.HasPrefix(typ.String(), "command(") {
			t.Errorf("type %d has no name", v)
		}
	}
	if CommandType(0).String() != "command(0)" || CommandType(200).String() != "command(200)" {
		t.Error("unknown types must print their number")
	}
	if Version != 5 || VersionLockOptions != 5 || VersionTokenLimits != 4 || VersionBinary != 3 || VersionJSON != 2 || VersionUnchecked != 1 || Exclusive != 1 || Shared != 2 {
		t.Error("Version or Mode values changed: they are part of the log format")
	}
}

// TestGoldenEncodings pins the exact bytes of every command type in both
// formats this build writes, so that a changed field order or JSON tag
// (which would make old logs undecodable or silently drop a field) fails
// here, and checks that the entries of every version still decode to the
// same commands: commands-v1.golden (JSON before checksums),
// commands-v2.golden (checksummed JSON, still written during a rolling
// upgrade), commands-v3.golden (binary, five limits, still written while
// a member reads no more), commands-v4.golden (binary with the
// per-token caps) and commands-v5.golden (binary with the lock options;
// regenerate with -update only for a deliberate format change, with a
// Version bump).
func TestGoldenEncodings(t *testing.T) {
	samples := sampleCommands()
	for _, v := range []byte{VersionJSON, VersionBinary, VersionTokenLimits, VersionLockOptions} {
		var buf bytes.Buffer
		for _, c := range samples {
			data, err := c.EncodeAs(v)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString(hexLine(data))
		}
		path := filepath.Join(goldenDir, fmt.Sprintf("commands-v%d.golden", v))
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("version %d encodings changed:\n got %s\nwant %s", v, buf.Bytes(), want)
		}
	}
	for _, name := range []string{"commands-v1.golden", "commands-v2.golden", "commands-v3.golden", "commands-v4.golden", "commands-v5.golden"} {
		old, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(old)), "\n")
		// Version 1 is no longer written: its file covers the samples of
		// the command types that existed then (the first 12).
		v1 := name == "commands-v1.golden" && len(lines) == 12
		if !v1 && len(lines) != len(samples) {
			t.Fatalf("%s: %d golden lines, %d samples", name, len(lines), len(samples))
		}
		for i, line := range lines {
			c, err := Decode(parseHexLine(t, line))
			if err != nil || !reflect.DeepEqual(c, samples[i]) {
				t.Fatalf("%s line %d decodes to %+v, %v", name, i, c, err)
			}
		}
	}
}

// hexLine renders an encoding as "VV TT <json>\n", a checksummed JSON one
// as "VV TT CCCCCCCC <json>\n" (the JSON is printable) and a binary one as
// "VV TT CCCCCCCC <hex of the fields>\n".
func hexLine(data []byte) string {
	head := hexBytes(data[:1]) + " " + hexBytes(data[1:2]) + " "
	if data[0] == VersionUnchecked {
		return head + string(data[2:]) + "\n"
	}
	end := len(data) - checksumLen
	body := string(data[2:end])
	if data[0] >= VersionBinary {
		body = hexBytes(data[2:end])
	}
	return head + hexBytes(data[end:]) + " " + body + "\n"
}

func hexBytes(b []byte) string { return strings.ToUpper(hex.EncodeToString(b)) }

// parseHexLine is hexLine's inverse.
func parseHexLine(t *testing.T, line string) []byte {
	fromHex := func(p string) []byte {
		out, err := hex.DecodeString(p)
		if err != nil {
			t.Fatalf("bad golden line %q: %v", line, err)
		}
		return out
	}
	parts := strings.SplitN(line, " ", 3)
	if len(parts) != 3 {
		t.Fatalf("bad golden line %q", line)
	}
	out := append(fromHex(parts[0]), fromHex(parts[1])...)
	if out[0] == VersionUnchecked {
		return append(out, parts[2]...)
	}
	crc, body, ok := strings.Cut(parts[2], " ")
	if !ok {
		t.Fatalf("bad golden line %q", line)
	}
	if out[0] >= VersionBinary {
		return append(append(out, fromHex(body)...), fromHex(crc)...)
	}
	return append(append(out, body...), fromHex(crc)...)
}

// checksummed returns raw ([2][Type][JSON]) with its CRC-32C appended: a
// valid version-2 entry around hand-written JSON.
func checksummed(raw []byte) []byte {
	return binary.BigEndian.AppendUint32(raw, crc32.Checksum(raw, castagnoli))
}

func TestEncodeRejectsBadCommands(t *testing.T) {
	for name, c := range map[string]Command{
		"zero":             {},
		"unknown type":     {Type: 42, Acquire: &Acquire{}},
		"missing payload":  {Type: CmdAcquire},
		"other payload":    {Type: CmdAcquire, Release: &LockRef{}},
		"close w/o ref":    {Type: CmdCloseSession, ExpireSession: &SessionRef{ID: "x"}},
		"member w/o value": {Type: CmdSetMember},
	} {
		if data, err := c.Encode(); err == nil {
			t.Errorf("%s: Encode = % x, want an error", name, data)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	acq := sampleCommands()[3]
	valid, err := acq.EncodeAs(VersionJSON)
	if err != nil {
		t.Fatal(err)
	}
	body := valid[2 : len(valid)-checksumLen]
	hdr := func(v byte, typ CommandType, rest string) []byte {
		return checksummed(append([]byte{v, byte(typ)}, rest...))
	}
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0x08
	for name, data := range map[string][]byte{
		"nil":                 nil,
		"empty":               {},
		"one byte":            {VersionJSON},
		"header only":         {VersionJSON, byte(CmdAcquire)},
		"version 0":           append([]byte{0, byte(CmdAcquire)}, body...),
		"version 2 unchecked": append([]byte{2, byte(CmdAcquire)}, body...),
		"version 4":           checksummed(append([]byte{4, byte(CmdAcquire)}, body...)),
		"JSON as binary":      checksummed(append([]byte{VersionBinary, byte(CmdAcquire)}, body...)),
		"byte flipped":        flipped,
		"checksum cut":        valid[:len(valid)-1],
		"version 255":         append([]byte{255, byte(CmdAcquire)}, body...),
		"type 0":              checksummed(append([]byte{VersionJSON, 0}, body...)),
		"type 99":             checksummed(append([]byte{VersionJSON, 99}, body...)),
		"type 255":            checksummed(append([]byte{VersionJSON, 255}, body...)),
		"bad json":            hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":{`),
		"not json":            hdr(VersionJSON, CmdAcquire, `hello`),
		"trailing garbage":    checksummed(append(append([]byte{VersionJSON, byte(CmdAcquire)}, body...), 'x')),
		"envelope array":      hdr(VersionJSON, CmdAcquire, `[1,2]`),
		"envelope null":       hdr(VersionJSON, CmdAcquire, `null`),
		"no arg":              hdr(VersionJSON, CmdAcquire, `{"now":1}`),
		"arg null":            hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":null}`),
		"arg null spaced":     hdr(VersionJSON, CmdRelease, `{"now":1,"arg": null }`),
		"arg array":           hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":[]}`),
		"arg string":          hdr(VersionJSON, CmdEndDelay, `{"now":1,"arg":"x"}`),
		"arg number":          hdr(VersionJSON, CmdCloseSession, `{"now":1,"arg":5}`),
		"field wrong type":    hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":{"lock":5}}`),
		"mode out of range":   hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":{"mode":256}}`),
		"now not a number":    hdr(VersionJSON, CmdAcquire, `{"now":"1","arg":{}}`),
		"now fractional":      hdr(VersionJSON, CmdAcquire, `{"now":1.5,"arg":{}}`),
		"ttl overflow":        hdr(VersionJSON, CmdOpenSession, `{"now":1,"arg":{"ttl":1e30}}`),
		"until not a number":  hdr(VersionJSON, CmdEndDelay, `{"now":1,"arg":{"until":true}}`),
		"wait not a bool":     hdr(VersionJSON, CmdAcquire, `{"now":1,"arg":{"wait":"yes"}}`),
		"member id not a str": hdr(VersionJSON, CmdSetMember, `{"now":1,"arg":{"id":{}}}`),
	} {
		c, err := Decode(data)
		if err == nil {
			t.Errorf("%s: Decode(%q) = %+v, want an error", name, data, c)
			continue
		}
		if !errors.Is(err, ErrDecode) {
			t.Errorf("%s: error %v does not wrap ErrDecode", name, err)
		}
		if !reflect.DeepEqual(c, Command{}) {
			t.Errorf("%s: Decode returned %+v with its error", name, c)
		}
	}
}

func TestDecodeLenient(t *testing.T) {
	// Unknown fields (a newer minor writer) and an empty payload object
	// decode; the FSM then judges the content.
	c, err := Decode(checksummed(append([]byte{VersionJSON, byte(CmdAcquire)}, `{"now":5,"arg":{"lock":"x","extra":1},"more":true}`...)))
	if err != nil || c.Now != 5 || c.Acquire == nil || c.Acquire.Lock != "x" {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
	c, err = Decode(append([]byte{VersionUnchecked, byte(CmdCloseSession)}, `{"arg":{}}`...))
	if err != nil || c.CloseSession == nil || c.Now != 0 {
		t.Fatalf("Decode = %+v, %v", c, err)
	}
}

// fuzzFSM is a small state for FuzzDecode to apply decoded commands to.
func fuzzFSM(t testing.TB) *FSM {
	h := newHarness(t)
	h.open("s", 0)
	h.open("t", delay)
	h.must(StatusGranted, acqCmd("jobs/leader", "s", "h-1", Exclusive, false))
	h.must(StatusQueued, acqCmd("jobs/leader", "t", "h-3", Shared, true))
	h.must(StatusGranted, acqCmd("r", "t", "h", Shared, false))
	h.must(StatusOK, expireCmd("t"))
	return h.f
}

func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands() {
		for _, v := range []byte{VersionJSON, VersionBinary} {
			data, err := c.EncodeAs(v)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, s := range []string{"", "\x01", "\x01\x04", "\x01\x04null", "\x01\x04{\"arg\":null}", "\x02\x04{}",
		"\x01\x09{\"arg\":{}}", "\x01\x01{\"now\":-1,\"arg\":{\"id\":\"\\ud800\",\"ttl\":-5}}"} {
		f.Add([]byte(s))
	}
	base := fuzzFSM(f).Dump()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			if !reflect.DeepEqual(c, Command{}) {
				t.Fatalf("Decode returned %+v with its error", c)
			}
			return
		}
		// Re-encoded in its own format (version 1 as 2), then in the
		// other: both decode to the same command.
		again, err := c.EncodeAs(max(data[0], VersionJSON))
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", c, err)
		}
		c2, err := Decode(again)
		if err != nil {
			t.Fatalf("re-encoding %q does not decode: %v", again, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encoding changed the command:\n%+v\n%+v", c, c2)
		}
		other := VersionBinary
		if data[0] == VersionBinary {
			other = VersionJSON
		}
		across, err := c.EncodeAs(other)
		if err != nil {
			t.Fatalf("decoded %+v does not encode as version %d: %v", c, other, err)
		}
		c3, err := Decode(across)
		if err != nil {
			t.Fatalf("version %d encoding %q does not decode: %v", other, across, err)
		}
		if !reflect.DeepEqual(emptyRulesAsNil(c), emptyRulesAsNil(c3)) {
			t.Fatalf("version %d changed the command:\n%+v\n%+v", other, c, c3)
		}
		// Whatever decodes, Apply handles without panicking, and the state
		// still snapshots and restores to itself.
		g := New(nil)
		if err := g.Load(base); err != nil {
			t.Fatal(err)
		}
		if _, ok := g.Apply(&raft.Log{Index: 100, Type: raft.LogCommand, Data: data}).(Result); !ok {
			t.Fatal("Apply did not return a Result")
		}
		dump := g.Dump()
		var st state
		if err := json.Unmarshal(dump[1:], &st); err != nil {
			t.Fatalf("dump is not JSON: %v", err)
		}
		r := New(nil)
		if err := r.Load(dump); err != nil || !bytes.Equal(r.Dump(), dump) {
			t.Fatalf("state does not restore to itself: %v", err)
		}
	})
}

// emptyRulesAsNil returns c with an empty token rule list as nil: the two
// mean the same, JSON tells them apart and the binary format does not.
func emptyRulesAsNil(c Command) Command {
	for _, tok := range []**Token{&c.ACLBootstrap, &c.CreateToken} {
		if *tok != nil && len((*tok).Rules) == 0 {
			cp := **tok
			cp.Rules = nil
			*tok = &cp
		}
	}
	return c
}

// A binary entry decodes only when it is exactly a command: every cut
// short of its end, a byte after it, a bool or presence byte other than
// 0 or 1, a string that is not UTF-8 or longer than the entry, and an
// unknown type are ErrDecode, never a partial command.
func TestBinaryDecodeRefusesAnythingButAWholeCommand(t *testing.T) {
	bin := func(typ CommandType, fields ...byte) []byte {
		return checksummed(append([]byte{VersionBinary, byte(typ)}, fields...))
	}
	bad := map[string][]byte{
		"byte after the payload": bin(CmdDeleteToken, append(binaryFields(t, Command{Type: CmdDeleteToken, DeleteToken: &TokenRef{ID: "t"}}), 0)...),
		"bool byte 2":            bin(CmdAcquire, 2, 1, 'l', 1, 's', 1, 'h', 1, 2, 0, 0, 0),
		"limits presence 2":      bin(CmdAcquire, 2, 1, 'l', 1, 's', 1, 'h', 1, 0, 0, 0, 2),
		"string not UTF-8":       bin(CmdCloseSession, 2, 2, 0xff, 0xfe),
		"string past the end":    bin(CmdCloseSession, 2, 0x80, 0x80, 0x04, 'x'),
		"rules past the end":     bin(CmdCreateToken, 2, 0, 0, 0, 0xff, 0x7f),
		"limit past int":         bin(CmdAcquire, append([]byte{2, 0, 0, 0, 1, 0, 0, 0, 1}, binary.AppendVarint(nil, 1<<62)...)...),
		"bad varint":             bin(CmdCloseSession, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"unknown type":           bin(99, 2, 0),
		"type 0":                 bin(0, 2, 0),
		"no fields":              bin(CmdRelease),
	}
	for _, c := range sampleCommands() {
		fields := binaryFields(t, c)
		for i := range len(fields) {
			bad[fmt.Sprintf("%s cut at %d of %d", c.Type, i, len(fields))] = bin(c.Type, fields[:i]...)
		}
	}
	for name, data := range bad {
		c, err := Decode(data)
		if err == nil || !errors.Is(err, ErrDecode) {
			t.Errorf("%s: Decode(% x) = %+v, %v; want ErrDecode", name, data, c, err)
			continue
		}
		if !reflect.DeepEqual(c, Command{}) {
			t.Errorf("%s: Decode returned %+v with its error", name, c)
		}
	}
}

// binaryFields returns c's binary encoding without version, type and
// checksum.
func binaryFields(t *testing.T, c Command) []byte {
	t.Helper()
	data, err := c.EncodeAs(VersionBinary)
	if err != nil {
		t.Fatal(err)
	}
	return data[2 : len(data)-checksumLen]
}

// A leader writes only the versions it knows.
func TestEncodeAsRefusesUnknownVersions(t *testing.T) {
	c := sampleCommands()[3]
	for _, v := range []byte{0, VersionUnchecked, Version + 1, 255} {
		if data, err := c.EncodeAs(v); err == nil {
			t.Errorf("EncodeAs(%d) = % x, want an error", v, data)
		}
	}
}

// A lock option (permits, a hold limit, a slot) exists only in
// VersionLockOptions: such a command round-trips there and has no
// encoding in any older version, so that no replica that would ignore the
// option applies it.
func TestLockOptionsAreWrittenOnlyInVersion5(t *testing.T) {
	for _, c := range []Command{
		{Type: CmdAcquire, Now: 7, Acquire: &Acquire{Lock: "l", Session: "s", Holder: "h", Mode: Exclusive, Permits: 3}},
		{Type: CmdAcquire, Now: 7, Acquire: &Acquire{Lock: "l", Session: "s", Holder: "h", Mode: Exclusive, MaxHold: int64(time.Minute)}},
		{Type: CmdEndDelay, Now: 7, EndDelay: &EndDelay{Lock: "l", Until: 9, Slot: 2}},
	} {
		data, err := c.EncodeAs(VersionLockOptions)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("%s round-trips to %+v, %v", c.Type, got, err)
		}
		for _, v := range []byte{VersionJSON, VersionBinary, VersionTokenLimits} {
			if _, err := c.EncodeAs(v); err == nil || !strings.Contains(err.Error(), "every member must read version 5") {
				t.Errorf("%s encoded as version %d: %v, want refused", c.Type, v, err)
			}
		}
	}
}
