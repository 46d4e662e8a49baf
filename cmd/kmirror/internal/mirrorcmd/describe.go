package mirrorcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// Describe is `kmirror describe`: it asks the running daemon (on
// http.address of the same configuration) for the status of every mirrored
// partition.
func Describe(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("describe", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON (stable field names, see docs/cli.md)")
	only := fs.String("mirror", "", "only this mirror")
	failed := fs.Bool("failed", false, "only FAILED partitions, with their retry state and error")
	cfg, code, ok := cf.ParseAndLoad(fs, args, stderr) // its http.address locates the daemon
	if !ok {
		return code
	}
	st, err := fetchStatus(cfg.HTTPAddress)
	if err != nil {
		fmt.Fprintf(stderr, "kmirror describe: %v\n", err)
		return cli.ExitFailure
	}
	var mirrors []admin.MirrorStatus
	for _, m := range st.Mirrors {
		if *only == "" || m.Name == *only {
			mirrors = append(mirrors, m)
		}
	}
	if *only != "" && len(mirrors) == 0 {
		fmt.Fprintf(stderr, "kmirror describe: no mirror named %q is running\n", *only)
		return cli.ExitFailure
	}
	printDescribe(stdout, mirrors, *failed, *asJSON)
	return cli.ExitOK
}

// printDescribe prints mirrors' partitions as `kmirror describe` and
// `kmirror mirrors describe` do: a table, or with asJSON
// {"mirrors": [...], "partitions": [...]}. failedOnly keeps FAILED
// partitions, with their retry state and error.
func printDescribe(stdout io.Writer, mirrors []admin.MirrorStatus, failedOnly, asJSON bool) {
	rows := []admin.PartitionStatus{}
	for _, m := range mirrors {
		for _, p := range m.Partitions {
			if failedOnly && p.State != "FAILED" {
				continue
			}
			rows = append(rows, p)
		}
	}
	if mirrors == nil {
		mirrors = []admin.MirrorStatus{}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"mirrors": mirrors, "partitions": rows})
		return
	}
	for _, m := range mirrors {
		// One short line per failing sync loop (partitions' errors are in
		// the table; the full causes in --json's "errors").
		loops := 0
		for _, le := range m.Errors {
			if !strings.HasPrefix(le.Loop, "partition ") {
				fmt.Fprintf(stdout, "mirror %s: %s: %s\n", m.Name, le.Loop, le.Message)
				loops++
			}
		}
		if loops == 0 && len(m.Errors) == 0 && m.Error != "" {
			fmt.Fprintf(stdout, "mirror %s: %s\n", m.Name, m.Error) // a daemon without "errors"
		}
		for _, c := range m.Clusters {
			if !c.Reachable {
				fmt.Fprintf(stdout, "mirror %s: the %s cluster is unreachable since %s: %s\n", m.Name, c.Cluster, c.Since.UTC().Format(time.RFC3339), c.LastError)
			}
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if failedOnly {
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tRETRY\tERROR")
		for _, p := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Mirror, p.Topic, p.Partition, p.Retry, p.LastError)
		}
	} else {
		fmt.Fprintln(tw, "MIRROR\tTOPIC\tPARTITION\tSTATE\tMODE\tSOURCE-OFFSET\tSOURCE-LOG-START\tDESTINATION-OFFSET\tLAG\tLAST-MIRRORED\tERROR")
		for _, p := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Mirror, p.Topic, p.Partition, p.State, p.Mode,
				cli.Num(p.SourceHighWatermark), cli.Num(p.SourceLogStart), cli.Num(p.DestinationEndOffset), cli.Num(p.Lag), cli.Num(p.LastMirroredOffset), p.LastError)
		}
	}
	_ = tw.Flush()
	if failedOnly {
		return
	}
	// Facts an operator should know: why a partition runs in map mode, who
	// holds the sync lease, a destination without an authorizer.
	for _, m := range mirrors {
		for _, n := range m.Notes {
			fmt.Fprintf(stdout, "note: mirror %s: %s\n", m.Name, n)
		}
	}
	for _, p := range rows {
		for _, n := range p.Notes {
			fmt.Fprintf(stdout, "note: %s %s/%d: %s\n", p.Mirror, p.Topic, p.Partition, n)
		}
	}
}

// fetchStatus reads GET /v1/describe from the daemon listening on addr.
func fetchStatus(addr string) (*admin.Status, error) {
	if addr == "" {
		return nil, fmt.Errorf("http.address is empty in this configuration, so the daemon serves no status; set it and restart the daemon")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("http.address %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	url := "http://" + net.JoinHostPort(host, port) + "/v1/describe"
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the daemon at %s (is `kmirror run` running with this configuration?): %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	var out struct {
		Mirrors *admin.Status `json:"mirrors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", url, err)
	}
	if out.Mirrors == nil {
		return &admin.Status{}, nil
	}
	return out.Mirrors, nil
}
