package partition

import (
	"fmt"
	"slices"
	"strings"
)

// State is the life-cycle state of a mirrored partition. The zero value,
// Unknown, is not a state a partition can be in; it is the "from" of the
// event that reports a partition's creation.
type State int8

// The states of docs/design/contract.md §2. Their numeric values are not persisted (the
// record stores names), so they may be reordered.
const (
	Unknown   State = iota
	Preparing       // topic created or found; alignment, resume point and mode being decided
	Mirroring       // fetch -> append loop running
	Paused          // fetch stopped; topic stays read-only
	Stopping        // fetchers removed, open transactions aborted, last mirrored offset recorded
	Stopped         // topic writable; the mirror no longer owns it
	Failed          // error with reason; retried with backoff or waiting for an operator
)

var stateNames = [...]string{
	Unknown:   "UNKNOWN",
	Preparing: "PREPARING",
	Mirroring: "MIRRORING",
	Paused:    "PAUSED",
	Stopping:  "STOPPING",
	Stopped:   "STOPPED",
	Failed:    "FAILED",
}

// States returns every state a partition can be in, in declaration order
// (for example to register one gauge per state).
func States() []State {
	return []State{Preparing, Mirroring, Paused, Stopping, Stopped, Failed}
}

// String returns the state's upper-case name, as the KIP and metrics spell it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Valid reports whether s is one of States().
func (s State) Valid() bool { return s > Unknown && int(s) < len(stateNames) }

// ParseState is the inverse of String for valid states; it accepts any case.
func ParseState(name string) (State, error) {
	for _, s := range States() {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return Unknown, fmt.Errorf("unknown partition state %q (want one of %v)", name, States())
}

// MarshalText encodes the state by name.
func (s State) MarshalText() ([]byte, error) {
	if s != Unknown && !s.Valid() {
		return nil, fmt.Errorf("cannot encode invalid partition state %d", int8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText decodes a state name.
func (s *State) UnmarshalText(b []byte) error {
	if string(b) == stateNames[Unknown] {
		*s = Unknown
		return nil
	}
	v, err := ParseState(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// transitions is the table of docs/design/contract.md §2, except FAILED, whose successors
// depend on the previous state (see CanTransition).
var transitions = map[State][]State{
	Preparing: {Mirroring, Failed},
	Mirroring: {Paused, Stopping, Failed},
	Paused:    {Mirroring, Stopping},
	Stopping:  {Stopped},
	Stopped:   {Preparing},
}

// CanFail reports whether a partition in state s may move to FAILED.
func CanFail(s State) bool { return slices.Contains(transitions[s], Failed) }

// Successors returns the states a partition in state from may move to;
// previous is the state it was in before from, which matters only for
// FAILED (it returns to where it failed).
func Successors(from, previous State) []State {
	if from != Failed {
		return slices.Clone(transitions[from])
	}
	out := []State{Preparing}
	if previous != Preparing && CanFail(previous) {
		out = append(out, previous)
	}
	return append(out, Stopping)
}

// CanTransition reports whether the table allows from -> to for a partition
// whose state before from was previous.
func CanTransition(from, previous, to State) bool {
	return slices.Contains(Successors(from, previous), to)
}

// Mode is how a partition's offsets relate to the source's
// (docs/design/contract.md §1.1-1.2).
type Mode string

const (
	// ModeUndecided: PREPARING has not decided the mode yet.
	ModeUndecided Mode = ""
	// ModePreserve: every record sits at its source offset (the default).
	ModePreserve Mode = "preserve"
	// ModeMap: records are copied exactly but offsets differ; an exact
	// source->destination offset map is kept in the state store.
	ModeMap Mode = "map"
)

// Valid reports whether m is one of the modes above.
func (m Mode) Valid() bool {
	return m == ModeUndecided || m == ModePreserve || m == ModeMap
}

// String returns the mode's name, or "undecided".
func (m Mode) String() string {
	if m == ModeUndecided {
		return "undecided"
	}
	return string(m)
}
