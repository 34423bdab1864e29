package main

import (
	"bytes"
	"testing"

	"github.com/raftlock/raftlock/cmd/raftlock-bench/internal/bench"
)

func TestParse(t *testing.T) {
	c, err := command.Parse([]string{"--addr", "127.0.0.31:2379,127.0.0.32:2379", "--scenario", "b", "--clients", "16", "--route", "all"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Addrs) != 2 || c.Scenario != bench.Contended || c.Clients != 16 || c.Leader {
		t.Fatalf("parsed %+v", c)
	}
	c, err = command.Parse(nil, &bytes.Buffer{})
	if err != nil || !c.Leader || c.Addrs[0] != "127.0.0.1:2379" {
		t.Fatalf("defaults %+v %v", c, err)
	}
	for _, bad := range [][]string{{"--ttl", "1500ms"}, {"--route", "x"}, {"--scenario", "e"}} {
		if _, err := command.Parse(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
}
