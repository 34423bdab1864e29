package main

import "time"

// The line protocol between the suite and a worker (docs/CONFORMANCE.md):
// the suite writes one request per line to the worker's stdin, the worker
// writes one reply per request, and events of its own, one per line, to
// its stdout, as JSON objects. Requests may be answered out of order (a
// waiting lock does not hold the others up); the id pairs them.

// message is a request, a reply or an event: the union of their fields.
type message struct {
	// ID pairs a reply with its request; 0 on events.
	ID int `json:"id,omitempty"`
	// Op is the request's operation.
	Op string `json:"op,omitempty"`

	// Request fields.
	Endpoints      []string `json:"endpoints,omitempty"`
	RequestTimeout float64  `json:"request_timeout,omitempty"`
	// CA, Cert and Key are PEM files for a TLS cluster (https://
	// endpoints): its CA, and the client's certificate and key; ACLToken
	// is an ACL secret, sent as a bearer token (connect).
	CA        string   `json:"ca,omitempty"`
	Cert      string   `json:"cert,omitempty"`
	Key       string   `json:"key,omitempty"`
	ACLToken  string   `json:"acl_token,omitempty"`
	Session   string   `json:"session,omitempty"`
	TTL       float64  `json:"ttl,omitempty"`
	LockDelay *float64 `json:"lock_delay,omitempty"`
	Grace     float64  `json:"grace,omitempty"`
	Lock      string   `json:"lock,omitempty"`
	Name      string   `json:"name,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Wait      float64  `json:"wait,omitempty"`
	Value     string   `json:"value,omitempty"`
	Fence     string   `json:"fence,omitempty"`
	// Permits (lock) takes one slot of a semaphore of that many slots
	// (absent or 0: a plain lock); a semaphore's lock reply gives it back,
	// with Slot, the slot granted.
	Permits uint64 `json:"permits,omitempty"`
	// Watch names a watch or an observation (requests watch, observe,
	// stop; events lock_state, leader).
	Watch string `json:"watch,omitempty"`

	// Reply fields.
	OK        *bool  `json:"ok,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	Sequencer string `json:"sequencer,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	Holder    string `json:"holder,omitempty"`
	// Slot is the semaphore slot a lock reply granted (absent on a plain
	// lock's).
	Slot    *uint64 `json:"slot,omitempty"`
	State   string  `json:"state,omitempty"`
	Verdict string  `json:"verdict,omitempty"`
	Client  string  `json:"client,omitempty"`
	// Holders are the tokens of a lock's holders (event lock_state; none:
	// the lock is free).
	Holders []uint64 `json:"holders,omitempty"`

	// Kind and Reason say why a lost lock was lost when the cluster
	// revoked its grant (event lost): the revocation's kind ("admin",
	// "max_hold") and the operator's reason; absent otherwise.
	Kind   string `json:"kind,omitempty"`
	Reason string `json:"reason,omitempty"`
	// ByHolder is the holder id of whoever asked for a release (event
	// release_requested).
	ByHolder string `json:"by_holder,omitempty"`

	// Event is the kind of an event: "lost" (Lock, Kind, Reason),
	// "release_requested" (Lock, ByHolder), "state" (Session, State),
	// "lock_state" (Watch, Holders), "leader" (Watch, Value, Token,
	// Sequencer).
	Event string `json:"event,omitempty"`
	// At is when the event happened in the worker, in seconds since the
	// Unix epoch (the host's clock, which the suite shares); the suite
	// uses the time it read the line when At is absent or later.
	At float64 `json:"at,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// unixSeconds is t as the protocol's At.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// fromUnixSeconds is the time of an At.
func fromUnixSeconds(f float64) time.Time { return time.Unix(0, int64(f*1e9)) }
