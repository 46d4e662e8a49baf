package doctor

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config"
)

// Command is `kmirror doctor`.
func Command() *cobra.Command {
	var cf cli.ConfigFlags
	var out cli.Output
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that every cluster of a configuration is reachable and allows what kmirror needs",
		Long: cli.Wrap(`For the destination and each mirror's source, dial as the daemon would, with the configuration's security settings, and check per step: DNS, TCP, TLS (certificate chain, host name, expiry in days), SASL (authenticate), API versions, the ACLs kmirror needs (source: DESCRIBE, READ and DESCRIBE_CONFIGS on the mirror's topics, DESCRIBE on its groups; destination: CREATE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS and IDEMPOTENT_WRITE on the cluster), super-user status on the destination, idempotence and transactions (InitProducerId), and the destination's message.max.bytes against each source's.`) + `

Each check is ✓ (passed), ✗ (failed, with the fix), ! (a warning: a
certificate expiring within 30 days) or - (not applicable, or skipped after
an earlier failure). Exits 1 when any check fails. It changes nothing,
except that the transactions check initialises the transactional id
kmirror-doctor on the destination. Secrets are never printed.`,
		Example: cli.Examples(
			"kmirror doctor --config kmirror.yaml",
			"kmirror doctor --config kmirror.yaml -o json"),
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.Load(cmd.InOrStdin(), config.Load)
			if err != nil {
				return err
			}
			rep := Run(cmd.Context(), cfg, Options{})
			out.Print(cmd.OutOrStdout(), rep, func(w io.Writer) { rep.Text(w) })
			if rep.Failed > 0 {
				return cli.Code(cli.ExitFailure)
			}
			return nil
		},
	}
	cf.Register(cmd.Flags(), "")
	out.Register(cmd.Flags())
	return cmd
}
