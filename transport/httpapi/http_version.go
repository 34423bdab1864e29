package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/raftlock/raftlock/api"
)

// leaderReads refuses, on a follower, a request that its leader's build
// cannot serve, by the leader's member record (li.Commands): in a rolling
// upgrade with the leader not upgraded yet, a semaphore acquire, a hold
// limit, a revocation, a release request or a close by handle sent
// through an upgraded node would otherwise get the old leader's `unknown
// field "permits"` or `no route`. The answer is the one the leader gives
// once it is upgraded while a member is not: invalid_argument, every
// member must run a build that reads command version 5. A leader without
// a record (0) is forwarded to: it answers for itself.
func leaderReads(r *http.Request, li api.LeaderInfo) error {
	if li.Commands == 0 || li.Commands >= api.CommandsLockOptions {
		return nil
	}
	what := ""
	switch r.Method + " " + r.URL.Path {
	case "POST /v1/locks/revoke":
		what = "revoke"
	case "POST /v1/locks/request-release":
		what = "request release"
	case "POST /v1/sessions/close-by-handle":
		what = "close session by handle"
	case "POST /v1/acquire":
		// The body goes on to the leader: read it, and put it back.
		body, err := io.ReadAll(io.LimitReader(r.Body, api.MaxBodyBytes+1))
		if err != nil {
			return nil // the forward answers the broken body
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Name    string          `json:"name"`
			Permits json.RawMessage `json:"permits"`
			MaxHold json.RawMessage `json:"max_hold"`
		}
		if json.Unmarshal(body, &req) != nil || (isZero(req.Permits) && isZero(req.MaxHold)) {
			return nil
		}
		what = "acquire " + req.Name
	default:
		return nil
	}
	return api.Errorf(api.CodeInvalidArgument,
		"%s: every member must run a build that reads command version %d (the leader %s reads %d): upgrade them first",
		what, api.CommandsLockOptions, li.ID, li.Commands)
}

// isZero reports whether a JSON value is absent or zero ("0", "\"\"",
// "\"0s\"", null).
func isZero(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "", "0", "null", `""`, `"0s"`, `"0"`:
		return true
	}
	return false
}
