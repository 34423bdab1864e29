package api

import "testing"

func TestStatusOf(t *testing.T) {
	for code, status := range map[Code]int{
		CodeInvalidArgument: 400, CodeSessionNotFound: 404, CodeLockBusy: 409,
		CodeNotHolder: 409, CodeWaitTimeout: 408, CodeNoLeader: 503,
		CodeUnknownOutcome: 503, CodeTooLarge: 413, CodeInternal: 500,
		CodeNotFound: 404, CodeMethodNotAllowed: 405, CodeResourceExhausted: 429, "something_new": 500,
		CodeUnauthenticated: 401, CodePermissionDenied: 403,
	} {
		if got := StatusOf(code); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
	}
}
