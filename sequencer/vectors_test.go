package sequencer_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/raftlock/raftlock/sequencer"
)

// fenceVectors is testdata/fence-vectors.json: the fence rules as sequences
// of sequencers with their verdicts, shared by every language's client.
type fenceVectors struct {
	Vectors []struct {
		Name  string
		Steps []struct {
			Sequencer string
			Verdict   string
		}
	}
}

// TestFenceGivesTheSharedVectorsVerdicts pins the Go fence to the vectors
// every client's fence is checked against (docs/CONFORMANCE.md), so that
// the vectors and the reference implementation cannot drift apart.
func TestFenceGivesTheSharedVectorsVerdicts(t *testing.T) {
	raw, err := os.ReadFile("../testdata/fence-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs fenceVectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatalf("fence-vectors.json: %v", err)
	}
	if len(vs.Vectors) == 0 {
		t.Fatal("fence-vectors.json has no vectors")
	}
	for _, v := range vs.Vectors {
		f := sequencer.NewFence()
		for i, st := range v.Steps {
			got := verdict(f.CheckString(st.Sequencer))
			if got != st.Verdict {
				t.Errorf("%s, step %d (%q): verdict %s, want %s", v.Name, i, st.Sequencer, got, st.Verdict)
			}
		}
	}
}

// verdict names a fence check's outcome as the vectors do.
func verdict(err error) string {
	switch {
	case err == nil:
		return "admit"
	case errors.Is(err, sequencer.ErrStale):
		return "stale"
	case errors.Is(err, sequencer.ErrMalformed):
		return "malformed"
	default:
		return "error: " + err.Error()
	}
}
