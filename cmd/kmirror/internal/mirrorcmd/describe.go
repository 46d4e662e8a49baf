package mirrorcmd

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// describeDoc is the structured output of describe: {"mirrors": [...],
// "partitions": [...]}, never null lists.
type describeDoc struct {
	Mirrors    []admin.MirrorStatus    `json:"mirrors"`
	Partitions []admin.PartitionStatus `json:"partitions"`
}

// printDescribe prints mirrors' partitions as `kmirror describe` does: a
// table, or {"mirrors": [...], "partitions": [...]} in -o json|yaml.
// failedOnly keeps FAILED partitions, with their retry state and error.
func printDescribe(stdout io.Writer, mirrors []admin.MirrorStatus, failedOnly bool, out *cli.Output) {
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
	if out.Structured() {
		out.Print(stdout, describeDoc{Mirrors: mirrors, Partitions: rows}, nil)
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
