package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/version"
)

func newVersion() *cobra.Command {
	var out cli.Output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go and franz-go versions",
		Long:  "Print kmirror's version and commit, and the Go and franz-go versions it was built with (kmirror --version prints the same).",
		Example: cli.Examples(
			"kmirror version",
			"kmirror version -o json"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Get()
			out.Print(cmd.OutOrStdout(), info, func(w io.Writer) { _, _ = io.WriteString(w, info.String()) })
			return nil
		},
	}
	out.Register(cmd.Flags())
	return cmd
}
