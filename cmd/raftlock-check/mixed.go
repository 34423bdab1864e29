package main

import (
	"fmt"
	"slices"
	"time"
)

// A mixed-kinds run (--mixed-kinds) lets every acquire pick its kind at
// random: exclusive, shared, or a semaphore of 1 to maxMixedPermits
// permits (mixedKind). The cluster refuses an acquire whose kind
// disagrees with the lock's while the lock is held or waited for
// (invalid_argument, resInvalid, which changes nothing), so a name's kind
// changes only between tenures, and the resource keeps one fence per name
// across them. The checks judge every grant by its kind (checkTenures):
//
//   - two grants conflict unless both are shared, or both are slots of a
//     semaphore of the same permits in different slots: a slot of a
//     semaphore of another size, of the same slot, a grant of another
//     mode: each ends the other's tenure;
//   - the resource's order: no write is accepted after the resource
//     accepted one with a higher token of a conflicting grant (what
//     fencing promises, whatever the kinds: the newer token was seen);
//   - tenures: no write is accepted after a conflicting grant with a
//     higher token was acknowledged (the lock-delay keeps a stalled
//     holder's writes before the next grant; as checkFence, with its
//     exemptions: an operator's revocation, a write held in transit);
//   - slots: every grant of a semaphore of N permits is of a slot below N.
//
// Acknowledged grants kept (check 3) and Lost() before re-grant (check 5)
// judge every grant as in a plain run, a read naming the grant among its
// holders, and a re-grant being one that conflicts; sessions kept (check
// 4) as always. Linearizability, queue order and ghost grants model one
// exclusive holder per lock and are not run.

// maxMixedPermits bounds the semaphores a mixed-kinds run takes.
const maxMixedPermits = 3

// modeShared is an acquire's Mode for a shared grant (Op.Mode).
const modeShared = "shared"

// checkTenure names the mixed-kinds run's tenure check.
const checkTenure = "tenures"

// mixedKind picks an acquire's kind with intn: exclusive, shared, or a
// semaphore of 1 to maxMixedPermits permits, each as likely.
func mixedKind(intn func(int) int) (shared bool, permits uint64) {
	switch k := intn(2 + maxMixedPermits); k {
	case 0:
		return false, 0
	case 1:
		return true, 0
	default:
		return false, uint64(k - 1)
	}
}

// grantKind is the kind of one acknowledged grant.
type grantKind struct {
	shared  bool
	permits uint64
	slot    uint64
}

func (k grantKind) String() string {
	switch {
	case k.permits > 0:
		return fmt.Sprintf("slot %d of %d", k.slot, k.permits)
	case k.shared:
		return "shared"
	}
	return "exclusive"
}

// conflicts reports whether grants of kinds a and b may not be held at
// once (see above).
func conflicts(a, b grantKind) bool {
	if a.shared && b.shared {
		return false
	}
	return a.permits == 0 || b.permits == 0 || a.permits != b.permits || a.slot == b.slot
}

// kindedGrant is an acknowledged grant with its kind.
type kindedGrant struct {
	grant
	kind grantKind
}

// kindsOf returns h's acknowledged grants with their kinds, by lock, and
// the kind of each (session, holder, lock).
func kindsOf(h History) (map[string][]kindedGrant, map[[3]string]grantKind) {
	kinds := map[[3]string]grantKind{}
	for _, o := range h.Ops {
		if o.Kind == kindAcquire && o.Result == resOK {
			k := [3]string{o.Session, o.Holder, o.Lock}
			if _, ok := kinds[k]; !ok {
				kinds[k] = grantKind{shared: o.Mode == modeShared, permits: o.Permits, slot: o.Slot}
			}
		}
	}
	out := map[string][]kindedGrant{}
	for lock, gs := range grantsOf(h) {
		for _, g := range gs {
			out[lock] = append(out[lock], kindedGrant{g, kinds[[3]string{g.Session, g.Holder, lock}]})
		}
	}
	return out, kinds
}

// checkTenures runs the tenure check of a mixed-kinds run (see above).
// It returns the violations and how many accepted writes it judged.
func checkTenures(h History) ([]Violation, int) {
	var vs []Violation
	grants, kinds := kindsOf(h)
	for _, lock := range sortedKeys(grants) {
		for _, g := range grants[lock] {
			if g.kind.permits > 0 && g.kind.slot >= g.kind.permits {
				vs = append(vs, Violation{Check: checkTenure, At: g.Acked, Client: g.Client,
					What: fmt.Sprintf("lock %s: client %d was granted slot %d (token %d) of a semaphore of %d permits", lock, g.Client, g.kind.slot, g.Token, g.kind.permits)})
			}
		}
	}
	type seen struct {
		w    WriteRec
		kind grantKind
	}
	accepted := map[string][]seen{}
	plain := grantsOf(h)
	judged := 0
	for _, w := range h.Writes {
		if !w.Accepted {
			continue
		}
		judged++
		kw := kinds[[3]string{w.Session, w.Holder, w.Lock}]
		for _, p := range accepted[w.Lock] {
			if p.w.Token > w.Token && conflicts(kw, p.kind) {
				vs = append(vs, Violation{Check: checkTenure, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: client %d's write with token %d (%s) was accepted after client %d's with token %d (%s): the resource had seen the newer token",
						w.Lock, w.Client, w.Token, kw, p.w.Client, p.w.Token, p.kind)})
				break
			}
			if p.w.Token == w.Token && (p.w.Session != w.Session || p.w.Holder != w.Holder) && conflicts(kw, p.kind) {
				vs = append(vs, Violation{Check: checkTenure, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: clients %d (%s) and %d (%s) both wrote with token %d", w.Lock, p.w.Client, p.kind, w.Client, kw, w.Token)})
				break
			}
		}
		accepted[w.Lock] = append(accepted[w.Lock], seen{w, kw})
		if revoked(h, w.Client, grantAcked(plain[w.Lock], w), w.At) || heldInTransit(h, w) {
			continue
		}
		for _, g := range grants[w.Lock] {
			if g.Token > w.Token && g.Acked < w.At && (g.Session != w.Session || g.Holder != w.Holder) && conflicts(kw, g.kind) {
				vs = append(vs, Violation{Check: checkTenure, At: w.At, Client: w.Client,
					What: fmt.Sprintf("lock %s: client %d's write with token %d (%s) was accepted %v after client %d was granted token %d (%s): a stale holder wrote inside the next tenure",
						w.Lock, w.Client, w.Token, kw, time.Duration(w.At-g.Acked).Round(time.Millisecond), g.Client, g.Token, g.kind)})
				break
			}
		}
	}
	return vs, judged
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// mixedChecks are quickChecks for a mixed-kinds run.
func mixedChecks(h History) []Violation {
	vs, _ := checkTenures(h)
	gv, _ := checkGrantsKept(h)
	lv, _ := checkLostBeforeRegrant(h)
	return append(append(append(vs, gv...), lv...), checkSessionsKept(h)...)
}
