package compat

import (
	"testing"

	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/e2e/kmirrortest"
)

// daemon is one `kmirror run` process of a test (e2e/kmirrortest); the
// test's cleanup stops it.
type daemon struct{ p *kmirrortest.Process }

// startKmirror runs `kmirror run` on cfg, a configuration without the
// http.address and admin.address keys, which it adds.
func startKmirror(t testing.TB, cfg string) *daemon {
	t.Helper()
	return &daemon{kmirrortest.Start(t, kmirrortest.Options{Config: func(string) string { return cfg }})}
}

// running reports whether the process is still running.
func (d *daemon) running() bool { return d.p.Running() }

func (d *daemon) log() string { return d.p.Log() }

// describe reads /v1/describe; ok is false while the daemon does not answer.
func (d *daemon) describe() (admin.Status, bool) { return d.p.Describe() }

var tail = kmirrortest.Tail
