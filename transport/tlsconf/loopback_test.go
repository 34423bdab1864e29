package tlsconf

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "127.1.2.3:1": true,
		":1": false, "0.0.0.0:1": false, "10.0.0.1:1": false, "example.com:1": false, "[::]:1": false} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
