package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Restart runs the restart command template for member id ("{id}" is
// replaced) with sh -c and returns the PID printed on its last output line.
// The command is expected to start the member in the background with its
// output redirected; pipes it leaves open are cut 2 s after it exits.
func Restart(ctx context.Context, template, id string) (int, error) {
	cmdline := strings.ReplaceAll(template, "{id}", id)
	cmd := exec.CommandContext(ctx, "sh", "-c", cmdline)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("restart %s: %q: %w", id, cmdline, err)
	}
	lines := strings.Fields(out.String())
	if len(lines) == 0 {
		return 0, fmt.Errorf("restart %s: %q printed no PID", id, cmdline)
	}
	pid, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("restart %s: %q: last output %q is not a PID", id, cmdline, lines[len(lines)-1])
	}
	return pid, nil
}
