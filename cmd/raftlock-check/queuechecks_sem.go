package main

// The queue checks of a semaphore run (--permits N). A semaphore keeps
// one FIFO queue across its slots: the head waiter takes the next
// grantable slot, and no acquire behind it (nor a newcomer's try) is
// granted before it (docs/DESIGN.md, "Semaphores"). So the queue-order
// check (checkQueueOrder, check 6) judges a semaphore's history whole, as
// a plain lock's, with one difference: a plain lock's holder must let go
// before anyone else is granted, so a grant to a waiter that the history
// never saw is bounded by that holder's release, session end or
// revocation, which placeEndBound counts; a semaphore's next waiter may be
// granted another slot while that unseen holder keeps its own. So a
// waiter with an acquire whose outcome is unknown (never answered,
// unknown_outcome, or a call that failed) may have been granted unseen,
// its place ended, from that acquire's call on (semQueueView). The
// no-ghost-grant check (check 7) holds for a semaphore as it is: a holder
// whose place surely ended holds no slot and waits in no queue.

// semQueueView returns h as checkQueueOrder should see a semaphore run's
// history: every acquire of unknown outcome counted as a try (its place
// may end from its call on, by a grant nobody saw).
func semQueueView(h History) History {
	out := h
	out.Ops = make([]Op, len(h.Ops))
	for i, o := range h.Ops {
		if o.Kind == kindAcquire && (!o.Done() || o.Result == resUnknown || o.Result == resFailed) {
			o.WaitFor = 0
		}
		out.Ops[i] = o
	}
	return out
}

// checkSemQueueOrder runs the queue-order check on a semaphore run's
// history h (see above). It returns the violations and how many (lock,
// waiter, later grant) pairs it judged.
func checkSemQueueOrder(h History) ([]Violation, int) {
	return checkQueueOrder(semQueueView(h))
}
