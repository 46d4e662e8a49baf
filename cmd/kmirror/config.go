package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/reference"
)

// newConfig is `kmirror config`: init, validate, reference, sample.
func newConfig() *cobra.Command {
	cmd := cli.Group(&cobra.Command{
		Use:   "config",
		Short: "Write a first configuration, validate one, migrate one from MirrorMaker 2, print the key reference or a sample",
		Long: `Configuration files: init writes a minimal one that validates as written;
validate checks a file as run would load it; reference prints every key;
sample prints the commented full reference (sample --minimal: what init
writes).`,
		Example: cli.Examples(
			"kmirror config init",
			"kmirror config validate --config kmirror.yaml",
			"kmirror config sample --minimal > kmirror.yaml"),
	})
	// Each command that has its own package builds its own *cobra.Command
	// (config migrate: a MirrorMaker 2 properties file into kmirror.yaml).
	cmd.AddCommand(newConfigInit(), newConfigValidate(), newConfigReference(), newConfigSample(), newConfigMigrate())
	return cmd
}

// validResult is the structured output of config validate.
type validResult struct {
	Config  string `json:"config"`
	Valid   bool   `json:"valid"`
	Summary string `json:"summary"`
}

func newConfigValidate() *cobra.Command {
	var cf cli.ConfigFlags
	var out cli.Output
	cmd := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a configuration file: a summary when valid, every problem when not",
		Long: `Check a configuration file with the same environment (KMIRROR_*) and --set
overrides run would apply: a short summary when it is valid, every problem
(key path and reason) when it is not (exit 1).`,
		Example: cli.Examples(
			"kmirror config validate --config kmirror.yaml",
			"kmirror config validate --config - < kmirror.yaml",
			"KMIRROR_CONFIG=kmirror.yaml kmirror config validate --set destination.bootstrap.servers=dr:9092"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.Load(cmd.InOrStdin(), config.Load)
			if err != nil {
				return err
			}
			res := validResult{Config: cf.Name(), Valid: true, Summary: strings.TrimRight(cfg.Summary(), "\n") + "\n"}
			out.Print(cmd.OutOrStdout(), res, func(w io.Writer) {
				fmt.Fprintf(w, "%s is valid.\n%s", res.Config, res.Summary)
			})
			return nil
		},
	}
	cf.Register(cmd.Flags(), "")
	out.Register(cmd.Flags())
	return cmd
}

func newConfigReference() *cobra.Command {
	return &cobra.Command{
		Use:     "reference",
		Short:   "Print the key reference (docs/config.md)",
		Long:    "Print the reference of every configuration key: name, type, default, validation and meaning (the text of docs/config.md).",
		Example: cli.Examples("kmirror config reference | less"),
		Args:    cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, _ = cmd.OutOrStdout().Write(reference.Generate())
			return nil
		},
	}
}

func newConfigSample() *cobra.Command {
	var minimal bool
	cmd := &cobra.Command{
		Use:   "sample [--minimal]",
		Short: "Print the commented sample configuration",
		Long: `Print the commented sample configuration (docs/kmirror.sample.yaml): every
section with realistic values, a reference to read, not a file that runs as
is (its TLS files and passwords are examples). --minimal prints a small
configuration for one source and one destination that validates as printed:
what config init writes with its defaults.`,
		Example: cli.Examples(
			"kmirror config sample | less",
			"kmirror config sample --minimal > kmirror.yaml && kmirror config validate --config kmirror.yaml"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if minimal {
				_, _ = io.WriteString(cmd.OutOrStdout(), minimalConfig(defaultInit()))
				return nil
			}
			_, _ = io.WriteString(cmd.OutOrStdout(), reference.Sample)
			return nil
		},
	}
	cmd.Flags().BoolVar(&minimal, "minimal", false, "print a minimal configuration that validates as printed (one source, one destination)")
	return cmd
}
