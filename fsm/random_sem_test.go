package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// semModel is what TestRandomSemaphoreCommands knows of one semaphore,
// independently of the FSM: its permits (0: not stored), its holders'
// slots and tokens, its FIFO queue, its slots' lock-delays and the
// revocations each slot's delay keeps.
type semModel struct {
	permits uint64
	holders map[hkey]Holder
	queue   []hkey
	delays  map[uint64]int64 // until, by slot
	lastTok map[uint64]uint64
	revoked map[uint64][]Revocation // by slot, while its delay runs
}

// semTTL is the ttl of every session of the randomized semaphore test
// (openCmd's).
const semTTL = int64(10 * time.Second)

// TestRandomSemaphoreCommands applies random mixes of acquires (try and
// wait, right and wrong permits), releases, cancels, expiries, closes,
// revocations (an operator's and hold limits', current and stale),
// closes by handle and ends of slot delays (current and stale) to two
// semaphores, and checks every entry against a model: at most permits
// holders, each in its own slot (none held twice), the lowest free slot
// out of lock-delay granted, FIFO across permits, an expiry or a
// revocation delaying only its slots (a revoked slot is never granted
// before its delay ends, ttl + lock-delay), each session's keepalive
// naming exactly its revocations whose slot delay still runs, per-slot
// tokens increasing, and replicas (one restored from a snapshot midway)
// agreeing.
func TestRandomSemaphoreCommands(t *testing.T) {
	steps := 4000
	if testing.Short() {
		steps = 1500
	}
	for _, seed := range append(slices.Clone(fixedSeeds), uint64(time.Now().UnixNano())) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runRandomSemaphore(t, seed, steps)
		})
	}
}

func runRandomSemaphore(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5e3a))
	a, b := New(nil), New(nil)
	sessions := []string{"s0", "s1", "s2", "s3", "s4"}
	permitsOf := map[string]uint64{"m": 2, "n": 3}
	locks := []string{"m", "n"}
	models := map[string]*semModel{}
	for _, l := range locks {
		models[l] = &semModel{holders: map[hkey]Holder{}, delays: map[uint64]int64{}, lastTok: map[uint64]uint64{},
			revoked: map[uint64][]Revocation{}}
	}
	open := map[string]int64{} // lock-delay of open sessions
	now := t0
	var grants, delays, mismatches, revocations int
	for step := 0; step < steps; step++ {
		idx := uint64(step + 1)
		now += rng.Int64N(int64(time.Second))
		var c Command
		name := locks[rng.IntN(len(locks))]
		m := models[name]
		sess := sessions[rng.IntN(len(sessions))]
		holder := []string{"h0", "h1"}[rng.IntN(2)]
		switch k := rng.IntN(23); {
		case k < 3:
			c = openCmd(sess, []time.Duration{0, time.Second, 3 * time.Second}[rng.IntN(3)])
		case k < 10:
			p := permitsOf[name]
			if rng.IntN(15) == 0 {
				p = uint64(rng.IntN(4)) // 0 is a plain acquire
			}
			c = semCmd(name, sess, holder, p, rng.IntN(3) > 0)
		case k < 13:
			c = relCmd(name, sess, holder)
		case k < 14:
			c = cancelCmd(name, sess, holder)
		case k < 16:
			c = expireCmd(sess)
		case k < 17:
			c = closeCmd(sess)
		case k < 19:
			kind := []string{RevokeKindAdmin, RevokeKindMaxHold}[rng.IntN(2)]
			c = revokeKindCmd(name, sess, holder, uint64(rng.IntN(idxOr1(step))), kind)
			if keys := slices.SortedFunc(maps.Keys(m.holders), cmpHkey); len(keys) > 0 && rng.IntN(4) > 0 {
				hk := keys[rng.IntN(len(keys))]
				c = revokeKindCmd(name, hk.s, hk.h, m.holders[hk].Token, kind)
				if rng.IntN(5) == 0 {
					c.RevokeGrant.Token-- // stale
				}
			}
		case k < 20:
			c = Command{Type: CmdRevokeSession, RevokeSession: &RevokeSession{ID: sess, Reason: "r"}}
		default:
			slot, until := uint64(rng.IntN(3)), now
			for _, s := range slices.Sorted(maps.Keys(m.delays)) {
				if rng.IntN(2) == 0 {
					slot, until = s, m.delays[s]
				}
			}
			if rng.IntN(5) == 0 {
				until-- // stale
			}
			c = endSlotCmd(name, slot, until)
		}
		c.Now = now
		data, err := c.Encode()
		if err != nil {
			t.Fatalf("seed %d entry %d: encode: %v", seed, idx, err)
		}
		if step == steps/2 {
			nb := New(nil)
			restoreInto(t, nb, snapshotBytes(t, b))
			b = nb
		}
		ra := a.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(Result)
		rb := b.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}).(Result)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d entry %d (%s %s): %s\nstate: %s", seed, idx, c.Type, describe(c), fmt.Sprintf(format, args...), a.Dump())
		}
		if !reflect.DeepEqual(ra, rb) {
			fail("replicas answer %+v and %+v", ra, rb)
		}
		// The model's transition.
		key := hkey{sess, holder}
		removeSession := func(id string, delay int64) {
			for _, ln := range locks {
				mm := models[ln]
				for hk, h := range mm.holders {
					if hk.s == id {
						delete(mm.holders, hk)
						if delay > 0 {
							if u := now + delay; u > mm.delays[h.Slot] {
								mm.delays[h.Slot] = u
							}
							delays++
						}
					}
				}
				mm.queue = slices.DeleteFunc(mm.queue, func(w hkey) bool { return w.s == id })
				for slot, rs := range mm.revoked {
					// Its revocations go with it; the delays run on.
					if mm.revoked[slot] = slices.DeleteFunc(rs, func(r Revocation) bool { return r.Session == id }); len(mm.revoked[slot]) == 0 {
						delete(mm.revoked, slot)
					}
				}
			}
		}
		switch c.Type {
		case CmdOpenSession:
			if _, ok := open[sess]; !ok {
				open[sess] = c.OpenSession.LockDelay
			}
		case CmdExpireSession, CmdCloseSession, CmdRevokeSession:
			if d, ok := open[sess]; ok {
				switch c.Type {
				case CmdCloseSession:
					d = 0
				case CmdRevokeSession:
					d += semTTL
				}
				removeSession(sess, d)
				delete(open, sess)
			} else if c.Type == CmdRevokeSession && ra.Status != StatusSessionNotFound {
				fail("closing an unknown session by handle: %s", ra.Status)
			}
		case CmdRevokeGrant:
			rg := c.RevokeGrant
			rk := hkey{rg.Session, rg.Holder}
			hd, held := m.holders[rk]
			ld, isOpen := open[rg.Session]
			if !held || !isOpen || hd.Token != rg.Token || rg.Token == 0 {
				if ra.Status != StatusNotHolder && ra.Status != StatusInvalid {
					fail("revocation of no grant: %s, want not_holder", ra.Status)
				}
				break
			}
			if ra.Status != StatusOK {
				fail("revocation of %+v: %s, want ok", hd, ra.Status)
			}
			delete(m.holders, rk)
			if u := now + semTTL + ld; u > m.delays[hd.Slot] {
				m.delays[hd.Slot] = u
			}
			m.revoked[hd.Slot] = append(m.revoked[hd.Slot], Revocation{Session: rg.Session, Holder: rg.Holder,
				Token: rg.Token, Kind: rg.Kind, Reason: rg.Reason, Slot: hd.Slot})
			revocations++
		case CmdAcquire:
			_, isOpen := open[sess]
			_, held := m.holders[key]
			queued := slices.Contains(m.queue, key)
			stored := len(m.holders) > 0 || len(m.queue) > 0 || len(m.delays) > 0
			switch {
			case !isOpen:
				if ra.Status != StatusSessionNotFound {
					fail("status %s, want session_not_found", ra.Status)
				}
			case stored && c.Acquire.Permits != m.permits || !stored && c.Acquire.Permits == 0:
				if c.Acquire.Permits == 0 && !stored {
					break // a plain lock of that name: released below
				}
				mismatches++
				if ra.Status != StatusPermitsMismatch || ra.Permits != m.permits {
					fail("%+v, want permits_mismatch naming %d", ra, m.permits)
				}
			case held:
				if ra.Status != StatusGranted || ra.Token != m.holders[key].Token || ra.Slot != m.holders[key].Slot {
					fail("retry answered %+v, want the grant %+v", ra, m.holders[key])
				}
			case queued:
			default:
				m.permits = c.Acquire.Permits
				if c.Acquire.Wait || (len(m.queue) == 0 && m.free() >= 0) {
					m.queue = append(m.queue, key)
				} else if ra.Status != StatusLockBusy {
					fail("status %s, want lock_busy", ra.Status)
				}
			}
			if c.Acquire.Permits == 0 && !stored && isOpen {
				// A plain lock took the name: release it at once, so that
				// the model stays about semaphores.
				if ra.Status != StatusGranted {
					fail("plain acquire of a free name: %s", ra.Status)
				}
				rc := relCmd(name, sess, holder)
				rc.Now = now
				rel, _ := rc.Encode()
				idx++
				step++
				a.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: rel})
				b.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: rel})
			}
		case CmdRelease:
			if _, ok := open[sess]; ok {
				delete(m.holders, key)
				m.queue = slices.DeleteFunc(m.queue, func(w hkey) bool { return w == key })
			}
		case CmdCancelWait:
			m.queue = slices.DeleteFunc(m.queue, func(w hkey) bool { return w == key })
		case CmdEndDelay:
			if u, ok := m.delays[c.EndDelay.Slot]; ok && u == c.EndDelay.Until {
				delete(m.delays, c.EndDelay.Slot)
				delete(m.revoked, c.EndDelay.Slot) // told, or lost by its lease
			}
		}
		// Grant from the head of every queue, lowest free slot first.
		for _, ln := range locks {
			mm := models[ln]
			for len(mm.queue) > 0 {
				slot := mm.free()
				if slot < 0 {
					break
				}
				w := mm.queue[0]
				mm.queue = mm.queue[1:]
				mm.holders[w] = Holder{Session: w.s, Holder: w.h, Token: idx, Slot: uint64(slot)}
				if idx <= mm.lastTok[uint64(slot)] {
					fail("slot %d of %s granted token %d after %d", slot, ln, idx, mm.lastTok[uint64(slot)])
				}
				mm.lastTok[uint64(slot)] = idx
				grants++
			}
			if len(mm.holders) == 0 && len(mm.queue) == 0 && len(mm.delays) == 0 {
				mm.permits = 0
			}
			mm.check(fail, a, ln)
		}
		// Each session's keepalive names exactly its revocations whose
		// slot delay still runs, on both replicas.
		for _, id := range sessions {
			var want []RevokedGrant
			for _, ln := range locks {
				for _, rs := range models[ln].revoked {
					for _, r := range rs {
						if r.Session == id {
							want = append(want, RevokedGrant{Lock: ln, Holder: r.Holder, Token: r.Token, Kind: r.Kind, Reason: r.Reason})
						}
					}
				}
			}
			for _, f := range []*FSM{a, b} {
				if got := sortRevoked(f.Revoked(id)); !slices.Equal(got, sortRevoked(want)) {
					fail("Revoked(%s) = %+v, the model's %+v", id, got, want)
				}
			}
		}
	}
	if grants == 0 || delays == 0 || mismatches == 0 || revocations == 0 {
		t.Fatalf("seed %d exercised too little: %d grants, %d delays, %d mismatches, %d revocations", seed, grants, delays,
			mismatches, revocations)
	}
	t.Logf("seed %d: %d grants, %d delays, %d mismatches, %d revocations", seed, grants, delays, mismatches, revocations)
}

func idxOr1(step int) int { return max(step, 1) }

func cmpHkey(x, y hkey) int { return cmp.Or(cmp.Compare(x.s, y.s), cmp.Compare(x.h, y.h)) }

// sortRevoked sorts a session's revocations (their order on a replica
// restored from a snapshot is the locks', not the revocations').
func sortRevoked(rs []RevokedGrant) []RevokedGrant {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(x, y RevokedGrant) int {
		return cmp.Or(cmp.Compare(x.Lock, y.Lock), cmp.Compare(x.Holder, y.Holder), cmp.Compare(x.Token, y.Token))
	})
	return rs
}

// free returns the lowest slot neither held nor delayed, or -1.
func (m *semModel) free() int {
	if m.permits == 0 {
		return -1
	}
	used := map[uint64]bool{}
	for _, h := range m.holders {
		used[h.Slot] = true
	}
	for s := range m.delays {
		used[s] = true
	}
	for s := uint64(0); s < m.permits; s++ {
		if !used[s] {
			return int(s)
		}
	}
	return -1
}

func (m *semModel) check(fail func(string, ...any), f *FSM, name string) {
	l, ok := f.Lock(name)
	if !ok {
		if len(m.holders)+len(m.queue)+len(m.delays) > 0 {
			fail("%s not stored; the model has %+v", name, m)
		}
		return
	}
	if l.Permits != m.permits || uint64(len(l.Holders)) > l.Permits || l.Delayed {
		fail("%s: permits %d, %d holders, delayed %v; the model's permits %d", name, l.Permits, len(l.Holders), l.Delayed, m.permits)
	}
	delayed := map[uint64]bool{}
	for _, d := range l.SlotDelays {
		delayed[d.Slot] = true
	}
	held := map[uint64]bool{}
	for _, h := range l.Holders {
		if held[h.Slot] || delayed[h.Slot] || h.Slot >= l.Permits {
			fail("%s: slot %d granted twice, in its delay or out of range: %+v", name, h.Slot, l)
		}
		held[h.Slot] = true
	}
	rv := map[uint64][]Revocation{}
	for _, r := range l.Revoked {
		if !delayed[r.Slot] {
			fail("%s: revocation %+v kept out of its slot's delay", name, r)
		}
		rv[r.Slot] = append(rv[r.Slot], r)
	}
	if !reflect.DeepEqual(rv, m.revoked) && (len(rv) > 0 || len(m.revoked) > 0) {
		fail("%s revocations %+v, the model's %+v", name, rv, m.revoked)
	}
	got := map[hkey]Holder{}
	for _, h := range l.Holders {
		h.Value = ""
		got[hkey{h.Session, h.Holder}] = h
	}
	if !reflect.DeepEqual(got, m.holders) && (len(got) > 0 || len(m.holders) > 0) {
		fail("%s holders %+v, the model's %+v", name, got, m.holders)
	}
	var q []hkey
	for _, w := range l.Waiters {
		q = append(q, hkey{w.Session, w.Holder})
	}
	if !slices.Equal(q, m.queue) {
		fail("%s queue %+v, the model's %+v", name, q, m.queue)
	}
	gd := map[uint64]int64{}
	for _, d := range l.SlotDelays {
		gd[d.Slot] = d.Until
	}
	if !reflect.DeepEqual(gd, m.delays) && (len(gd) > 0 || len(m.delays) > 0) {
		fail("%s slot delays %+v, the model's %+v", name, gd, m.delays)
	}
}
