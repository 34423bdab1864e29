package bufpool

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// ReadAll reads what io.ReadAll reads, appended to the buffer it is given,
// and returns the reader's error but io.EOF.
func TestReadAllReadsWhatIOReadAllReads(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 1024, 70_000} {
		data := bytes.Repeat([]byte("x"), n)
		buf := Get()
		got, err := ReadAll(iotest.HalfReader(bytes.NewReader(data)), append(*buf, "pre"...))
		if err != nil || !bytes.Equal(got, append([]byte("pre"), data...)) {
			t.Fatalf("n=%d: got %d bytes, %v", n, len(got), err)
		}
		*buf = got
		Put(buf)
	}
	boom := errors.New("boom")
	if _, err := ReadAll(iotest.ErrReader(boom), nil); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if _, err := ReadAll(io.LimitReader(bytes.NewReader(nil), 0), nil); err != nil {
		t.Fatalf("error %v at EOF, want nil", err)
	}
}

// Put keeps a buffer empty, and keeps none that grew past 16 KiB.
func TestPutEmptiesAndDropsLargeBuffers(t *testing.T) {
	b := Get()
	*b = append(*b, "data"...)
	Put(b)
	if len(*b) != 0 {
		t.Fatalf("a returned buffer holds %d bytes, want 0", len(*b))
	}
	big := make([]byte, 0, maxPooled+1)
	Put(&big) // dropped: nothing to check but that it does not panic
}
