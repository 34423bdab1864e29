//go:build !linux

package main

import "time"

// monoNow returns the wall clock in nanoseconds: outside Linux there is no
// machine-wide monotonic clock at hand. The checker itself needs Linux
// (iptables, signals); this only keeps the package building elsewhere.
func monoNow() int64 { return time.Now().UnixNano() }
