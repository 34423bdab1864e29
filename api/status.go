package api

// StatusOf maps an error code onto its HTTP status (API.md): the one
// place the mapping is written, for the server, the peer port's bootstrap
// probe and the tests. The statuses are numbers, so that api does not
// link net/http.
func StatusOf(code Code) int {
	switch code {
	case CodeInvalidArgument:
		return 400 // Bad Request
	case CodeSessionNotFound, CodeNotFound:
		return 404 // Not Found
	case CodeLockBusy, CodeNotHolder, CodeWaitCancelled:
		return 409 // Conflict
	case CodeWaitTimeout:
		return 408 // Request Timeout
	case CodeNoLeader, CodeUnknownOutcome:
		return 503 // Service Unavailable
	case CodeTooLarge:
		return 413 // Content Too Large
	case CodeResourceExhausted:
		return 429 // Too Many Requests
	case CodeMethodNotAllowed:
		return 405 // Method Not Allowed
	case CodeUnauthenticated:
		return 401 // Unauthorized
	case CodePermissionDenied:
		return 403 // Forbidden
	default:
		return 500 // Internal Server Error
	}
}
