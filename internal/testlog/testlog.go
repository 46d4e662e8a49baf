// Package testlog is a log sink for tests: loggers write to it from their
// goroutines while the test reads what was written.
package testlog

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writers and readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Messages returns the JSON log lines (hclog's JSON format) whose
// "@message" is msg, decoded.
func (s *Buffer) Messages(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["@message"] == msg {
			out = append(out, m)
		}
	}
	return out
}
