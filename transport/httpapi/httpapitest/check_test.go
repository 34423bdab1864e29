package httpapitest_test

import (
	"github.com/raftlock/raftlock/transport/httpapi"
	"github.com/raftlock/raftlock/transport/httpapi/httpapitest"
)

// The fake serves the whole of httpapi.Service.
var _ httpapi.Service = (*httpapitest.Fake)(nil)
