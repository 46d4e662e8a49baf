package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
)

// newDocs is the hidden `kmirror docs man DIR`: a man page per command,
// generated from the command tree (`make man`). Nothing generated is
// checked in; a test generates them fresh.
func newDocs() *cobra.Command {
	man := &cobra.Command{
		Use:     "man DIR",
		Short:   "Write a man page (section 1) for every command into DIR",
		Example: cli.Examples("kmirror docs man bin/man && man -l bin/man/kmirror.1"),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return cli.Fail(err)
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // reproducible pages
			hdr := &doc.GenManHeader{Title: "KMIRROR", Section: "1", Source: "kmirror " + root.Version, Manual: "kmirror manual"}
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return cli.Failf("writing the man pages: %v", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "man pages written to %s\n", args[0])
			return nil
		},
	}
	cmd := cli.Group(&cobra.Command{
		Use:    "docs",
		Short:  "Generate documentation from the command tree",
		Hidden: true,
	})
	cmd.AddCommand(man)
	return cmd
}
