package sqlfence_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/raftlock/raftlock/sequencer/sqlfence"
)

var update = flag.Bool("update", false, "rewrite testdata/sqlfence-statements.json")

// statementsFile is the one source of truth for the fence's SQL: the
// Python (clients/python/raftlock/sqlfence.py) and Java
// (io.raftlock.client.SqlFence) helpers' tests assert that their own
// schema and statements are byte-identical to it.
const statementsFile = "../../testdata/sqlfence-statements.json"

// dialectSQL is one dialect's entry of statementsFile.
type dialectSQL struct {
	Table     string `json:"table"`
	Schema    string `json:"schema"`
	Exclusive string `json:"exclusive"`
	Shared    string `json:"shared"`
	ReadBack  string `json:"read_back"`
}

func statements(t *testing.T) []byte {
	t.Helper()
	all := map[string]dialectSQL{}
	for _, d := range []sqlfence.Dialect{sqlfence.Postgres, sqlfence.MySQL} {
		f, err := sqlfence.New(d, "")
		if err != nil {
			t.Fatal(err)
		}
		x, s, r := f.Statements()
		all[d.String()] = dialectSQL{Table: sqlfence.DefaultTable, Schema: f.Schema(), Exclusive: x, Shared: s, ReadBack: r}
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // "<=" stays readable in the file
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// The SQL the Go fence runs, with the default table, is the SQL of
// testdata/sqlfence-statements.json, which the Python and Java SQL fences'
// tests compare theirs with: the three cannot drift apart (go test
// -run TestSQLFenceStatementsMatchTheSharedFile -update rewrites it).
func TestSQLFenceStatementsMatchTheSharedFile(t *testing.T) {
	got := statements(t)
	if *update {
		if err := os.WriteFile(statementsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(statementsFile)
	if err != nil {
		t.Fatalf("%v (run go test ./sequencer/sqlfence -run Statements -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the fence's SQL differs from %s; if the change is meant, rerun with -update and change the Python and Java fences to match:\n%s", statementsFile, got)
	}
}
