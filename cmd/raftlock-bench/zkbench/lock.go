package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// lock is ZooKeeper's standard lock recipe (the "Locks" recipe of the
// ZooKeeper documentation, as zk.Lock and Curator's InterProcessMutex do
// it) on one connection: each acquire creates an ephemeral sequential
// child "_c_<guid>-lock-" under the lock's node; the holder is the child
// with the lowest sequence number; a waiter watches (exists) only its
// predecessor, so a release wakes one waiter. The guid makes the create
// "protected": after a connection loss the child can be found again.
//
// It is written here rather than taken from zk.Lock because zk.Lock takes
// no context and, when a call fails after its child was created (a
// connection loss during a failover), returns the error and forgets the
// child: the session's next acquire then queues behind its own orphan for
// ever. Here a failed acquire or release remembers the child (or the guid
// of a create whose outcome is unknown) and the next acquire deletes it
// first.
type lock struct {
	c    *zk.Conn
	path string // the lock's node; its parents exist

	// held is the child of the current acquire.
	held string
	// stale are children to delete before the next acquire; staleGUID the
	// guid of a create whose result is unknown.
	stale     []string
	staleGUID string
}

// lockPrefix is the name part after the guid (as zk.Lock names children).
const lockPrefix = "lock-"

// protectedPrefix starts a protected child's name (as in zk and Curator).
const protectedPrefix = "_c_"

var errSessionLost = errors.New("zookeeper: own lock node gone (session expired)")

// acquire takes the lock, waiting while others hold it, and returns the
// epoch of the zxid that last changed the lock's children as seen by the
// read that found the lock acquired (ZooKeeper's counterpart of the Raft
// term of the grant: the grant is by a leader of at least that epoch).
func (l *lock) acquire(ctx context.Context) (uint64, error) {
	if l.held != "" {
		return 0, fmt.Errorf("lock %s: already held", l.path)
	}
	if err := l.cleanup(); err != nil {
		return 0, err
	}
	guid, err := newGUID()
	if err != nil {
		return 0, err
	}
	l.staleGUID = guid
	name, err := l.c.Create(l.path+"/"+protectedPrefix+guid+"-"+lockPrefix, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return 0, fmt.Errorf("lock %s: create: %w", l.path, err)
	}
	l.staleGUID = ""
	own := name[strings.LastIndexByte(name, '/')+1:]
	seq, err := parseSeq(own)
	if err != nil {
		l.stale = append(l.stale, name)
		return 0, err
	}
	for {
		children, stat, err := l.c.Children(l.path)
		if err != nil {
			l.stale = append(l.stale, name)
			return 0, fmt.Errorf("lock %s: children: %w", l.path, err)
		}
		pred, found, err := predecessor(children, own, seq)
		if err != nil {
			l.stale = append(l.stale, name)
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("lock %s: %w", l.path, errSessionLost)
		}
		if pred == "" {
			l.held = name
			return uint64(stat.Pzxid) >> 32, nil
		}
		exists, _, ch, err := l.c.ExistsW(l.path + "/" + pred)
		if err != nil {
			l.stale = append(l.stale, name)
			return 0, fmt.Errorf("lock %s: watch %s: %w", l.path, pred, err)
		}
		if !exists {
			continue
		}
		select {
		case ev := <-ch:
			if ev.Err != nil {
				l.stale = append(l.stale, name)
				return 0, fmt.Errorf("lock %s: watch %s: %w", l.path, pred, ev.Err)
			}
		case <-ctx.Done():
			l.stale = append(l.stale, name)
			return 0, fmt.Errorf("lock %s: %w", l.path, ctx.Err())
		}
	}
}

// release deletes the held child.
func (l *lock) release() error {
	if l.held == "" {
		return fmt.Errorf("lock %s: not held", l.path)
	}
	name := l.held
	l.held = ""
	if err := l.c.Delete(name, -1); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("unlock %s: %w", l.path, errSessionLost)
		}
		l.stale = append(l.stale, name)
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// cleanup deletes what a failed acquire or release left behind.
func (l *lock) cleanup() error {
	if l.staleGUID != "" {
		children, _, err := l.c.Children(l.path)
		if err != nil {
			return fmt.Errorf("lock %s: look for an earlier create: %w", l.path, err)
		}
		for _, ch := range children {
			if strings.HasPrefix(ch, protectedPrefix+l.staleGUID) {
				l.stale = append(l.stale, l.path+"/"+ch)
			}
		}
		l.staleGUID = ""
	}
	for len(l.stale) > 0 {
		if err := l.c.Delete(l.stale[0], -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("lock %s: delete stale node: %w", l.path, err)
		}
		l.stale = l.stale[1:]
	}
	return nil
}

// predecessor returns the child with the highest sequence number below seq
// ("" if own, the child named own, is the lowest) and whether own is among
// the children at all.
func predecessor(children []string, own string, seq int) (string, bool, error) {
	pred, predSeq, found := "", -1, false
	for _, ch := range children {
		if ch == own {
			found = true
			continue
		}
		s, err := parseSeq(ch)
		if err != nil {
			return "", false, err
		}
		if s < seq && s > predSeq {
			pred, predSeq = ch, s
		}
	}
	return pred, found, nil
}

// parseSeq returns the sequence number of a lock child's name.
func parseSeq(name string) (int, error) {
	i := strings.LastIndex(name, lockPrefix)
	if i < 0 {
		return 0, fmt.Errorf("lock child %q: no %q", name, lockPrefix)
	}
	s, err := strconv.Atoi(name[i+len(lockPrefix):])
	if err != nil {
		return 0, fmt.Errorf("lock child %q: sequence number: %w", name, err)
	}
	return s, nil
}

func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("guid: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ensurePath creates path and its parents as persistent nodes where they
// are missing.
func ensurePath(c *zk.Conn, path string) error {
	p := ""
	for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}
