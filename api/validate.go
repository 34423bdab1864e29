package api

import (
	"math"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/raftlock/raftlock/sequencer"
)

// MaxSessionIDBytes bounds a session id on input (ids are 32 hex digits).
const MaxSessionIDBytes = 64

// CheckText validates an identifier-like string in a request by
// raftlock's one rule for names and ids (sequencer.CheckText: valid
// UTF-8, no control characters, min to max bytes), plus no bidirectional
// embedding, override or isolate character (U+202A to U+202E, U+2066 to
// U+2069), which make a text display as another ("xss/\u202egnp.exe"
// shows as "xss/exe.png" on the status page and in `lock get`). The error
// is an invalid_argument *Error naming what. Lock names, prefixes,
// session ids and names, holder ids, token names, reasons and member
// fields all pass through it, so that two different byte strings are
// never taken for one name, nor shown as one. It checks requests: the
// state machine applies what its log holds, texts from before this rule
// included.
func CheckText(what, s string, min, max int) error {
	if err := sequencer.CheckText(what, s, min, max); err != nil {
		return Errorf(CodeInvalidArgument, "%v", err)
	}
	for i, r := range s {
		if isBidiControl(r) {
			return Errorf(CodeInvalidArgument, "%s contains bidirectional control character %U at byte %d", what, r, i)
		}
	}
	return nil
}

// ValidateLockName checks a lock name in a request: path-like UTF-8, 1 to
// sequencer.MaxNameBytes bytes, no control characters and no
// bidirectional controls (CheckText).
func ValidateLockName(name string) error {
	return CheckText("lock name", name, 1, sequencer.MaxNameBytes)
}

// isBidiControl reports whether r is a bidirectional embedding, override
// or isolate character (U+202A-U+202E, U+2066-U+2069).
func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// CheckPrefix checks a lock-name prefix (of a listing): like a lock name,
// but it may be empty.
func CheckPrefix(prefix string) error {
	return CheckText("prefix", prefix, 0, sequencer.MaxNameBytes)
}

// CheckValue checks a lock's value: too_large above MaxValueBytes,
// invalid_argument unless it is valid UTF-8 (it is replicated, and answered,
// as a JSON string, which would replace invalid bytes; any other character,
// control characters included, is allowed).
func CheckValue(v string) error {
	if len(v) > MaxValueBytes {
		return Errorf(CodeTooLarge, "value is %d bytes; the limit is %d", len(v), MaxValueBytes)
	}
	if !utf8.ValidString(v) {
		return Errorf(CodeInvalidArgument, "value is not valid UTF-8")
	}
	return nil
}

// CheckLockRef validates the (lock, session, holder) triple of an acquire
// or release.
func CheckLockRef(name, sess, holder string) error {
	if err := ValidateLockName(name); err != nil {
		return err
	}
	if err := CheckSessionID(sess); err != nil {
		return err
	}
	return CheckText("holder", holder, 1, MaxHolderBytes)
}

// Unbounded as the max of CheckDuration means the duration has no upper
// bound; the range is then printed as [min, ∞).
const Unbounded time.Duration = math.MaxInt64

// CheckDuration is the one duration validator of raftlock: every duration
// flag, option and API field is checked by it, directly or through the named
// helpers below. It accepts d in [min, max] and otherwise returns an
// invalid_argument *Error that names what (a field such as "ttl" or a flag
// such as "--failover-grace"), the value and the allowed range, in the same
// form whichever bound d misses:
//
//	ttl 0s out of range [1s, 5m0s]
//	--timeout -1s out of range [0s, ∞)
func CheckDuration(what string, d, min, max time.Duration) error {
	if d >= min && d <= max {
		return nil
	}
	if max == Unbounded {
		return Errorf(CodeInvalidArgument, "%s %v out of range [%v, ∞)", what, d, min)
	}
	return Errorf(CodeInvalidArgument, "%s %v out of range [%v, %v]", what, d, min, max)
}

// CheckNonNegative checks a duration that has no upper bound: [0, ∞).
func CheckNonNegative(what string, d time.Duration) error {
	return CheckDuration(what, d, 0, Unbounded)
}

// CheckTTL checks a session's lease: [MinTTL, MaxTTL]. Zero is refused; a
// caller for whom zero means DefaultTTL substitutes it first.
func CheckTTL(what string, d time.Duration) error {
	return CheckDuration(what, d, MinTTL, MaxTTL)
}

// CheckLockDelay checks a session's lock-delay as it will be applied:
// [0, MaxLockDelay], zero meaning none. A caller whose zero means
// DefaultLockDelay, or who spells none NoLockDelay, resolves those first.
func CheckLockDelay(what string, d time.Duration) error {
	return CheckDuration(what, d, 0, MaxLockDelay)
}

// CheckWait checks how long one acquire waits in the lock's queue:
// [0, MaxWait], zero meaning try once.
func CheckWait(what string, d time.Duration) error {
	return CheckDuration(what, d, 0, MaxWait)
}

// CheckWatchWait checks how long a watch (a blocking lock read) waits for a
// change, after a zero has been replaced by DefaultWatchWait:
// [0, MaxWatchWait].
func CheckWatchWait(what string, d time.Duration) error {
	return CheckDuration(what, d, 0, MaxWatchWait)
}

// Explicit returns r with its TTL (ttl true) and its LockDelay (lockDelay
// true) marked as given explicitly, the way the wire marks a field present
// in the body: Resolve then takes them as they are, with no default and no
// sentinel, so "ttl":"0s" is refused (a lease is MinTTL at least) and
// "lock_delay":"0s" means none. A duration not marked keeps its Go meaning
// (zero: the default; NoLockDelay: none).
func (r OpenRequest) Explicit(ttl, lockDelay bool) OpenRequest {
	r.ttlSet, r.lockDelaySet = ttl, lockDelay
	return r
}

// Resolve fills in the defaults of an open request (zero TTL: DefaultTTL;
// zero LockDelay: DefaultLockDelay; NoLockDelay: none), except in the
// durations marked explicit, which it takes as they are (Explicit), and
// checks it: TTL in [MinTTL, MaxTTL], LockDelay in [0, MaxLockDelay], the
// name by the name rule. It is the one check of an OpenSession, wherever it
// is served; a resolved request resolves again to itself.
func (r *OpenRequest) Resolve() error {
	if r.TTL == 0 && !r.ttlSet {
		r.TTL = DefaultTTL
	}
	if !r.lockDelaySet {
		switch r.LockDelay {
		case 0:
			r.LockDelay = DefaultLockDelay
		case NoLockDelay:
			r.LockDelay = 0
		}
	}
	r.ttlSet, r.lockDelaySet = true, true
	if err := CheckTTL("ttl", r.TTL); err != nil {
		return err
	}
	if err := CheckLockDelay("lock_delay", r.LockDelay); err != nil {
		return err
	}
	return CheckText("session name", r.Name, 0, MaxSessionNameBytes)
}

// Resolve fills in the default mode of an acquire (zero: exclusive) and
// checks it: the lock, session and holder, the mode, the wait and the
// value. It is the one check of an Acquire, wherever it is served.
func (r *AcquireRequest) Resolve() error {
	if err := CheckLockRef(r.Name, r.Session, r.Holder); err != nil {
		return err
	}
	if r.Mode == 0 {
		r.Mode = sequencer.Exclusive
	}
	if !r.Mode.Valid() {
		return Errorf(CodeInvalidArgument, "mode must be exclusive or shared")
	}
	if err := CheckWait("wait", r.Wait); err != nil {
		return err
	}
	if r.MaxHold != 0 {
		if err := CheckDuration("max_hold", r.MaxHold, MinMaxHold, MaxMaxHold); err != nil {
			return err
		}
	}
	if err := CheckPermits(r.Permits, r.Mode); err != nil {
		return err
	}
	return CheckValue(r.Value)
}

// CheckPermits checks an acquire's permits: 0 (a plain lock) or 1 to
// MaxPermits, in exclusive mode only (a semaphore's slots are exclusive:
// shared holders need no permits).
func CheckPermits(permits uint64, mode sequencer.Mode) error {
	switch {
	case permits == 0:
		return nil
	case permits > MaxPermits:
		return Errorf(CodeInvalidArgument, "permits is %d; the limit is %d", permits, MaxPermits)
	case mode != sequencer.Exclusive:
		return Errorf(CodeInvalidArgument, "permits (%d) are for exclusive mode only; a shared lock admits any number of holders", permits)
	}
	return nil
}

// Check checks a release request: the lock, session and holder.
func (r ReleaseRequest) Check() error { return CheckLockRef(r.Name, r.Session, r.Holder) }

// CheckSessionID checks a session id as a request carries it.
func CheckSessionID(id string) error { return CheckText("session", id, 1, MaxSessionIDBytes) }

// Resolve fills in the default page size of a listing (zero:
// DefaultLocksPage) and checks the query: the prefix, the cursor (empty or
// a lock name) and the limit, 1 to MaxLocksPage.
func (q *LocksQuery) Resolve() error {
	if err := CheckPrefix(q.Prefix); err != nil {
		return err
	}
	if err := CheckText("after", q.After, 0, sequencer.MaxNameBytes); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = DefaultLocksPage
	}
	if q.Limit < 1 || q.Limit > MaxLocksPage {
		return Errorf(CodeInvalidArgument, "limit %d out of range [1, %d]", q.Limit, MaxLocksPage)
	}
	return nil
}

// PageLocks cuts the page q asks for (resolved) out of a listing of every
// lock with q's prefix in name order (a Backend that only lists them all).
func PageLocks(all []LockState, q LocksQuery) LocksPage {
	i := sort.Search(len(all), func(i int) bool { return all[i].Name > q.After })
	page := LocksPage{Locks: all[i:min(len(all), i+q.Limit)]}
	if i+q.Limit < len(all) {
		page.Next = page.Locks[len(page.Locks)-1].Name
	}
	return page
}
