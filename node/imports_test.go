package node

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNodeSpeaksNoHTTP pins that package node imports neither net/http nor
// an HTTP package of raftlock: it returns api values, and its HTTP face
// (the peer port's API, the embedded Backend's and Join's clients) comes
// in through Config.Wire (node/nodehttp).
func TestNodeSpeaksNoHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, imp := range strings.Fields(string(out)) {
		switch {
		case imp == "net/http", strings.HasPrefix(imp, "net/http/"),
			strings.HasPrefix(imp, "github.com/raftlock/raftlock/transport/httpapi"),
			imp == "github.com/raftlock/raftlock/transport/client":
			t.Errorf("node imports %s", imp)
		}
	}
}
