// Package testlog is a log sink for tests: loggers write to it from their
// goroutines while the test reads what was written.
package testlog

import (
	"bytes"
	"encoding/json"
	"regexp"
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

// Lines returns every JSON log line (hclog's JSON format) decoded; lines
// that are not JSON are left out.
func (s *Buffer) Lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Messages returns the JSON log lines (hclog's JSON format) whose
// "@message" is msg, decoded.
func (s *Buffer) Messages(msg string) []map[string]any {
	var out []map[string]any
	for _, m := range s.Lines() {
		if m["@message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// aPartition matches a message about one partition ("partitions" is about
// several).
var aPartition = regexp.MustCompile(`\bpartition\b`)

// AboutPartition returns the JSON log lines about one partition (lines with
// a topic or partition field, or whose message says "partition") and,
// of those, the lines whose mirror, topic and partition fields are not
// mirror, topic and partition.
func (s *Buffer) AboutPartition(mirror, topic string, partition int32) (about, wrong []map[string]any) {
	for _, l := range s.Lines() {
		msg, _ := l["@message"].(string)
		_, hasTopic := l["topic"]
		_, hasPart := l["partition"]
		if !hasTopic && !hasPart && !aPartition.MatchString(msg) {
			continue
		}
		about = append(about, l)
		if l["mirror"] != mirror || l["topic"] != topic || l["partition"] != float64(partition) {
			wrong = append(wrong, l)
		}
	}
	return about, wrong
}
