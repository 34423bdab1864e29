package main

import "slices"

// settledState is what settleStates needs of a model's state (lockState,
// semState): comparable, with armed effects it can fire, and a core it
// compares apart from them.
type settledState[S any] interface {
	comparable
	// core is the state without its armed effects.
	core() S
	// subsumes reports whether the state can do whatever the other can.
	subsumes(S) bool
	// unseen returns the states reachable with no operation at all.
	unseen() []S
	// effects decodes the armed effects; fire returns the states after
	// one of them happened (its Armed still the old one), none if it
	// changes nothing.
	effects() []pendingEffect
	fire(pendingEffect) []S
	// withArmed returns the state with Armed set to armed.
	withArmed(armed string) S
}

// settleStates returns every state a model may be in when the armed
// effects of the states ss have had the chance to happen: the states ss,
// the states reachable unseen, and the states after any of their effects
// happened, in any order, each at most once; but not a state that another
// one subsumes (see subsumes), nor what follows from it. Without that the
// orders would multiply: a grant to one waiter, its cancel, a grant to the
// next... each order using up other effects. Both the lock model (settle)
// and the semaphore model (settleSem) use it.
func settleStates[S settledState[S]](ss []S) []S {
	type found struct {
		s    S
		dead bool // subsumed by a state found later
	}
	var all []found
	byCore := map[S][]int{}
	add := func(s S) {
		c := s.core()
		for _, k := range byCore[c] {
			if !all[k].dead && (all[k].s == s || all[k].s.subsumes(s)) {
				return
			}
		}
		for _, k := range byCore[c] {
			if s.subsumes(all[k].s) {
				all[k].dead = true
			}
		}
		byCore[c] = append(byCore[c], len(all))
		all = append(all, found{s: s})
	}
	for _, s := range ss {
		add(s)
	}
	for i := 0; i < len(all); i++ {
		if all[i].dead {
			continue
		}
		for _, next := range all[i].s.unseen() {
			add(next)
		}
		if all[i].dead {
			continue
		}
		cur := all[i].s
		es := cur.effects()
		for j, e := range es {
			if j > 0 && e == es[j-1] {
				continue // a copy of the effect just tried
			}
			for _, next := range cur.fire(e) {
				add(next.withArmed(joinEffects(slices.Delete(slices.Clone(es), j, j+1))))
			}
		}
	}
	out := make([]S, 0, len(all))
	for _, f := range all {
		if !f.dead {
			out = append(out, f.s)
		}
	}
	return out
}
