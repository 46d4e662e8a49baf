// Package cli is what every kmirror command shares on the command line:
// the exit codes and the errors that carry them, the command tree's
// execution (github.com/spf13/cobra: single-dash compatibility, suggestions,
// notes for Kafka-tool flags, errors in the output format), the --config and
// --set flags that load a configuration, the -o output flag, and the small
// renderings of table cells the commands print alike.
package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Exit codes, stable and documented in docs/cli.md.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed (invalid config, runtime error)
	ExitUsage   = 2 // the command line itself is wrong
	// The admin commands map the admin API's error codes to these, so that
	// a script can branch on the kind of refusal (docs/cli.md, "Exit
	// codes").
	ExitNotFound     = 3   // no such mirror, or a topic pattern that matches nothing
	ExitConflict     = 4   // the mirror's state does not allow the operation now
	ExitUnauthorized = 5   // the admin API refused the token or client certificate
	ExitUnavailable  = 6   // a cluster, the state store or the daemon cannot answer now, or timed out: retry
	ExitInterrupted  = 130 // Ctrl-C while waiting, before anything was changed (128+SIGINT)
)

// Error is a command's failure with its exit code. An Error whose Err is
// nil has said everything already (on stdout or stderr) and only sets the
// exit code.
type Error struct {
	Code int
	Err  error
	// APICode is the admin API's error code (admin.Code*), for an error
	// the API reported; Hint is what it said to do. Both are printed after
	// the message, and are fields of the structured error document.
	APICode string
	Hint    string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Usagef is a wrong command line (ExitUsage).
func Usagef(format string, a ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// Failf is a command that ran and failed (ExitFailure).
func Failf(format string, a ...any) error {
	return &Error{Code: ExitFailure, Err: fmt.Errorf(format, a...)}
}

// Fail is err as a failure of the command (ExitFailure); nil stays nil.
func Fail(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: ExitFailure, Err: err}
}

// Code is the exit code alone, for a command that printed its own
// messages: nil for ExitOK.
func Code(code int) error {
	if code == ExitOK {
		return nil
	}
	return &Error{Code: code}
}

// exitCode is err's exit code: an *Error's own, ExitUsage for any other
// error (those come from the command line parser).
func exitCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ExitUsage
}

// StringList is a repeatable string flag (--set k=v --set k2=v2).
type StringList []string

// String implements pflag.Value.
func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set implements pflag.Value: each use appends one value.
func (s *StringList) Set(v string) error { *s = append(*s, v); return nil }

// Type implements pflag.Value.
func (s *StringList) Type() string { return "VALUE" }

// RegexList is a flag of regexes: comma-separated, repeatable (--topics
// a,b --topics c).
type RegexList []string

// String implements pflag.Value.
func (l *RegexList) String() string { return strings.Join(*l, ",") }

// Set implements pflag.Value.
func (l *RegexList) Set(v string) error {
	for i, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			return fmt.Errorf("entry %d of %q is empty (remove the extra comma)", i+1, v)
		}
		*l = append(*l, p)
	}
	return nil
}

// Type implements pflag.Value.
func (l *RegexList) Type() string { return "REGEX,..." }

// OrDash is s, or "-" for an empty table cell.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Num is an offset or a lag for a table cell: "-" when unknown (negative).
func Num(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}
