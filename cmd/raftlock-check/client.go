package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
)

// clientMain runs a client process: the checker starts it with
// "client --config JSON" and talks to it over stdin and stdout.
func clientMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raftlock-check client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	raw := fs.String("config", "", "client configuration (JSON), set by the checker")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var cfg clientConfig
	if err := json.Unmarshal([]byte(*raw), &cfg); err != nil {
		fmt.Fprintf(stderr, "raftlock-check client: --config: %v\n", err)
		return 2
	}
	l := newLink(stdout)
	w, err := newWorkload(cfg, l, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "raftlock-check client: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := l.readLoop(stdin); err != nil {
			fmt.Fprintln(stderr, err)
		}
		cancel()
	}()
	w.run(ctx)
	if w.worker != nil {
		w.worker.stop()
		w.worker.proxy.close()
	}
	return 0
}
