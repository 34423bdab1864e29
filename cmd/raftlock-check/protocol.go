package main

// The protocol between the checker and its client processes: one JSON
// object per line. A client writes operation records, resource writes and
// its state to its stdout; the checker answers resource writes and sends
// commands on the client's stdin. Every time is monoNow() of the process
// that stamped it.

// Message types, client to checker.
const (
	// msgCall: an operation is about to be sent (Kind and its arguments).
	msgCall = "call"
	// msgRet: the operation with the same ID returned (Result and data).
	msgRet = "ret"
	// msgWrite: a write to the fenced resource (ID, Lock, Seq, Token,
	// Session, Holder); the checker answers msgWriteReply.
	msgWrite = "write"
	// msgHold and msgUnhold: the client starts and stops working under a
	// lock (Lock, Token, Session, Holder). They steer the fault schedule.
	msgHold   = "hold"
	msgUnhold = "unhold"
	// msgLost: the Lost() channel of a lock the client held (since its
	// msgHold) closed (At, Lock, Token, Session, Holder).
	msgLost = "lost"
	// msgPinReply answers msgPin: OK if the client holds that grant and
	// will keep it until msgUnpin or until its Lost() closes.
	msgPinReply = "pin_reply"
	// msgState: the client's session changed state (Session, Result holds
	// the state name, Err its cause). The checker records a session its
	// client declared expired (Result "expired").
	msgState = "state"
	// msgWhereReply answers msgWhere: Node is the address the client's
	// last request went to (empty: none yet).
	msgWhereReply = "where_reply"
	// msgLog: a line of text for the client's log.
	msgLog = "log"
)

// Message types, checker to client.
const (
	// msgWriteReply answers msgWrite: OK, or Err with the reason.
	msgWriteReply = "write_reply"
	// msgVerify asks a client that holds a lock to read it now.
	msgVerify = "verify"
	// msgStop asks the client to release what it holds, close its session
	// and exit.
	msgStop = "stop"
	// msgPin (ID, Lock, Token) asks a client that holds that grant not to
	// let go of it of its own accord: it keeps working under it (writing
	// while its session is safe, waiting while it is in jeopardy) until its
	// Lost() closes, a write is rejected, or msgUnpin. The client answers
	// msgPinReply.
	msgPin = "pin"
	// msgUnpin ends a pin: the client's hold ends as it would have.
	msgUnpin = "unpin"
	// msgWhere (ID) asks a client which node it talks to now: the client
	// answers msgWhereReply at once.
	msgWhere = "where"
	// msgToken (Secret) gives the client a new ACL token: its requests
	// carry it from then on (delete-token, restore).
	msgToken = "token"
	// msgLateArm (ID, WaitFor: the longest hold in nanoseconds) asks a
	// client to hold the answer of its next granted waiting acquire (the
	// late-answer fault); it answers msgLateCaught (ID, Lock, Token, Slot)
	// once it holds one. msgLateRelease (ID; 0: whatever is armed) lets
	// the answer go, or disarms. msgLatePin (ID), sent once the held
	// answer's grant was revoked, makes a hold of that grant start pinned
	// (lateAnswers.pins).
	msgLateArm     = "late_arm"
	msgLateCaught  = "late_caught"
	msgLateRelease = "late_release"
	msgLatePin     = "late_pin"
)

// Operation kinds.
const (
	kindOpen      = "open"
	kindKeepAlive = "keepalive"
	kindClose     = "close"
	kindAcquire   = "acquire"
	kindRelease   = "release"
	kindRead      = "read"
)

// Results of an operation. resOK is a success; the others name the
// definite failures the model distinguishes; resUnknown is an outcome the
// client cannot know (the call gave up, or the connection broke).
const (
	resOK   = "ok"
	resBusy = "busy"
	// resInvalid: invalid_argument, changing nothing; in a run with
	// --mixed-kinds, an acquire whose kind (mode, permits) disagrees with
	// the lock's while it is held or waited for.
	resInvalid     = "invalid"
	resNotFound    = "not_found"
	resWaitTimeout = "wait_timeout"
	resNotHolder   = "not_holder"
	// resWaitCancelled: a waiting acquire whose wait its own holder ended
	// (a release by the queued holder): no longer queued, not granted.
	resWaitCancelled = "wait_cancelled"
	// resNoLeader: the cluster answered no_leader, which promises that
	// nothing was appended. Only the naive waiter's single-attempt calls
	// see it: the Go client retries it until its ctx ends.
	resNoLeader = "no_leader"
	resUnknown  = "unknown"
	// resFailed: a call that surely had no effect that matters (a failed
	// read, keepalive or open).
	resFailed = "failed"
)

// message is one line of the protocol, in either direction.
type message struct {
	T  string `json:"t"`
	ID uint64 `json:"id,omitempty"`
	At int64  `json:"at,omitempty"`

	Kind    string `json:"kind,omitempty"`
	Lock    string `json:"lock,omitempty"`
	Session string `json:"session,omitempty"`
	Holder  string `json:"holder,omitempty"`
	// Wait: a waiting acquire, WaitFor its wait in nanoseconds. Unlock: a
	// release sent by Lock.Unlock (not by the session's clean-up of an
	// abandoned acquire, nor a waiter's cancel). Verify: a read asked for
	// by msgVerify. Naive: a call of the naive waiter (one HTTP attempt,
	// no retries).
	Wait    bool   `json:"wait,omitempty"`
	WaitFor int64  `json:"wait_for,omitempty"`
	Unlock  bool   `json:"unlock,omitempty"`
	Verify  bool   `json:"verify,omitempty"`
	Naive   bool   `json:"naive,omitempty"`
	Node    string `json:"node,omitempty"`
	// Attempts is how many HTTP requests a call sent, Unsure how many of
	// them may have taken effect unseen (the connection broke after the
	// request was sent, or the answer was unknown_outcome).
	Attempts int `json:"attempts,omitempty"`
	Unsure   int `json:"unsure,omitempty"`

	Result    string       `json:"result,omitempty"`
	Err       string       `json:"err,omitempty"`
	Token     uint64       `json:"token,omitempty"`
	TTL       int64        `json:"ttl,omitempty"`
	LockDelay int64        `json:"lock_delay,omitempty"`
	Holders   []holderInfo `json:"holders,omitempty"`
	// Queue is a read's queue of waiters, in FIFO order; Index the Raft
	// index of the lock's last change the read saw.
	Queue []queuedInfo `json:"queue,omitempty"`
	Index uint64       `json:"index,omitempty"`
	Seq   string       `json:"seq,omitempty"`
	OK    bool         `json:"ok,omitempty"`
	// Slot is the semaphore slot of an acquire's grant and of a hold (a
	// run with --permits; 0 otherwise).
	Slot uint64 `json:"slot,omitempty"`
	// Mode and Permits are an acquire's kind: "shared" or empty
	// (exclusive), and its permits (0: a plain lock).
	Mode    string `json:"mode,omitempty"`
	Permits uint64 `json:"permits,omitempty"`
	// MaxHold is an acquire's hold limit in nanoseconds (0: none).
	MaxHold int64 `json:"max_hold,omitempty"`
	// Secret is msgToken's ACL token secret (checker to client only; never
	// logged).
	Secret string `json:"secret,omitempty"`
}

// queuedInfo is one waiter in the answer of a read: its holder id and
// mode ("exclusive" or "shared"). Reads name no session of a waiter.
type queuedInfo struct {
	Holder string `json:"holder"`
	Mode   string `json:"mode,omitempty"`
}

// holderInfo is one holder in the answer of a read. A read names the
// holder's session by its handle (api.SessionHandle), never by its id: the
// client records Handle, and the checker's history names the session by the
// id one of its clients opened it with (resolveHolders), Handle then empty.
type holderInfo struct {
	Session string `json:"session,omitempty"`
	Handle  string `json:"handle,omitempty"`
	Holder  string `json:"holder"`
	Token   uint64 `json:"token"`
	// Slot is the holder's semaphore slot (a run with --permits).
	Slot uint64 `json:"slot,omitempty"`
}
