package main

import (
	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/mm2migrate"
)

// newConfigMigrate is `kmirror config migrate` (cmd/kmirror/internal/mm2migrate).
func newConfigMigrate() *cobra.Command {
	var f mm2migrate.Flags
	cmd := &cobra.Command{
		Use:   "migrate --from mm2.properties",
		Short: "Translate a MirrorMaker 2 properties file into a kmirror configuration",
		Long:  cli.Wrap("Translates a MirrorMaker 2 configuration (connect-mirror-maker.properties) into a kmirror configuration: the clusters, the flow's topics and groups filters, its security settings and tuning. It lists what has no equivalent in kmirror and why, and what to do before starting kmirror (password files, PEM conversions), then checks the result with kmirror's own validation (exit 1 when it does not validate; the file is still written). Passwords are never written into the configuration: with --secrets-dir they go to one file per cluster (mode 0600), otherwise the configuration names files you write. One kmirror daemon mirrors into one destination cluster: when the enabled flows go into several clusters, choose one with --flow and run one kmirror per destination. See docs/migrating-from-mirrormaker2.md."),
		Example: cli.Examples(
			"kmirror config migrate --from mm2.properties --out kmirror.yaml",
			"kmirror config migrate --from mm2.properties --flow primary->backup --secrets-dir /etc/kmirror/secrets --out kmirror.yaml"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.From == "" {
				return cli.Usagef("--from is required: the MirrorMaker 2 properties file")
			}
			return cli.Code(mm2migrate.Migrate(f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.From, "from", "", "the MirrorMaker 2 properties `FILE` (required)")
	fs.StringVar(&f.Flow, "flow", "", "the flow to translate, `SOURCE->TARGET` (needed when the enabled flows go into several clusters)")
	fs.StringVar(&f.Out, "out", "", "where to write the kmirror configuration (`FILE`; default: standard output)")
	fs.StringVar(&f.SecretsDir, "secrets-dir", "", "write each cluster's SASL password into a file in this `DIR` (mode 0600); default: name files under "+mm2migrate.DefaultSecretsDir+" for you to write")
	fs.StringVar(&f.StateDir, "state-dir", mm2migrate.DefaultStateDir, "state.dir of the configuration (`DIR`)")
	return cmd
}
