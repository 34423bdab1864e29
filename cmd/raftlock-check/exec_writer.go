package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"time"
)

// execWriterCommand is the hidden mode of the checker's binary that an
// exec holder's `raftlock exec` runs as CMD: "raftlock-check exec-writer".
const execWriterCommand = "exec-writer"

// The writer's environment, besides exec's RAFTLOCK_SEQUENCER and
// RAFTLOCK_SESSION: the checker's address for writers, and which exec
// holder's which exec process it runs under ("J/R").
const (
	envWriterAddr = "RAFTLOCK_CHECK_WRITER"
	envWriterExec = "RAFTLOCK_CHECK_EXEC"
)

// writerMsg is one line between a writer and the checker: from the
// writer a hello (its pid, exec and sequencer) and then writes, each with
// the sequencer from its environment and stamped with CLOCK_MONOTONIC when
// sent; from the checker the answer to each (Stop: end now, exit 0).
type writerMsg struct {
	T       string `json:"t,omitempty"` // "hello" or "write"; the checker's answers have none
	Exec    string `json:"exec,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Seq     string `json:"seq,omitempty"`
	Session string `json:"session,omitempty"`
	At      int64  `json:"at,omitempty"`
	OK      bool   `json:"ok,omitempty"`
	Err     string `json:"err,omitempty"`
	Stop    bool   `json:"stop,omitempty"`
}

// execWriterMain is the writer: it writes to the checker's resource with
// RAFTLOCK_SEQUENCER in a loop, every 20-80 ms, until the checker says
// stop (exit 0) or it is killed. A refused write does not end it: the
// fence judges each one, and a stale writer must be stopped by exec.
func execWriterMain(stderr io.Writer) int {
	seq, addr := os.Getenv("RAFTLOCK_SEQUENCER"), os.Getenv(envWriterAddr)
	if seq == "" || addr == "" {
		fmt.Fprintf(stderr, "exec-writer: want RAFTLOCK_SEQUENCER and %s in the environment\n", envWriterAddr)
		return 2
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "exec-writer: %v\n", err)
		return 1
	}
	defer conn.Close()
	enc, dec := json.NewEncoder(conn), json.NewDecoder(bufio.NewReader(conn))
	rng := rand.New(rand.NewSource(int64(os.Getpid())))
	m := writerMsg{T: "hello", Exec: os.Getenv(envWriterExec), PID: os.Getpid(), Seq: seq,
		Session: os.Getenv("RAFTLOCK_SESSION"), At: monoNow()}
	for {
		if err := enc.Encode(m); err != nil {
			fmt.Fprintf(stderr, "exec-writer: %v\n", err)
			return 1
		}
		var r writerMsg
		if err := dec.Decode(&r); err != nil {
			fmt.Fprintf(stderr, "exec-writer: %v\n", err)
			return 1
		}
		if r.Stop {
			return 0
		}
		time.Sleep(time.Duration(20+rng.Intn(60)) * time.Millisecond)
		m = writerMsg{T: "write", Seq: seq, At: monoNow()}
	}
}
