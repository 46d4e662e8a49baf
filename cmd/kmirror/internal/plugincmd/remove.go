package plugincmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
)

func newRemove() *cobra.Command {
	var cf cli.ConfigFlags
	var force bool
	cmd := &cobra.Command{
		Use:   "remove NAME|FILE",
		Short: "Delete a plugin file from the plugin directory",
		Long: `Delete a file from the plugin directory: NAME is a configured plugin, FILE a
file in the plugin directory. Refused while the configuration references it
(naming the key) unless --force.`,
		Example: cli.Examples(
			"kmirror plugins remove pii --config kmirror.yaml",
			"kmirror plugins remove kmirror-filter-old --force --config kmirror.yaml"),
		Args: exactlyOne("NAME (a configured plugin) or FILE (a file in the plugin directory)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Code(pluginsRemove(&cf, args[0], force, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cf.Register(cmd.Flags(), "the daemon's configuration file: finds the plugin directory and what still references the file")
	cmd.Flags().BoolVar(&force, "force", false, "remove the file even though the configuration still references it")
	return cmd
}

func pluginsRemove(cf *cli.ConfigFlags, what string, force bool, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, code, ok := loadForPlugins("kmirror plugins remove", cf, stdin, stderr)
	if !ok {
		return code
	}
	dir := cfg.PluginDirectory()
	file := ""
	if p, ok := cfg.Plugin(what); ok {
		if p.Builtin != "" {
			fmt.Fprintf(stderr, "kmirror plugins remove: plugins.%s is the built-in %s %s, part of the kmirror binary: nothing to remove (delete the entry from %s)\n", what, p.Kind, p.Builtin, cf.Path)
			return cli.ExitFailure
		}
		file = p.File(dir)
	} else {
		file = what
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if !samePath(filepath.Dir(file), dir) {
			fmt.Fprintf(stderr, "kmirror plugins remove: %s is not in the plugin directory %s; remove only removes plugin files\n", file, dir)
			return cli.ExitUsage
		}
	}
	var refs []string
	for i := range cfg.Plugins {
		p := &cfg.Plugins[i]
		if p.Path != "" && samePath(p.File(dir), file) {
			refs = append(refs, "plugins."+p.Name+".path")
		}
	}
	if len(refs) > 0 && !force {
		fmt.Fprintf(stderr, "kmirror plugins remove: %s %s %s: remove the entry from the configuration first (and reload), or pass --force\n", strings.Join(refs, ", "), references(refs), file)
		return cli.ExitFailure
	}
	if fi, err := os.Stat(file); err != nil {
		fmt.Fprintf(stderr, "kmirror plugins remove: %v\n", err)
		return cli.ExitFailure
	} else if !fi.Mode().IsRegular() {
		fmt.Fprintf(stderr, "kmirror plugins remove: %s is not a regular file\n", file)
		return cli.ExitFailure
	}
	if err := os.Remove(file); err != nil {
		fmt.Fprintf(stderr, "kmirror plugins remove: %v\n", err)
		return cli.ExitFailure
	}
	syncDir(dir)
	fmt.Fprintf(stdout, "removed %s\n", file)
	if len(refs) > 0 {
		fmt.Fprintf(stdout, "warning: %s %s it: the daemon cannot start (or restart) that plugin until the entry is removed or the file installed again\n", strings.Join(refs, ", "), references(refs))
	}
	return cli.ExitOK
}

// references is the verb for a list of keys.
func references(keys []string) string {
	if len(keys) == 1 {
		return "still references"
	}
	return "still reference"
}
