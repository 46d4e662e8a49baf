package admin

import (
	"net"
	"sync"
	"time"
)

// Failed authentications are limited per client address: after
// AuthFailuresMax failures within AuthFailureWindow, the address is
// answered 429 (without its credentials being looked at) until the window
// that began with its first counted failure ends. A success does not reset
// the count: a caller that guesses keeps paying for its failures.
const (
	AuthFailuresMax   = 10
	AuthFailureWindow = time.Minute
	// authLimitAddresses bounds the addresses remembered; the oldest
	// window is forgotten first.
	authLimitAddresses = 10000
)

// authLimiter counts failed authentications per client address.
type authLimiter struct {
	max   int // failures allowed per window; <= 0: no limit
	mu    sync.Mutex
	now   func() time.Time
	fails map[string]*authFailures
}

type authFailures struct {
	since time.Time // start of the window
	n     int
}

// newAuthLimiter allows max failures per address and window (0: the
// default; negative: no limit).
func newAuthLimiter(max int) *authLimiter {
	if max == 0 {
		max = AuthFailuresMax
	}
	return &authLimiter{max: max, now: time.Now, fails: map[string]*authFailures{}}
}

// host is the address part of a remote address ("10.0.0.1:4321" →
// "10.0.0.1").
func host(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// blocked reports whether remote has failed too often; retry is how long
// until its window ends.
func (l *authLimiter) blocked(remote string) (bool, time.Duration) {
	if l.max < 0 {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.fails[host(remote)]
	if f == nil {
		return false, 0
	}
	left := AuthFailureWindow - l.now().Sub(f.since)
	if left <= 0 {
		delete(l.fails, host(remote))
		return false, 0
	}
	return f.n >= l.max, left
}

// failed counts one failed authentication of remote.
func (l *authLimiter) failed(remote string) {
	if l.max < 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now, h := l.now(), host(remote)
	f := l.fails[h]
	if f == nil || now.Sub(f.since) >= AuthFailureWindow {
		if f == nil && len(l.fails) >= authLimitAddresses {
			l.forgetOldest(now)
		}
		f = &authFailures{since: now}
		l.fails[h] = f
	}
	f.n++
}

// forgetOldest drops ended windows, or else the oldest one.
func (l *authLimiter) forgetOldest(now time.Time) {
	var oldest string
	var at time.Time
	for h, f := range l.fails {
		if now.Sub(f.since) >= AuthFailureWindow {
			delete(l.fails, h)
			continue
		}
		if oldest == "" || f.since.Before(at) {
			oldest, at = h, f.since
		}
	}
	if len(l.fails) >= authLimitAddresses && oldest != "" {
		delete(l.fails, oldest)
	}
}

// forbiddenError is a verified client certificate whose subject the allow
// list (admin.tls.client.subjects) does not name.
type forbiddenError struct{ subject string }

func (e *forbiddenError) Error() string {
	return "client certificate subject " + e.subject + " is not allowed by admin.tls.client.subjects"
}

// limitedLog logs a call refused for too many failed authentications, at
// most once per address and window (the caller is busy failing).
func (s *Server) limitedLog(args []any, outcome string) {
	s.limitLogMu.Lock()
	defer s.limitLogMu.Unlock()
	now := time.Now()
	if now.Sub(s.limitLogged) < AuthFailureWindow {
		s.limitSuppressed++
		return
	}
	if s.limitSuppressed > 0 {
		args = append(args, "refused_since_last_line", s.limitSuppressed)
	}
	s.limitLogged, s.limitSuppressed = now, 0
	s.log.Warn("admin call refused", append(args, "outcome", outcome)...)
}
