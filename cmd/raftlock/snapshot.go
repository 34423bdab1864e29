package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftlock/raftlock/api"
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/node"
	"github.com/raftlock/raftlock/node/backupfile"
	"github.com/raftlock/raftlock/transport/client"
)

// The snapshot group: save, inspect and restore backups (GET
// /v1/snapshot, POST /v1/snapshot/restore; admin with ACLs on).

const snapshotSaveHelp = `Saves a backup of the cluster's state (sessions, locks, lock histories, ACL
tokens) to FILE: the leader's, after every entry committed before the call.
The file is written next to FILE, checked, then renamed onto it, so FILE is
never left half written. Admin only with ACLs on.`

const snapshotInspectHelp = `Checks a backup file offline (its checksum, format and state) and prints what
it holds: the Raft index and term it was taken at, when and by which node, its
sessions, locks and ACL tokens, and its SHA-256. A truncated, corrupted or
foreign file is refused (invalid_argument) saying why.

With --tokens it also lists the backup's ACL tokens (ids, names and rules;
never a secret or its hash). A restore brings every one of them back, also
those deleted since the backup: delete each again (raftlock acl token delete
ID) once the restored cluster serves.

Given a stopped node's data dir instead, prints its last Raft index: no token
that node knew of is above it, a lower bound for raftlockd --min-token.`

const snapshotRestoreHelp = `Replaces the whole state of the running cluster with FILE's: its sessions and
locks are the backup's; sessions opened since are gone (their clients see
session_not_found and lose their locks). Every token granted afterwards is
above every token the cluster issued before, and above --min-token, so fences
keep refusing holders from before the restore. FILE is checked completely
first (as inspect does): a bad file changes nothing. Admin only with ACLs on.`

// restoreExtra is the time a restore may take on top of --timeout.
const restoreExtra = time.Minute

// snapshotReport is the -o json form of save and inspect.
type snapshotReport struct {
	File          string              `json:"file,omitempty"`
	Format        int                 `json:"format"`
	Index         uint64              `json:"index"`
	Term          uint64              `json:"term"`
	Created       time.Time           `json:"created"`
	Node          string              `json:"node"`
	Configuration []backupfile.Server `json:"configuration"`
	Sessions      int                 `json:"sessions"`
	Locks         int                 `json:"locks"`
	Held          int                 `json:"held"`
	ACLTokens     int                 `json:"acl_tokens"`
	Bytes         int                 `json:"bytes"`
	Checksum      string              `json:"checksum"`
	// Tokens lists the backup's ACL tokens (inspect --tokens): ids, names
	// and rules, never a secret or its hash.
	Tokens []api.TokenInfo `json:"tokens,omitempty"`
}

func reportOf(file string, b *backupfile.Backup, size int) snapshotReport {
	h := b.Header
	return snapshotReport{File: file, Format: h.Format, Index: h.Index, Term: h.Term, Created: h.Created, Node: h.Node,
		Configuration: h.Configuration, Sessions: b.Summary.Sessions, Locks: b.Summary.Locks, Held: b.Summary.Held,
		ACLTokens: b.Summary.Tokens, Bytes: size, Checksum: b.Checksum}
}

func (c *cli) printSnapshotReport(r snapshotReport) error {
	var servers []string
	for _, s := range r.Configuration {
		servers = append(servers, fmt.Sprintf("%s=%s (%s)", s.ID, s.Address, strings.ToLower(s.Suffrage)))
	}
	return c.printf("file:       %s\nformat:     %d\nindex:      %d\nterm:       %d\ncreated:    %s by %s\nservers:    %s\n"+
		"sessions:   %d\nlocks:      %d (%d held)\nacl tokens: %d\nbytes:      %d\nsha256:     %s\n",
		r.File, r.Format, r.Index, r.Term, c.stamp(r.Created), orNone(r.Node), orNone(strings.Join(servers, ", ")),
		r.Sessions, r.Locks, r.Held, r.ACLTokens, r.Bytes, r.Checksum)
}

// readBackup reads and checks a backup file: an error names the file and
// says why (invalid_argument for a file that is not a whole backup).
func readBackup(file string) (*backupfile.Backup, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	b, err := backupfile.Parse(data)
	if err != nil {
		return nil, nil, api.Errorf(api.CodeInvalidArgument, "%s: %v", file, err)
	}
	return b, data, nil
}

func (c *cli) snapshotSave(*flag.FlagSet) runFunc {
	return func(ctx context.Context, pos []string) error {
		file := pos[0]
		return c.call(ctx, 0, func(ctx context.Context, cl *client.Client) error {
			var buf bytes.Buffer
			if _, err := cl.Snapshot(ctx, &buf); err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			b, err := backupfile.Parse(buf.Bytes())
			if err != nil {
				return fmt.Errorf("snapshot save: the cluster sent a bad backup: %w", err)
			}
			if err := writeFileAtomic(file, buf.Bytes()); err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			r := reportOf(file, b, buf.Len())
			if c.json() {
				return c.printJSON(r)
			}
			return c.printSnapshotReport(r)
		})
	}
}

// writeFileAtomic writes data to a temporary file next to file, syncs it
// and renames it onto file.
func writeFileAtomic(file string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), file)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (c *cli) snapshotInspect(fs *flag.FlagSet) runFunc {
	var tokens bool
	fs.BoolVar(&tokens, "tokens", false, "also list the backup's ACL tokens (ids, names, rules; never secrets): a restore brings each back, also those deleted since")
	return func(_ context.Context, pos []string) error {
		if fi, err := os.Stat(pos[0]); err == nil && fi.IsDir() {
			return c.inspectDataDir(pos[0])
		}
		b, data, err := readBackup(pos[0])
		if err != nil {
			return fmt.Errorf("snapshot inspect: %w", err)
		}
		r := reportOf(pos[0], b, len(data))
		if tokens {
			if r.Tokens, err = backupTokens(b); err != nil {
				return fmt.Errorf("snapshot inspect: %s: %w", pos[0], err)
			}
		}
		if c.json() {
			return c.printJSON(r)
		}
		if err := c.printSnapshotReport(r); err != nil || !tokens {
			return err
		}
		if err := c.printf("\nACL tokens in the backup (a restore brings each back: delete again every one deleted since the backup):\n"); err != nil {
			return err
		}
		return c.printTokens(r.Tokens)
	}
}

// backupTokens lists the ACL tokens of backup b: ids, names, rules and
// creation, never the secret's hash.
func backupTokens(b *backupfile.Backup) ([]api.TokenInfo, error) {
	f := fsm.New(nil)
	if err := f.Load(b.State); err != nil {
		return nil, fmt.Errorf("its state does not load: %w", err)
	}
	out := []api.TokenInfo{}
	for _, t := range f.Tokens() {
		out = append(out, api.TokenInfo{ID: t.ID, Name: t.Name, Rules: t.Rules, Created: t.Created})
	}
	return out, nil
}

func (c *cli) snapshotRestore(fs *flag.FlagSet) runFunc {
	var minToken uint64
	fs.Uint64Var(&minToken, "min-token", 0, "every token granted after the restore is above `N` too (default: the cluster's last index)")
	return func(ctx context.Context, pos []string) error {
		_, data, err := readBackup(pos[0])
		if err != nil {
			return fmt.Errorf("snapshot restore: %w", err)
		}
		return c.call(ctx, restoreExtra, func(ctx context.Context, cl *client.Client) error {
			info, err := cl.Restore(ctx, data, minToken)
			if err != nil {
				if api.CodeOf(err) == api.CodeUnknownOutcome || errors.Is(err, context.DeadlineExceeded) {
					err = fmt.Errorf("%w (check with raftlock lock list whether the state is the backup's before trying again)", err)
				}
				return fmt.Errorf("snapshot restore: %w", err)
			}
			if c.json() {
				return c.printJSON(info)
			}
			if err := c.printf("restored %s: %d sessions, %d locks, taken at index %d; every new token is above %d\n",
				pos[0], info.Sessions, info.Locks, info.BackupIndex, info.Floor); err != nil {
				return err
			}
			return c.printf("reconciled with the running cluster: %d sessions ended (their clients are told at their next request), "+
				"%d grants taken from live holders (each lock free after its holder's ttl + lock-delay), %d grants of the backup not restored\n",
				info.SessionsEnded, info.GrantsRevoked, info.GrantsDropped)
		})
	}
}

// inspectDataDir prints the last index of a stopped node's data dir: no
// token that node knew of is above it (a lower bound for --min-token).
func (c *cli) inspectDataDir(dir string) error {
	info, err := node.InspectDataDir(dir)
	if err != nil {
		return fmt.Errorf("snapshot inspect: %w", err)
	}
	if c.json() {
		return c.printJSON(info)
	}
	return c.printf("data dir:       %s\nlast index:     %d (no token this node knew of is above it)\nsnapshot index: %d (term %d)\n",
		dir, info.LastIndex, info.SnapshotIndex, info.SnapshotTerm)
}
