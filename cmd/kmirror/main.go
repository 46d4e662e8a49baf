// Command kmirror is the kmirror daemon and its command-line tools. It wires the
// engine (core/...) and the built-in plugins together; see `kmirror help`.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/doctor"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/mirrorcmd"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/plugincmd"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/statuscmd"
	"github.com/kmirror/kmirror/core/version"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// dispatch runs one command line and returns its exit code (the cli.Exit*
// constants: stable, documented in docs/cli.md).
func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(newRoot(stdout), args, stdin, stdout, stderr)
}

// Help groups of the top-level commands.
const (
	groupDaemon = "daemon"
	groupAdmin  = mirrorcmd.AdminGroup
	groupSetup  = "setup"
)

// newRoot builds the command tree. Each call builds a new one (the flags
// are bound to variables of that tree). stdout is where the completion
// scripts go (cobra binds it when it makes those commands).
func newRoot(stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "kmirror",
		Short: "Mirror topics between Kafka clusters with offsets preserved",
		Long: `kmirror mirrors topics, consumer group offsets and ACLs from one or more source
Kafka clusters into one destination cluster, keeping offsets identical.

Start with:
  kmirror config init          # a minimal configuration, asked for on a terminal
  kmirror run --config kmirror.yaml

Docs: docs/README.md; every key: kmirror config reference.`,
		Example: cli.Examples(
			"kmirror config init --source-bootstrap dc1:9092 --destination-bootstrap dc2:9092 --topics 'orders.*' kmirror.yaml",
			"kmirror run --config kmirror.yaml",
			"kmirror describe --config kmirror.yaml",
			"kmirror failover dc1-to-dc2 --wait-for-catch-up 2m --config kmirror.yaml"),
		Version: version.Get().Version,
		// Args stays nil: cobra then refuses an unknown command with the
		// closest names ("Did you mean this?").
		// No command: the help, and a usage error (as kmirror always did).
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return cli.Code(cli.ExitUsage)
		},
	}
	root.SetVersionTemplate(version.Get().String())
	root.SetFlagErrorFunc(cli.FlagError)
	root.SuggestionsMinimumDistance = 2
	root.AddGroup(
		&cobra.Group{ID: groupDaemon, Title: "Running kmirror:"},
		&cobra.Group{ID: groupAdmin, Title: "Operating a running daemon (admin API):"},
		&cobra.Group{ID: groupSetup, Title: "Configuration, plugins and state:"},
	)
	root.SetHelpCommandGroupID(groupSetup)
	root.SetCompletionCommandGroupID(groupSetup)

	root.AddCommand(inGroup(groupDaemon, newRun(), newDemo())...)
	root.AddCommand(mirrorcmd.Commands()...)
	root.AddCommand(inGroup(groupAdmin, statuscmd.Command())...)
	root.AddCommand(inGroup(groupSetup, newConfig(), doctor.Command(), plugincmd.Command(), newState(), newVersion())...)
	root.AddCommand(newPlugin(), newDocs())
	root.InitDefaultHelpCmd()
	root.SetOut(stdout)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			completionHelp(c)
		}
	}
	indexSubCommands(root)
	return root
}

// indexSubCommands ends the top-level help with every sub-command
// (`kmirror mirrors create ...`), so that one page lists them all. The
// other commands keep cobra's usage template.
func indexSubCommands(root *cobra.Command) {
	tpl := root.UsageTemplate()
	var b strings.Builder
	b.WriteString("\nSub-commands:\n")
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		c.SetUsageTemplate(tpl)
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				fmt.Fprintf(&b, "  %-62s %s\n", "kmirror "+c.Name()+" "+s.Use, s.Short)
			}
		}
	}
	root.SetUsageTemplate(tpl + b.String())
}

// inGroup puts cmds in the help group id.
func inGroup(id string, cmds ...*cobra.Command) []*cobra.Command {
	for _, c := range cmds {
		c.GroupID = id
	}
	return cmds
}

// completionHelp gives the completion commands an example each.
func completionHelp(c *cobra.Command) {
	c.Example = cli.Examples(
		"# bash: for this shell, then for every new one",
		"source <(kmirror completion bash)",
		"kmirror completion bash > /etc/bash_completion.d/kmirror",
		"# zsh and fish",
		"kmirror completion zsh > \"${fpath[1]}/_kmirror\"",
		"kmirror completion fish > ~/.config/fish/completions/kmirror.fish")
	for _, s := range c.Commands() {
		s.Example = cli.Examples("kmirror completion " + s.Name() + " > kmirror." + s.Name())
	}
}
