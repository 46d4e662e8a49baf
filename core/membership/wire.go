package membership

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The bytes a member puts in JoinGroup (its metadata) and the leader in
// SyncGroup (the assignment) are one encoding byte followed by a JSON
// document compressed with DEFLATE. The JSON carries its own version ("v");
// fields are only ever added, so an older member reads a newer document.
// An incompatible change gets a new protocol name (ProtocolName), which the
// broker negotiates: every member lists the protocols it speaks.
const (
	// encodingDeflateJSON is the only encoding byte so far.
	encodingDeflateJSON = 1
	// wireVersion is the version of the JSON documents this code writes.
	wireVersion = 1
	// maxDecoded bounds a decoded document (a corrupt or hostile one must
	// not exhaust memory): far above 10,000 items' worth.
	maxDecoded = 64 << 20
)

// joinMetadata is a member's JoinGroup metadata.
type joinMetadata struct {
	V int `json:"v"`
	Metadata
	// Owned are the items the member holds as it joins; OwnedGeneration
	// is the generation that gave them.
	Owned           []string `json:"owned,omitempty"`
	OwnedGeneration int32    `json:"owned_gen,omitempty"`
}

// groupAssignment is what the leader sends every member in SyncGroup: the
// whole generation (so that any member can answer "who owns what"), the same
// bytes for all.
type groupAssignment struct {
	V          int          `json:"v"`
	Generation int32        `json:"gen"`
	Leader     string       `json:"leader"`
	Members    []MemberInfo `json:"members"`
	Moving     []string     `json:"moving,omitempty"`
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(encodingDeflateJSON)
	zw, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := json.NewEncoder(zw).Encode(v); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var errEmpty = errors.New("empty")

func decode(b []byte, v any) error {
	if len(b) == 0 {
		return errEmpty
	}
	if b[0] != encodingDeflateJSON {
		return fmt.Errorf("unknown encoding %d (a newer kmirror?)", b[0])
	}
	zr := flate.NewReader(bytes.NewReader(b[1:]))
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return fmt.Errorf("decompressing: %w", err)
	}
	if len(raw) > maxDecoded {
		return fmt.Errorf("more than %d bytes decompressed", maxDecoded)
	}
	return json.Unmarshal(raw, v)
}
