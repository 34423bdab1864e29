package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// Header is the HTTP request header that carries a sequencer's printable form
// to a protected resource.
const Header = "Raftlock-Sequencer"

// Error codes of the JSON errors written by Middleware.
const (
	codeSequencerRequired = "sequencer_required"
	codeInvalidArgument   = "invalid_argument"
	codeStaleSequencer    = "stale_sequencer"
	codeInternal          = "internal"
)

// ctxKey is the type of the context key under which Middleware stores the
// admitted sequencer.
type ctxKey struct{}

// Middleware returns a handler that fences next: it admits a request only if
// its Header carries a sequencer that f accepts, and otherwise answers with a
// JSON error {"error":{"code":...,"message":...}} without calling next:
//
//   - header missing or empty: 428 Precondition Required, "sequencer_required";
//   - malformed sequencer, or the header repeated: 400 Bad Request,
//     "invalid_argument";
//   - stale sequencer (f's error wraps ErrStale): 409 Conflict,
//     "stale_sequencer";
//   - any other error from f, or a nil f: 500 Internal Server Error,
//     "internal".
//
// An admitted request's sequencer is available to next through FromContext.
// Note that another holder's request may be admitted after this check and
// before next completes; a resource that needs strict fencing checks and
// writes under one lock of its own instead.
func Middleware(f Checker, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f == nil || next == nil {
			WriteError(w, &RequestError{Status: http.StatusInternalServerError, Code: codeInternal,
				Message: "sequencer middleware is misconfigured: nil checker or handler"})
			return
		}
		s, rerr := FromRequest(r)
		if rerr != nil {
			WriteError(w, rerr)
			return
		}
		if err := f.Check(s); err != nil {
			WriteError(w, CheckError(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)))
	})
}

// RequestError is why a fenced HTTP resource refuses a request: the HTTP
// status, the stable error code and a message, as Middleware answers them
// (WriteError).
type RequestError struct {
	Status  int
	Code    string
	Message string
}

// Error returns the code and the message.
func (e *RequestError) Error() string { return e.Code + ": " + e.Message }

// FromRequest reads the sequencer in r's Header. A request without one
// (or with an empty one) is a 428 "sequencer_required"; a repeated header
// or text that is not a sequencer is a 400 "invalid_argument".
func FromRequest(r *http.Request) (Sequencer, *RequestError) {
	values := r.Header.Values(Header)
	switch {
	case len(values) == 0 || (len(values) == 1 && values[0] == ""):
		return Sequencer{}, &RequestError{Status: http.StatusPreconditionRequired, Code: codeSequencerRequired,
			Message: "this resource is fenced: send the lock's sequencer in the " + Header + " header"}
	case len(values) > 1:
		return Sequencer{}, &RequestError{Status: http.StatusBadRequest, Code: codeInvalidArgument, Message: "more than one " + Header + " header"}
	}
	s, err := Parse(values[0])
	if err != nil {
		return Sequencer{}, &RequestError{Status: http.StatusBadRequest, Code: codeInvalidArgument, Message: err.Error()}
	}
	return s, nil
}

// CheckError classifies a Checker's error as Middleware answers it: one
// wrapping ErrStale is a 409 "stale_sequencer", one wrapping ErrMalformed
// a 400 "invalid_argument", any other (a fence that cannot record its
// marks) a 500 "internal".
func CheckError(err error) *RequestError {
	switch {
	case errors.Is(err, ErrStale):
		return &RequestError{Status: http.StatusConflict, Code: codeStaleSequencer, Message: err.Error()}
	case errors.Is(err, ErrMalformed):
		return &RequestError{Status: http.StatusBadRequest, Code: codeInvalidArgument, Message: err.Error()}
	default:
		return &RequestError{Status: http.StatusInternalServerError, Code: codeInternal, Message: err.Error()}
	}
}

// WriteError answers with e's status and the JSON error body of the
// raftlock API, {"error":{"code":...,"message":...}}.
func WriteError(w http.ResponseWriter, e *RequestError) {
	writeError(w, e.Status, e.Code, e.Message)
}

// FromContext returns the sequencer that Middleware admitted for the request
// whose context is ctx, and whether there is one.
func FromContext(ctx context.Context) (Sequencer, bool) {
	s, ok := ctx.Value(ctxKey{}).(Sequencer)
	return s, ok
}

// errorBody is the JSON error layout of the raftlock API.
type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the inner object of errorBody.
type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers with status and a JSON error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// The status is already sent; a failed write leaves nothing to report to.
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: code, Message: message}})
}
