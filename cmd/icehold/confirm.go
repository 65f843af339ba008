package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// terminalKey marks, in a command's context, that stdin and stderr are a
// terminal: a person who can answer a question.
type terminalKey struct{}

// yesFlag adds --yes (-y) to a command that destroys data.
func yesFlag(cmd *cobra.Command, yes *bool) {
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "do not ask for confirmation (scripts: required)")
}

// confirm asks before a command that destroys data: on a terminal a [y/N]
// question on stderr; in a script --yes says yes, and without it the
// command is refused (a usage error naming --yes) before any request.
func confirm(cmd *cobra.Command, yes bool, what string) error {
	if yes {
		return nil
	}
	if on, _ := cmd.Context().Value(terminalKey{}).(bool); !on {
		return usagef(cmd, "%s: pass --yes to confirm (no terminal to ask on)", what)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s.\nGo on? [y/N] ", what)
	line, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("cancelled: nothing changed")
}
