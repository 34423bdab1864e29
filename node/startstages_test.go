package node

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftlock/raftlock/api/apitest"
)

// A node's start logs each of its stages with how long it took (INFO),
// so that a slow start names the stage that took the time.
func TestStartLogsEveryStageWithItsDuration(t *testing.T) {
	var logs apitest.LogBuffer
	c := newTestCluster(t, 1, func(cfg *Config) {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Level: hclog.Info, Output: &logs})
	})
	c.leader()
	for _, stage := range []string{"data dir", "open the stores", "open the snapshot store", "check the stores",
		"raft transport", "look for raft state", "bootstrap", "raft start (restore the snapshot, replay the log)"} {
		value := stage // hclog quotes a value with spaces
		if strings.Contains(stage, " ") {
			value = strconv.Quote(stage)
		}
		want := "[INFO]  n1.node: start-up stage: stage=" + value + " took="
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no line %q in the start's log:\n%s", want, logs.String())
		}
	}
}

// A stage still running after the slow bound is logged at WARN then,
// naming the stage, and again at its end with how long it took.
func TestSlowStartStageNamesItselfAtWarn(t *testing.T) {
	var logs apitest.LogBuffer
	s := &startStages{log: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &logs}), slowAfter: time.Nanosecond}
	s.begin("open the stores")
	eventually(t, 10*time.Second, "the slow stage's warning", func() error {
		if !strings.Contains(logs.String(), `[WARN]  start-up stage is slow: still running: stage="open the stores" after=1ns`) {
			return fmt.Errorf("log: %q", logs.String())
		}
		return nil
	})
	s.end()
	if !strings.Contains(logs.String(), `[WARN]  start-up stage was slow: stage="open the stores" took=`) {
		t.Fatalf("the end of a slow stage is not at WARN: %q", logs.String())
	}
}
