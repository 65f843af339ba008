// Command icehold is the operator CLI and the local all-in-one server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: 0, 1 for a
// failure, 2 for a command line that does not parse (as flag packages and
// most CLIs do).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := execute(ctx, args, stdout, stderr)
	if err == nil {
		return 0
	}
	if wantsJSON(args) {
		_ = writeJSON(stderr, errorJSON(err))
	} else {
		fmt.Fprintln(stderr, "icehold:", err)
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}
