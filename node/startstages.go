package node

import (
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// slowStartStage is how long a stage of a node's start may take before it
// is logged at WARN: a start that crawls or hangs then names its stage at
// --log-level warn too.
const slowStartStage = 10 * time.Second

// startStages logs the stages of a node's start (Start), each with how
// long it took: at INFO, or at WARN when it took slowAfter
// (slowStartStage) or more. A stage still running after slowAfter is
// logged at WARN then, so that a stage that never ends names itself
// before anyone looks at the goroutines.
type startStages struct {
	log       hclog.Logger
	slowAfter time.Duration
	mu        sync.Mutex
	stage     string
	began     time.Time
	slow      *time.Timer
}

// begin ends the current stage, if any, and starts stage.
func (s *startStages) begin(stage string) {
	s.end()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stage, s.began = stage, time.Now()
	after := s.slowAfter
	s.slow = time.AfterFunc(after, func() {
		s.log.Warn("start-up stage is slow: still running", "stage", stage, "after", after)
	})
}

// end ends the current stage, if any, logging how long it took.
func (s *startStages) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stage == "" {
		return
	}
	s.slow.Stop()
	took := time.Since(s.began)
	if took >= s.slowAfter {
		s.log.Warn("start-up stage was slow", "stage", s.stage, "took", took.Round(time.Millisecond))
	} else {
		s.log.Info("start-up stage", "stage", s.stage, "took", took.Round(time.Microsecond))
	}
	s.stage = ""
}

// prepareStage names what prepareStart does for a node of cfg that has
// Raft state already (hasState) or not: the stage of the start that may
// wait for other nodes.
func prepareStage(cfg Config, hasState bool) string {
	switch {
	case hasState:
		return "check this node's peer entry"
	case cfg.Join != nil:
		return "join: ask the cluster at --join (" + strings.Join(cfg.Join.Addrs, ",") + ")"
	case cfg.Restore != nil:
		return "bootstrap from a backup: probe the peers"
	case cfg.ProbePeers:
		return "bootstrap: probe the peers (waits for every one to answer)"
	default:
		return "bootstrap"
	}
}
