// Package doctor is `kmirror doctor`: it dials every cluster of a
// configuration (the destination, each mirror's source) with the
// configuration's own security settings, as the daemon would, and reports
// per step — DNS, TCP, TLS (chain, host name, expiry), SASL, API versions,
// the ACLs kmirror needs, super-user status, idempotence and transactions,
// max message sizes — whether it passes and, when not, what to fix. It only
// reads, with one exception documented in docs/cli.md: the transactions
// check initialises a transactional id on the destination.
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/kclient"
)

// Results of a check.
const (
	Pass = "pass" // ✓
	Fail = "fail" // ✗: what to fix is in Fix
	Warn = "warn" // !: works now, will not for long (a certificate about to expire)
	Skip = "skip" // -: not applicable, or an earlier step failed
)

// Steps, in the order they run for a cluster.
const (
	StepDNS             = "dns"
	StepTCP             = "tcp"
	StepTLS             = "tls" // skipped: the cluster does not use TLS
	StepTLSChain        = "tls-chain"
	StepTLSHostname     = "tls-hostname"
	StepTLSExpiry       = "tls-expiry"
	StepSASL            = "sasl"
	StepAPIVersions     = "api-versions"
	StepACLs            = "acls"
	StepSuperUser       = "super-user"
	StepIdempotence     = "idempotence"
	StepTransactions    = "transactions"
	StepMaxMessageBytes = "max-message-bytes"
	// StepRemaining is skipped: what follows a failed step that it needs.
	StepRemaining = "remaining"
)

// Check is one step's result.
type Check struct {
	Step   string `json:"step"`
	Result string `json:"result"` // Pass, Fail, Warn or Skip
	// Detail says what was found (never a secret).
	Detail string `json:"detail"`
	// Fix says what to do, for a Fail or a Warn.
	Fix string `json:"fix,omitempty"`
}

// Cluster is the checks of one cluster.
type Cluster struct {
	// Name is "destination" or "mirror <name> source".
	Name      string   `json:"name"`
	Role      string   `json:"role"` // "destination" or "source"
	Mirror    string   `json:"mirror,omitempty"`
	Bootstrap []string `json:"bootstrap_servers"`
	Security  string   `json:"security_protocol"`
	Checks    []Check  `json:"checks"`
}

// Report is what doctor found.
type Report struct {
	Clusters []Cluster `json:"clusters"`
	// Failed counts the checks that failed; the command exits 1 when > 0.
	Failed int `json:"failed"`
	Warned int `json:"warned"`
}

// Options tune a run.
type Options struct {
	// Credentials serves the SASL credentials of a cluster (default:
	// the built-in auth providers in process, from the sasl.* keys).
	Credentials kclient.Credentials
	// StepTimeout bounds each network step (default 10s).
	StepTimeout time.Duration
	// Now is the clock certificate expiry is measured against (default
	// time.Now).
	Now func() time.Time
	// ExpiryWarning: a certificate expiring sooner is a Warn (default 30
	// days).
	ExpiryWarning time.Duration

	inProcess bool // Credentials is inProcessCredentials: no plugin credentials
}

func (o *Options) defaults() {
	if o.Credentials == nil {
		o.Credentials, o.inProcess = inProcessCredentials, true
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ExpiryWarning <= 0 {
		o.ExpiryWarning = 30 * 24 * time.Hour
	}
}

// Run checks every cluster of cfg: the destination first, then each
// mirror's source.
func Run(ctx context.Context, cfg *config.Config, opts Options) Report {
	opts.defaults()
	var rep Report
	dst := &clusterRun{opts: opts, cl: &cfg.Destination, role: roleDestination}
	dst.report = Cluster{Name: "destination", Role: roleDestination}
	dst.run(ctx, cfg, nil, nil)
	rep.Clusters = append(rep.Clusters, dst.report)
	for i := range cfg.Mirrors {
		m := &cfg.Mirrors[i]
		src := &clusterRun{opts: opts, cl: &m.Source, role: roleSource}
		src.report = Cluster{Name: "mirror " + m.Name + " source", Role: roleSource, Mirror: m.Name}
		src.run(ctx, cfg, m, dst)
		rep.Clusters = append(rep.Clusters, src.report)
	}
	dst.close()
	for _, c := range rep.Clusters {
		for _, ch := range c.Checks {
			switch ch.Result {
			case Fail:
				rep.Failed++
			case Warn:
				rep.Warned++
			}
		}
	}
	return rep
}

// Text writes the report for a terminal: a block per cluster, a line per
// check with ✓ ✗ ! or -, the fix under each failure, and a summary.
func (r Report) Text(w io.Writer) {
	marks := map[string]string{Pass: "✓", Fail: "✗", Warn: "!", Skip: "-"}
	for i, c := range r.Clusters {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s (%s, %s)\n", c.Name, strings.Join(c.Bootstrap, ","), c.Security)
		for _, ch := range c.Checks {
			fmt.Fprintf(w, "  %s %-18s %s\n", marks[ch.Result], ch.Step, ch.Detail)
			if ch.Fix != "" {
				fmt.Fprintf(w, "      fix: %s\n", ch.Fix)
			}
		}
	}
	fmt.Fprintln(w)
	switch {
	case r.Failed > 0:
		fmt.Fprintf(w, "%d check(s) failed, %d warning(s): kmirror will not work with this configuration until they are fixed.\n", r.Failed, r.Warned)
	case r.Warned > 0:
		fmt.Fprintf(w, "Every check passed, with %d warning(s).\n", r.Warned)
	default:
		fmt.Fprintln(w, "Every check passed.")
	}
}
