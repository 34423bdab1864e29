package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// fourLetterTimeout bounds one four-letter-word exchange.
const fourLetterTimeout = 2 * time.Second

// fourLetter sends ZooKeeper's four-letter word cmd ("srvr", "conf") to the
// server at addr and returns its whole answer. The server must allow the
// word (4lw.commands.whitelist).
func fourLetter(ctx context.Context, addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, fourLetterTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("zookeeper %s %q: %w", addr, cmd, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", fmt.Errorf("zookeeper %s %q: %w", addr, cmd, err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("zookeeper %s %q: %w", addr, cmd, err)
	}
	return string(out), nil
}

// srvrStatus is what the srvr word tells about a server.
type srvrStatus struct {
	// Mode is "leader", "follower", "standalone" or "" (not serving).
	Mode string
	// Zxid is the last transaction id the server processed; its high 32
	// bits are the epoch of the leader that proposed it.
	Zxid int64
}

// Epoch is the zxid's epoch: ZooKeeper's counterpart of a Raft term.
func (s srvrStatus) Epoch() uint64 { return uint64(s.Zxid) >> 32 }

// parseSrvr parses the answer to srvr. A server that is not serving (no
// quorum, election under way) answers "This ZooKeeper instance is not
// currently serving requests": an error.
func parseSrvr(out string) (srvrStatus, error) {
	var s srvrStatus
	var haveZxid bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Mode":
			s.Mode = v
		case "Zxid":
			z, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				return s, fmt.Errorf("srvr: zxid %q: %w", v, err)
			}
			s.Zxid, haveZxid = z, true
		}
	}
	if s.Mode == "" || !haveZxid {
		return s, fmt.Errorf("srvr: not serving: %q", strings.TrimSpace(firstLine(out)))
	}
	return s, nil
}

// parseServerID returns the serverId of the answer to conf.
func parseServerID(out string) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && k == "serverId" {
			id, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("conf: serverId %q: %w", v, err)
			}
			return id, nil
		}
	}
	return 0, fmt.Errorf("conf: no serverId in %q", firstLine(out))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
