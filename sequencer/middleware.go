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
			writeError(w, http.StatusInternalServerError, codeInternal, "sequencer middleware is misconfigured: nil checker or handler")
			return
		}
		values := r.Header.Values(Header)
		switch {
		case len(values) == 0 || (len(values) == 1 && values[0] == ""):
			writeError(w, http.StatusPreconditionRequired, codeSequencerRequired, "this resource is fenced: send the lock's sequencer in the "+Header+" header")
			return
		case len(values) > 1:
			writeError(w, http.StatusBadRequest, codeInvalidArgument, "more than one "+Header+" header")
			return
		}
		s, err := Parse(values[0])
		if err != nil {
			writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
			return
		}
		if err := f.Check(s); err != nil {
			switch {
			case errors.Is(err, ErrStale):
				writeError(w, http.StatusConflict, codeStaleSequencer, err.Error())
			case errors.Is(err, ErrMalformed):
				writeError(w, http.StatusBadRequest, codeInvalidArgument, err.Error())
			default:
				writeError(w, http.StatusInternalServerError, codeInternal, err.Error())
			}
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, s)))
	})
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
