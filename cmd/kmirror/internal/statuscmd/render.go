// Package statuscmd is `kmirror status [--watch]`: the running daemon's
// live status (GET /v1/live on http.address, the status page's data) as
// text — per mirror the partitions per state, total and maximum lag,
// bytes/s and records/s, FAILED partitions with their reasons first, and
// the partitions still catching up with a progress bar and an estimate.
// On a terminal it uses colour and redraws in place with --watch; piped,
// it prints plain text, one snapshot after another.
package statuscmd

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/livestatus"
)

// Style is how Render draws: on a terminal (colour, block bars) or not.
type Style struct {
	Terminal bool
	// Width is the line width to fit (0: 100).
	Width int
}

const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

// paint wraps s in an ANSI colour on a terminal.
func (s Style) paint(colour, text string) string {
	if !s.Terminal {
		return text
	}
	return colour + text + reset
}

// Render writes live as text.
func Render(w io.Writer, live livestatus.Live, s Style) {
	if s.Width <= 0 {
		s.Width = 100
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kmirror status at %s", live.GeneratedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	if !live.SampledAt.IsZero() {
		fmt.Fprintf(&b, " (rates as of %s, sampled every %s)", live.SampledAt.UTC().Format("15:04:05"), fmtSeconds(live.IntervalSeconds))
	}
	b.WriteString("\n")
	if len(live.Mirrors) == 0 {
		b.WriteString("no mirror is running\n")
	}
	for _, m := range live.Mirrors {
		b.WriteString("\n")
		renderMirror(&b, m, s)
	}
	_, _ = io.WriteString(w, b.String())
}

func renderMirror(b *strings.Builder, m livestatus.LiveMirror, s Style) {
	fmt.Fprintf(b, "%s %s: %s partitions (%s)\n", s.paint(bold, "mirror"), s.paint(bold, m.Name), num(int64(m.Partitions)), states(m.States, s))
	sep := "; "
	if s.Terminal {
		sep = " · "
	}
	fmt.Fprintf(b, "  lag %s total, %s max%s%s%s%s records/s\n", num(m.LagTotal), num(m.LagMax), sep, bytesRate(m.BytesPerSecond), sep, rate(m.RecordsPerSecond))
	if m.Error != "" {
		fmt.Fprintf(b, "  %s %s\n", s.paint(red, "error:"), m.Error)
	}
	var clusters []string
	for _, c := range m.Clusters {
		if c.Reachable {
			clusters = append(clusters, fmt.Sprintf("%s %s", c.Cluster, s.paint(green, "reachable")))
			continue
		}
		line := fmt.Sprintf("%s %s since %s", c.Cluster, s.paint(red, "UNREACHABLE"), c.Since.UTC().Format("15:04:05"))
		if c.LastError != "" {
			line += ": " + c.LastError
		}
		clusters = append(clusters, line)
	}
	if len(clusters) > 0 {
		fmt.Fprintf(b, "  clusters: %s\n", strings.Join(clusters, "; "))
	}
	if len(m.Failed) > 0 {
		fmt.Fprintf(b, "  %s\n", s.paint(red, fmt.Sprintf("FAILED (%d):", len(m.Failed))))
		for _, p := range m.Failed {
			retry := ""
			if p.Retry != "" {
				retry = " [" + p.Retry + "]"
			}
			fmt.Fprintf(b, "    %s/%d%s: %s\n", p.Topic, p.Partition, retry, s.fit(p.Reason, s.Width-12-len(p.Topic)))
		}
	}
	if len(m.CatchingUp) > 0 {
		fmt.Fprintf(b, "  catching up (the %d with the most lag):\n", len(m.CatchingUp))
		names := make([]string, len(m.CatchingUp))
		wide := 0
		for i, p := range m.CatchingUp {
			names[i] = fmt.Sprintf("%s/%d", p.Topic, p.Partition)
			wide = max(wide, len(names[i]))
		}
		wide = min(wide, 40)
		for i, p := range m.CatchingUp {
			fmt.Fprintf(b, "    %-*s %s %s  lag %s  %s/s  ETA %s\n", wide, s.fit(names[i], wide), bar(p.Progress, 24, s), s.dash(percent(p.Progress)), num(p.Lag), rate(p.RecordsPerSecond), s.dash(eta(p.ETASeconds)))
		}
	} else if m.Partitions > 0 && m.LagTotal == 0 {
		fmt.Fprintf(b, "  %s\n", s.paint(green, "every partition is caught up"))
	}
}

// states is "FAILED 1, MIRRORING 7": FAILED first, then by name.
func states(counts map[string]int, s Style) string {
	names := make([]string, 0, len(counts))
	for st := range counts {
		names = append(names, st)
	}
	slices.SortFunc(names, func(a, b string) int {
		if (a == "FAILED") != (b == "FAILED") {
			if a == "FAILED" {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, st := range names {
		text := fmt.Sprintf("%s %d", st, counts[st])
		switch st {
		case "FAILED":
			text = s.paint(red, text)
		case "MIRRORING":
			text = s.paint(green, text)
		case "PAUSED", "STOPPING", "STOPPED":
			text = s.paint(yellow, text)
		}
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// bar is a progress bar of width cells: blocks on a terminal, # and .
// otherwise; unknown progress (negative) is drawn empty.
func bar(progress float64, width int, s Style) string {
	filled := 0
	if progress > 0 {
		filled = min(width, int(progress*float64(width)+0.5))
	}
	if s.Terminal {
		return s.paint(green, strings.Repeat("█", filled)) + strings.Repeat("░", width-filled)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

func percent(p float64) string {
	if p < 0 {
		return "  –"
	}
	return fmt.Sprintf("%3.0f%%", p*100)
}

// eta is an estimate in words: "–" when unknown.
func eta(secs float64) string {
	switch {
	case secs < 0:
		return "–"
	case secs == 0:
		return "now"
	case secs < 60:
		return fmt.Sprintf("%.0fs", secs+0.5)
	case secs < 3600:
		return (time.Duration(secs) * time.Second).Round(time.Second).String()
	}
	return (time.Duration(secs) * time.Second).Round(time.Minute).String()
}

func fmtSeconds(s float64) string { return (time.Duration(s * float64(time.Second))).String() }

// num is n with thousands separators.
func num(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// rate is a per-second figure with k/M/G.
func rate(v float64) string {
	units := []string{"", "k", "M", "G"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if i == 0 || v >= 100 {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}

// bytesRate is bytes per second with kB/MB/GB.
func bytesRate(v float64) string {
	r := rate(v)
	if n := len(r); n > 0 && (r[n-1] < '0' || r[n-1] > '9') {
		return r[:n-1] + " " + r[n-1:] + "B/s"
	}
	return r + " B/s"
}

// fit cuts text to n runes (at least 10) with an ellipsis (three dots
// when not on a terminal).
func (s Style) fit(text string, n int) string {
	n = max(n, 10)
	r := []rune(text)
	if len(r) <= n {
		return text
	}
	if !s.Terminal {
		return string(r[:n-3]) + "..."
	}
	return string(r[:n-1]) + "…"
}

// dash is text with its "unknown" dash in ASCII when not on a terminal.
func (s Style) dash(text string) string {
	if s.Terminal {
		return text
	}
	return strings.ReplaceAll(text, "–", "-")
}
