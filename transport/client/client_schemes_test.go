package client

import "testing"

// The addresses a client takes: host:port and http:// are HTTP, https://
// is HTTPS; one address both ways is refused.
func TestClientAddressSchemes(t *testing.T) {
	c, err := NewClient([]string{"127.0.0.1:1", "http://127.0.0.1:2", "https://127.0.0.1:3/"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:1/x", "http://127.0.0.1:2/x", "https://127.0.0.1:3/x"}
	for i, a := range c.list() {
		if got := c.url(a, "/x"); got != want[i] {
			t.Errorf("url(%q) = %q, want %q", a, got, want[i])
		}
	}
	for _, bad := range [][]string{{"https://127.0.0.1"}, {"https://:1"}, {"127.0.0.1:1", "https://127.0.0.1:1"}} {
		if _, err := NewClient(bad); err == nil {
			t.Errorf("NewClient(%q) accepted", bad)
		}
	}
}
