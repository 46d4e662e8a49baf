package statestore

import (
	"errors"
	"fmt"
	"regexp"
)

// Protocol version of the state-store plugin contract. [ProtocolMajor]
// travels in the plugin handshake and must match exactly; [ProtocolMinor]
// and what a store offers travel in [Info], which the host reads once when
// it opens (or launches) the store. Minor versions only add: a host asks
// nothing a store's Info does not announce.
//
// Minor 0: Get, Put, Delete, List, paged List ([Pager]), leases ([Leaser]),
// Info.
const (
	ProtocolMajor = 1
	ProtocolMinor = 0
)

// ErrIncompatible: a store speaks another major protocol version or
// announces an invalid Info; the host does not use it.
var ErrIncompatible = errors.New("state store: incompatible store")

// Info describes a store. It does not change over the store's life and is
// available after Close.
type Info struct {
	// Name identifies the store in logs and metrics
	// (plugin.statestore.<name>): lower-case letters, digits, '-' and '_',
	// starting with a letter or digit.
	Name string
	// Version is the store's own version, free-form, for logs.
	Version string
	// ProtocolMajor and ProtocolMinor are the protocol version the store
	// implements: set them to this package's constants.
	ProtocolMajor int
	ProtocolMinor int
	// Shared reports whether several kmirror daemons may use the store at
	// the same time (etcd, a compacted Kafka topic). A store that is not
	// shared (the file store locks its directory) is used by one daemon at
	// a time, so its leases are always that daemon's; a host still takes
	// them, which costs one write per renewal.
	Shared bool
	// NativeLeases reports whether the store implements leases natively
	// (for example with etcd leases, expired by etcd) rather than through
	// the generic compare-and-set leases of [NewCASLeases]. For
	// information: [Leases] works either way. A store implementing
	// [Leaser] itself sets it; the RPC client reports the plugin's.
	NativeLeases bool
}

// Informer is implemented by stores that describe themselves. It is
// optional, so that stores written before Info existed still work: [InfoOf]
// gives them [DefaultInfo].
type Informer interface {
	// Info describes the store. It does not change over the store's life
	// and works after Close.
	Info() Info
}

// DefaultInfo is the Info of a store that does not implement [Informer]:
// named "store", of this package's protocol version, and assumed Shared
// (the safe assumption: a host then takes leases, which works on every
// store).
func DefaultInfo() Info {
	return Info{Name: "store", ProtocolMajor: ProtocolMajor, ProtocolMinor: ProtocolMinor, Shared: true}
}

// InfoOf returns s's Info: s.Info() if s implements [Informer], else
// [DefaultInfo] with NativeLeases set when s implements [Leaser].
func InfoOf(s Store) Info {
	if i, ok := s.(Informer); ok {
		return i.Info()
	}
	info := DefaultInfo()
	_, info.NativeLeases = s.(Leaser)
	return info
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Validate checks what a host relies on: a valid name and ProtocolMajor
// equal to this package's. The error wraps ErrIncompatible.
func (i Info) Validate() error {
	switch {
	case !nameRE.MatchString(i.Name):
		return fmt.Errorf("%w: name %q: use lower-case letters, digits, '-' and '_', starting with a letter or digit", ErrIncompatible, i.Name)
	case i.ProtocolMajor != ProtocolMajor:
		return fmt.Errorf("%w: store %q speaks statestore protocol %d.%d, this host speaks %d.x", ErrIncompatible, i.Name, i.ProtocolMajor, i.ProtocolMinor, ProtocolMajor)
	case i.ProtocolMinor < 0:
		return fmt.Errorf("%w: store %q: negative protocol minor version %d", ErrIncompatible, i.Name, i.ProtocolMinor)
	}
	return nil
}
