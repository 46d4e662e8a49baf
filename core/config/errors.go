package config

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by *Errors, so callers can tell an invalid
// configuration (exit code for "bad config", keep the running config on
// reload) from an I/O failure with errors.Is.
var ErrInvalid = errors.New("invalid configuration")

// FieldError is one problem with one key.
type FieldError struct {
	// Path names the key: "mirror.num.replica.fetchers",
	// "destination.sasl.mechanism", "mirrors[dc1-to-dc2].mirror.topics.include",
	// "mirrors[2].name" (by position when the mirror has no usable name),
	// an environment variable name, or "--set" for a malformed flag.
	Path string
	// Reason says what is wrong and, where it helps, what to do. It never
	// contains a secret value.
	Reason string
}

func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Errors is every problem found in one configuration, in a stable order.
type Errors struct {
	List []FieldError
}

// Error lists all problems, one per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, f := range e.List {
		lines[i] = f.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *Errors) Unwrap() error { return ErrInvalid }

// Has reports whether some problem has this path and a reason containing
// substr (a convenience for callers and tests).
func (e *Errors) Has(path, substr string) bool {
	for _, f := range e.List {
		if f.Path == path && strings.Contains(f.Reason, substr) {
			return true
		}
	}
	return false
}

// MaxErrors caps the problems one load lists. A file with thousands of
// mistakes (a wrong file, a generated one gone wrong) gets the first
// MaxErrors and a last line counting the rest, instead of megabytes of
// messages and the time to word them.
const MaxErrors = 100

// collector gathers FieldErrors while loading, up to MaxErrors.
type collector struct {
	list    []FieldError
	dropped int
}

func (c *collector) add(path, reason string) {
	if c.full() {
		c.dropped++
		return
	}
	c.list = append(c.list, FieldError{Path: path, Reason: reason})
}

// full reports whether further problems are only counted, so that a
// caller can skip wording them.
func (c *collector) full() bool { return len(c.list) >= MaxErrors }

func (c *collector) err() error {
	if len(c.list) == 0 {
		return nil
	}
	list := c.list
	if c.dropped > 0 {
		list = append(list[:len(list):len(list)], FieldError{Reason: fmt.Sprintf("… and %d more problems not listed (only the first %d are); fix these and validate again", c.dropped, MaxErrors)})
	}
	return &Errors{List: list}
}
