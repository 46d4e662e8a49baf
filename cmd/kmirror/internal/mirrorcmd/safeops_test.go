package mirrorcmd

import (
	"testing"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/adminclient"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// TestETAFollowsTheRateAtWhichTheLagFalls: the ETA is the lag left at the
// rate it fell; "?" while it does not fall, "0s" at zero.
func TestETAFollowsTheRateAtWhichTheLagFalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		was, now int64
		elapsed  time.Duration
		want     string
	}{
		{1000, 500, 5 * time.Second, "5s"},
		{1000, 999, time.Second, "16m39s"},
		{300, 100, 2 * time.Second, "1s"},
		{100, 100, time.Second, "?"},
		{100, 200, time.Second, "?"},
		{100, 50, 0, "?"},
		{100, 0, time.Second, "0s"},
	} {
		if got := eta(tc.was, tc.now, tc.elapsed); got != tc.want {
			t.Errorf("eta(%d → %d in %s) = %s, want %s", tc.was, tc.now, tc.elapsed, got, tc.want)
		}
	}
}

// TestEveryAPICodeHasItsExitCode: each code of the admin API maps to the
// exit code docs/cli.md documents; a daemon that sends no code is mapped by
// its HTTP status.
func TestEveryAPICodeHasItsExitCode(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{
		admin.CodeInvalidRequest:   cli.ExitUsage,
		admin.CodeUnauthorized:     cli.ExitUnauthorized,
		admin.CodeNoSuchMirror:     cli.ExitNotFound,
		admin.CodeNoSuchRoute:      cli.ExitFailure,
		admin.CodeMethodNotAllowed: cli.ExitFailure,
		admin.CodeConflict:         cli.ExitConflict,
		admin.CodeNoMatchingTopics: cli.ExitNotFound,
		admin.CodeKafkaRefused:     cli.ExitFailure,
		admin.CodeUnavailable:      cli.ExitUnavailable,
		admin.CodeTimeout:          cli.ExitUnavailable,
		admin.CodeInternal:         cli.ExitFailure,
	} {
		if got := exitCodeOf(&adminclient.Error{Code: code}); got != want {
			t.Errorf("%s: exit %d, want %d", code, got, want)
		}
	}
	for status, want := range map[int]int{400: cli.ExitUsage, 401: cli.ExitUnauthorized, 404: cli.ExitNotFound, 409: cli.ExitConflict, 422: cli.ExitNotFound, 500: cli.ExitFailure, 503: cli.ExitUnavailable, 504: cli.ExitUnavailable} {
		if got := exitCodeOf(&adminclient.Error{Status: status}); got != want {
			t.Errorf("HTTP %d without a code: exit %d, want %d", status, got, want)
		}
	}
}
