// Package rpcerr carries the SDK's typed errors across a plugin's gRPC
// connection, so that errors.Is works on the host for every sentinel a
// plugin returned.
//
// The plugin side turns an error into a gRPC status whose message is the
// error's text and whose details hold one google.rpc.ErrorInfo per sentinel
// the error matches (Reason is the sentinel's name in its kind's table,
// Domain the kind's protocol, e.g. "kmirror.plugin.statestore.v1"). The host
// side turns such a status back into an error with the same text that
// matches the same sentinels. A canceled or expired context travels as gRPC's
// own codes and comes back wrapping context.Canceled or
// context.DeadlineExceeded. An error that matches no sentinel keeps its text
// and becomes an untyped error on the host.
package rpcerr

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel names one typed error of a plugin kind.
type Sentinel struct {
	// Name is the stable wire name (for example "NOT_FOUND"). Never reuse
	// or rename one: it is part of the protocol.
	Name string
	// Err is the Go sentinel the name stands for.
	Err error
	// Code is the gRPC code sent with it (codes.Unknown if zero).
	Code codes.Code
}

// Table is the set of sentinels of one plugin kind.
type Table struct {
	domain    string
	sentinels []Sentinel
}

// NewTable returns the table of one kind's sentinels; domain is the kind's
// protocol name, e.g. "kmirror.plugin.statestore.v1".
func NewTable(domain string, sentinels ...Sentinel) *Table {
	return &Table{domain: domain, sentinels: sentinels}
}

// ToStatus is the plugin side: it returns err as a gRPC status error that
// FromStatus turns back into an error matching the same sentinels. nil stays
// nil.
func (t *Table) ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !t.matchesAny(err) {
		// Already a status (from a nested call); keep it.
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	var infos []*errdetails.ErrorInfo
	for _, s := range t.sentinels {
		if errors.Is(err, s.Err) {
			if code == codes.Unknown && s.Code != codes.OK {
				code = s.Code
			}
			infos = append(infos, &errdetails.ErrorInfo{Reason: s.Name, Domain: t.domain})
		}
	}
	st := status.New(code, err.Error())
	for _, info := range infos {
		if withInfo, derr := st.WithDetails(info); derr == nil {
			st = withInfo
		}
	}
	return st.Err()
}

// FromStatus is the host side: it turns a status error made by ToStatus
// back into an error with the same text that matches the same sentinels
// (and context.Canceled / context.DeadlineExceeded for those codes). An
// error that is not a status is returned as it is; nil stays nil.
func (t *Table) FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	re := &remoteError{msg: st.Message()}
	switch st.Code() {
	case codes.Canceled:
		re.matches = append(re.matches, context.Canceled)
	case codes.DeadlineExceeded:
		re.matches = append(re.matches, context.DeadlineExceeded)
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != t.domain {
			continue
		}
		for _, s := range t.sentinels {
			if s.Name == info.GetReason() {
				re.matches = append(re.matches, s.Err)
			}
		}
	}
	if re.msg == "" {
		re.msg = st.Code().String()
	}
	return re
}

// deadlineSlack: a call that fails this close to its deadline failed
// because of it. The plugin's side learns the deadline as "time left" and so
// ends the call a moment before the host's own timer fires; the host may
// read that end (a reset stream, an internal error) before its context is
// done.
const deadlineSlack = 100 * time.Millisecond

// CtxErr is the host's reason for a call under ctx to have ended: ctx.Err(),
// or context.DeadlineExceeded when the deadline is less than deadlineSlack
// away; nil otherwise.
func CtxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < deadlineSlack {
		return context.DeadlineExceeded
	}
	return nil
}

// FromCall is FromStatus for the error of a call made under ctx: when
// ctx ended (CtxErr), the error also matches ctx's error, whatever the
// transport made of it.
func (t *Table) FromCall(ctx context.Context, err error) error {
	back := t.FromStatus(err)
	cerr := CtxErr(ctx)
	if back == nil || cerr == nil || errors.Is(back, cerr) {
		return back
	}
	if re, ok := back.(*remoteError); ok {
		return &remoteError{msg: re.msg, matches: append(append([]error(nil), re.matches...), cerr)}
	}
	return &remoteError{msg: back.Error(), matches: []error{back, cerr}}
}

func (t *Table) matchesAny(err error) bool {
	for _, s := range t.sentinels {
		if errors.Is(err, s.Err) {
			return true
		}
	}
	return false
}

// remoteError is an error returned by a plugin: its text, and the sentinels
// it matched on the plugin's side.
type remoteError struct {
	msg     string
	matches []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.matches }
