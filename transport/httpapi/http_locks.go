package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/raftlock/raftlock/api"
)

// writeLocksAnswer writes an answer of many locks (a listing page, a
// prefix watch's answer: api.LocksReply's JSON) as it encodes it, one lock
// at a time through a 32 KiB buffer, instead of building the whole
// answer first: what it holds beyond the locks is one lock's JSON and
// the buffer (issue 40: a 40 MiB answer was encoded whole, in a buffer
// of its size, for every request at once). Without a Content-Length the
// answer is chunked (HTTP/1.1) or framed (HTTP/2). An error writing
// means the client went: the rest is dropped.
func writeLocksAnswer(w http.ResponseWriter, locks []api.LockState, next string, reset bool, index uint64) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["X-Content-Type-Options"] = hdrNosniff
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"locks":[`)
	for i, l := range locks {
		data, err := json.Marshal(api.NewLockReply(l))
		if err != nil {
			// A lock state always encodes; cut the answer short rather
			// than send half a lock (the client fails to decode it).
			return
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(data); err != nil {
			return
		}
	}
	_, _ = bw.WriteString(`],"next":`)
	data, _ := json.Marshal(next)
	_, _ = bw.Write(data)
	if reset {
		_, _ = bw.WriteString(`,"reset":true`)
	}
	if index != 0 {
		_, _ = bw.WriteString(`,"index":` + strconv.FormatUint(index, 10))
	}
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
}
