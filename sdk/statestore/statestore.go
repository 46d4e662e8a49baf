// Package statestore defines the contract of kmirror's state stores: a
// versioned key-value store with compare-and-set (CAS), and the key layout
// kmirror uses inside it.
//
// A state store holds everything kmirror must not lose across a crash:
// per-partition state records, offset maps of partitions in map mode, last
// mirrored offsets. Every implementation (the file store embedded in the
// binary, a compacted Kafka topic, etcd, third-party plugins behind gRPC)
// implements [Store] and runs the conformance suite in package storetest.
//
// # Versions and compare-and-set
//
// Every stored value carries a version. Versions are positive and strictly
// increase over the whole history of a key, including across Delete and
// re-create, so a stale expected version can never match again (no ABA).
// Stores usually draw versions from one store-wide counter (etcd's revision,
// a Kafka offset, a file store's counter), so versions of different keys are
// comparable only in that they never repeat for the same key.
//
// Writers use optimistic concurrency: read an [Entry], change its value, and
// Put it back with the version that was read as the expected version. If
// somebody else wrote in between, Put fails with [ErrVersionMismatch] and
// nothing is written; the writer re-reads and decides again. This is how two
// daemons that both believe they own a partition are kept from overwriting
// each other's state.
//
// # Keys
//
// Keys are non-empty UTF-8 strings without NUL bytes, at most [MaxKeyLen]
// bytes, conventionally '/'-separated paths. Use the helpers in this package
// (PartitionKey, OffsetMapKey, ...) rather than formatting keys by hand, so
// that every store, tool and version of kmirror agrees on the layout:
//
//	mirrors/<mirror>/partitions/<topic>/<partition>   partition state record
//	mirrors/<mirror>/offsetmaps/<topic>/<partition>   map-mode offset map (snapshot)
//	mirrors/<mirror>/offsetmaps/<topic>/<partition>/segments/<n>
//	                                                  its journal segments
//	mirrors/<mirror>/leases/<lease>                   a lease (e.g. metadata-sync)
//
// Mirror names match [A-Za-z0-9_-]+ and Kafka topic names match
// [A-Za-z0-9._-]+, so neither contains '/', and a key parses back uniquely.
//
// # Optional interfaces
//
// Besides [Store], a store may implement [Informer] (it describes itself:
// name, protocol version, shared or not), [Pager] (it lists one page at a
// time) and [Leaser] (native leases, e.g. etcd's). Callers go through
// [InfoOf], [ListPage] and [Leases], which fall back to [DefaultInfo], to
// paging over List, and to leases written with compare-and-set
// ([NewCASLeases]), so every Store offers all of it.
//
// # Errors
//
// Implementations return the sentinel errors below, wrapped with %w and a
// message that names the key (and, for plugins, the store), so callers branch
// with errors.Is. A canceled or expired context makes an operation fail with
// an error that wraps ctx.Err(); an operation that was already durably applied
// when the context ended still reports success.
package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors. Implementations wrap them with context (fmt.Errorf("...: %w",
// ErrNotFound)); callers test with errors.Is.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("state store: key not found")
	// ErrVersionMismatch: the key's current version is not the expected one
	// (including "expected absent, but it exists"). Nothing was written.
	ErrVersionMismatch = errors.New("state store: version mismatch (written concurrently by someone else; re-read and retry)")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("state store: closed")
	// ErrLocked: the store is held exclusively by another process or instance.
	ErrLocked = errors.New("state store: locked by another instance")
	// ErrInvalidKey: the key is empty, too long, not UTF-8 or contains NUL.
	ErrInvalidKey = errors.New("state store: invalid key")
	// ErrInvalidVersion: the expected version passed to Put or Delete is
	// not allowed there (negative other than AnyVersion; Absent on Delete).
	ErrInvalidVersion = errors.New("state store: invalid expected version")
	// ErrInvalidArgument: another argument is not allowed: a page limit
	// below 1, an empty or malformed lease holder, a lease TTL that is
	// not positive.
	ErrInvalidArgument = errors.New("state store: invalid argument")
	// ErrLeaseHeld: the lease is held by another holder and has not
	// expired (or was taken by another holder concurrently); retry later.
	ErrLeaseHeld = errors.New("state store: lease held by another holder")
	// ErrLeaseNotHeld: the caller renewed or released a lease it does not
	// hold (it was never taken, was released, or another holder took it
	// after it expired). The caller must stop acting as the holder.
	ErrLeaseNotHeld = errors.New("state store: lease not held by this holder")
)

// Special expected versions for Put and Delete.
const (
	// Absent as the expected version of Put means "create: the key must not
	// exist". It is not valid for Delete.
	Absent int64 = 0
	// AnyVersion makes Put or Delete unconditional.
	AnyVersion int64 = -1
)

// MaxKeyLen is the longest key, in bytes, every store must accept.
const MaxKeyLen = 1024

// Entry is one stored key, its value and its version.
type Entry struct {
	Key   string
	Value []byte
	// Version is > 0 and strictly increases with every write of Key, across
	// Delete and re-create.
	Version int64
}

// Store is a versioned key-value store with compare-and-set. All methods
// are safe for concurrent use. Values passed in and returned are copies:
// a caller may modify them freely afterwards without affecting the store.
type Store interface {
	// Get returns the current entry of key, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)

	// Put writes value under key if the key's current version equals
	// expect: Absent (0) requires that the key does not exist, AnyVersion
	// writes unconditionally, a positive version must match exactly.
	// It returns the new version. On a mismatch it returns an error
	// wrapping ErrVersionMismatch and writes nothing. When Put returns
	// without error the write is durable to the degree the store
	// documents (the file store: fsynced).
	//
	// Of several concurrent Puts with the same expected version, exactly
	// one succeeds.
	Put(ctx context.Context, key string, value []byte, expect int64) (int64, error)

	// Delete removes key if its current version equals expect (a positive
	// version, or AnyVersion). A missing key yields ErrNotFound, a
	// different version ErrVersionMismatch; Absent yields ErrInvalidVersion.
	Delete(ctx context.Context, key string, expect int64) error

	// List returns every entry whose key starts with prefix ("" lists
	// all), sorted by key in byte order. Each entry is consistent by
	// itself; the list as a whole is not a snapshot across keys that are
	// written concurrently.
	List(ctx context.Context, prefix string) ([]Entry, error)

	// Close releases the store. Afterwards every method returns an error
	// wrapping ErrClosed. Close is idempotent.
	Close() error
}

// ValidateKey reports whether key is acceptable to every store: non-empty,
// at most MaxKeyLen bytes, valid UTF-8, without NUL bytes. The error wraps
// ErrInvalidKey.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key %.40q... is %d bytes, longer than %d", ErrInvalidKey, key, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %q contains a NUL byte", ErrInvalidKey, key)
	}
	return nil
}

// ValidatePutVersion checks the expected version of a Put: Absent,
// AnyVersion or positive. The error wraps ErrInvalidVersion.
func ValidatePutVersion(expect int64) error {
	if expect < AnyVersion {
		return fmt.Errorf("%w: %d (use a version read from the store, Absent or AnyVersion)", ErrInvalidVersion, expect)
	}
	return nil
}

// ValidateDeleteVersion checks the expected version of a Delete: AnyVersion
// or positive. The error wraps ErrInvalidVersion.
func ValidateDeleteVersion(expect int64) error {
	if expect == Absent || expect < AnyVersion {
		return fmt.Errorf("%w: %d for delete (use a version read from the store, or AnyVersion)", ErrInvalidVersion, expect)
	}
	return nil
}

// CheckVersion applies the CAS rule of Put: current is the key's version
// (0 when it does not exist), expect the caller's expected version. It
// returns nil if the write may proceed, or an error wrapping
// ErrVersionMismatch that names key and both versions. Stores share it so
// that they agree on the rule and its message.
func CheckVersion(key string, current, expect int64) error {
	switch {
	case expect == AnyVersion:
		return nil
	case expect == current:
		return nil
	case expect == Absent:
		return fmt.Errorf("key %q: expected it not to exist, but it is at version %d: %w", key, current, ErrVersionMismatch)
	case current == 0:
		return fmt.Errorf("key %q: expected version %d, but it does not exist: %w", key, expect, ErrVersionMismatch)
	default:
		return fmt.Errorf("key %q: expected version %d, but it is at version %d: %w", key, expect, current, ErrVersionMismatch)
	}
}

// Key layout. See the package documentation.
const (
	mirrorsRoot   = "mirrors/"
	partitionsDir = "partitions"
	offsetMapsDir = "offsetmaps"
	leasesDir     = "leases"
)

// MirrorPrefix is the prefix of every key that belongs to mirror:
// "mirrors/<mirror>/". Listing it finds all of a mirror's state.
func MirrorPrefix(mirror string) string {
	return mirrorsRoot + mirror + "/"
}

// PartitionsPrefix is the prefix of the partition state records of mirror:
// "mirrors/<mirror>/partitions/".
func PartitionsPrefix(mirror string) string {
	return MirrorPrefix(mirror) + partitionsDir + "/"
}

// TopicPartitionsPrefix is the prefix of the partition state records of one
// topic of mirror: "mirrors/<mirror>/partitions/<topic>/".
func TopicPartitionsPrefix(mirror, topic string) string {
	return PartitionsPrefix(mirror) + topic + "/"
}

// PartitionKey is the key of the state record of one mirrored partition:
// "mirrors/<mirror>/partitions/<topic>/<partition>".
func PartitionKey(mirror, topic string, partition int32) string {
	return TopicPartitionsPrefix(mirror, topic) + strconv.FormatInt(int64(partition), 10)
}

// OffsetMapsPrefix is the prefix of the offset maps of mirror:
// "mirrors/<mirror>/offsetmaps/".
func OffsetMapsPrefix(mirror string) string {
	return MirrorPrefix(mirror) + offsetMapsDir + "/"
}

// OffsetMapKey is the key of the source→destination offset map of a
// partition in map mode: "mirrors/<mirror>/offsetmaps/<topic>/<partition>".
// It is separate from the partition record so that state transitions do not
// rewrite a large map and map updates do not rewrite the state.
func OffsetMapKey(mirror, topic string, partition int32) string {
	return OffsetMapsPrefix(mirror) + topic + "/" + strconv.FormatInt(int64(partition), 10)
}

// OffsetMapSegmentsPrefix is the prefix of the journal segments of a
// partition's offset map:
// "mirrors/<mirror>/offsetmaps/<topic>/<partition>/segments/". The map is
// the value under OffsetMapKey (a snapshot) followed by these segments;
// package core/offsetmap owns both formats.
func OffsetMapSegmentsPrefix(mirror, topic string, partition int32) string {
	return OffsetMapKey(mirror, topic, partition) + "/segments/"
}

// OffsetMapSegmentKey is the key of segment n (>= 0) of a partition's
// offset map: OffsetMapSegmentsPrefix followed by n in 20 decimal digits,
// so that keys sort as their numbers do.
func OffsetMapSegmentKey(mirror, topic string, partition int32, n int64) string {
	return fmt.Sprintf("%s%020d", OffsetMapSegmentsPrefix(mirror, topic, partition), n)
}

// LeaseKey is the key of one of mirror's leases:
// "mirrors/<mirror>/leases/<lease>". A lease names the one daemon that does
// a piece of a mirror's work when several daemons share a state store; its
// value is the holder's record, written and renewed with compare-and-set.
// kmirror uses the lease "metadata-sync" (the daemon that runs the mirror's
// topic, config, group and ACL sync loops).
func LeaseKey(mirror, lease string) string {
	return MirrorPrefix(mirror) + leasesDir + "/" + lease
}

// GroupHistoryKey is the key of mirror's group offset history:
// "mirrors/<mirror>/groups/history", the last source offset seen per group
// partition, so that a restarted daemon still tells a source that moved a
// group backwards from a destination that is merely ahead.
func GroupHistoryKey(mirror string) string {
	return MirrorPrefix(mirror) + "groups/history"
}

// ControlKey is the key of mirror's operator record:
// "mirrors/<mirror>/control". It holds what operators asked of the mirror at
// run time (topics paused or stopped, for example by a failover), so that
// the request outlives a restart of the daemon.
func ControlKey(mirror string) string {
	return MirrorPrefix(mirror) + "control"
}

// ParsePartitionKey is the inverse of PartitionKey. The error wraps
// ErrInvalidKey.
func ParsePartitionKey(key string) (mirror, topic string, partition int32, err error) {
	return parseKey(key, partitionsDir)
}

// ParseOffsetMapKey is the inverse of OffsetMapKey. The error wraps
// ErrInvalidKey.
func ParseOffsetMapKey(key string) (mirror, topic string, partition int32, err error) {
	return parseKey(key, offsetMapsDir)
}

func parseKey(key, dir string) (string, string, int32, error) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || parts[0]+"/" != mirrorsRoot || parts[2] != dir || parts[1] == "" || parts[3] == "" {
		return "", "", 0, fmt.Errorf("%w: %q is not of the form %s<mirror>/%s/<topic>/<partition>", ErrInvalidKey, key, mirrorsRoot, dir)
	}
	p, err := strconv.ParseInt(parts[4], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != parts[4] {
		return "", "", 0, fmt.Errorf("%w: %q: partition %q is not a non-negative decimal int32", ErrInvalidKey, key, parts[4])
	}
	return parts[1], parts[3], int32(p), nil
}
