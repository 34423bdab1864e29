package node

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestResetFileNeedsTheIndexAndASecret pins the reset file's format
// (issue 40 item 7): "INDEX SECRET" with a secret of
// api.MinResetSecretLen characters or more, or "INDEX sha256:HEX"; the
// index alone (the format before the secret), a short secret, a bad hash
// or extra fields are refused, each naming why.
func TestResetFileNeedsTheIndexAndASecret(t *testing.T) {
	secret := "0123456789abcdef"
	sum := sha256.Sum256([]byte(secret))
	for _, text := range []string{"7 " + secret + "\n", "  7\t" + secret, "7 sha256:" + hex.EncodeToString(sum[:])} {
		rf, err := parseResetFile(text)
		if err != nil || rf.index != 7 || rf.hash != sum {
			t.Errorf("%q: %+v %v, want index 7 and the secret's hash", text, rf, err)
		}
	}
	for text, why := range map[string]string{
		"":                   "empty",
		"7\n":                "no reset secret",
		"x " + secret:        "reset index",
		"7 short":            "characters",
		"7 sha256:abcd":      "hex digits",
		"7 " + secret + " x": "fields",
	} {
		if _, err := parseResetFile(text); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want a refusal naming %q", text, err, why)
		}
	}
}

// FuzzParseResetFile: any file text is parsed or refused, never a panic,
// and a parsed plain secret's hash is the SHA-256 of its last field.
func FuzzParseResetFile(f *testing.F) {
	f.Add("7 0123456789abcdef")
	f.Add("7 sha256:" + strings.Repeat("ab", 32))
	f.Add("18446744073709551615 \x00\xff")
	f.Fuzz(func(t *testing.T, text string) {
		rf, err := parseResetFile(text)
		if err != nil {
			return
		}
		fields := strings.Fields(text)
		if last := fields[len(fields)-1]; !strings.HasPrefix(last, "sha256:") && rf.hash != sha256.Sum256([]byte(last)) {
			t.Fatalf("%q: hash of another secret", text)
		}
	})
}
