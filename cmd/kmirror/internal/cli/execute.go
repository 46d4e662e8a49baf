package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kmirror/kmirror/core/config/raw"
)

// Execute runs the command line args on root and returns the exit code.
// It is the one place that prints errors: "<command path>: <message>" on
// stderr, or {"error", "exit_code"} when the command line asks for -o json
// or yaml. Single-dash long flags (-config FILE, the form of kmirror's
// earlier Go flag parser) are taken as double-dash ones.
func Execute(root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args = NormalizeArgs(root, args)
	formatName := formatOfArgs(args)
	// Commands that print their own messages write to stderr; in a
	// structured format those become the error document's message.
	var held bytes.Buffer
	cmdErr := stderr
	if formatName != FormatText {
		cmdErr = &held
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(cmdErr)
	root.SilenceErrors, root.SilenceUsage = true, true
	cmd, err := root.ExecuteC()
	if err == nil {
		_, _ = stderr.Write(held.Bytes())
		return ExitOK
	}
	code := exitCode(err)
	var msg, apiCode, hint string
	var e *Error
	if !errors.As(err, &e) || e.Err != nil {
		msg = err.Error()
	}
	if e != nil {
		apiCode, hint = e.APICode, e.Hint
	}
	if formatName == FormatText {
		if msg != "" {
			printError(stderr, FormatText, commandPath(cmd), msg, code, apiCode, hint)
			if code == ExitUsage {
				fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", commandPath(cmd))
			}
		}
		return code
	}
	if said := strings.TrimSpace(held.String()); said != "" {
		if msg == "" {
			msg = said
		} else {
			msg = said + "\n" + msg
		}
	}
	printError(stderr, formatName, commandPath(cmd), msg, code, apiCode, hint)
	return code
}

// commandPath is the path of cmd ("kmirror mirrors pause"), or "kmirror".
func commandPath(cmd *cobra.Command) string {
	if cmd == nil {
		return "kmirror"
	}
	return cmd.CommandPath()
}

// NormalizeArgs rewrites single-dash long flags (-config, -json,
// -config=FILE) into their double-dash form, for the flag names the
// command tree knows; pflag alone would read -config as -c -o -n ...
// Arguments after "--" are left alone.
func NormalizeArgs(root *cobra.Command, args []string) []string {
	names := map[string]bool{"help": true, "version": true}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.InheritedFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && names[name] {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// kafkaFlags are flags of Kafka's own tools (kafka-topics.sh,
// kafka-consumer-groups.sh, kafka-mirror-maker) that operators type out
// of habit, with what to use in kmirror instead.
var kafkaFlags = map[string]string{
	"bootstrap-server":  "kmirror reads cluster addresses from its configuration (destination.bootstrap.servers, mirrors.<name>.bootstrap.servers); the commands that talk to a running daemon take --admin-address (or --config)",
	"bootstrap-servers": "kmirror reads cluster addresses from its configuration (destination.bootstrap.servers, mirrors.<name>.bootstrap.servers); the commands that talk to a running daemon take --admin-address (or --config)",
	"topic":             "use --topics REGEX[,REGEX...]: regexes that match whole topic names (--topics orders matches only \"orders\")",
	"group":             "kmirror syncs consumer groups per mirror (mirror.groups.include and mirror.groups.exclude in the configuration); no command takes a group",
	"command-config":    "use --config FILE (the daemon's configuration) or --admin-address with --admin-token-file",
	"consumer.config":   "kmirror has one configuration file: --config FILE",
	"producer.config":   "kmirror has one configuration file: --config FILE",
	"whitelist":         "use --topics REGEX[,REGEX...]",
	"include":           "use --topics REGEX[,REGEX...]",
	"describe":          "describe is a command: kmirror describe [MIRROR]",
	"list":              "list is a command: kmirror mirrors list",
}

var (
	unknownFlagRE  = regexp.MustCompile(`^unknown flag: --?([^\s=]+)`)
	unknownShortRE = regexp.MustCompile(`^unknown shorthand flag: '(.)' in (-\S+)`)
	invalidArgRE   = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w.-]+)" flag: (.*)$`)
	needsArgRE     = regexp.MustCompile(`^flag needs an argument: (?:'(\w)' in -\w|--([\w.-]+))`)
)

// FlagError rewrites pflag's parse errors into a usage error that names the
// flag, says the form it wants, suggests a close flag name, and for flags
// of Kafka's tools says what kmirror takes instead. It is the command
// tree's FlagErrorFunc.
func FlagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if m := unknownFlagRE.FindStringSubmatch(msg); m != nil {
		return Usagef("%s", unknownFlag(cmd, m[1]))
	}
	if m := unknownShortRE.FindStringSubmatch(msg); m != nil {
		name := strings.TrimLeft(m[2], "-")
		name, _, _ = strings.Cut(name, "=")
		if len(name) > 1 {
			return Usagef("%s", unknownFlag(cmd, name))
		}
		return Usagef("unknown flag -%s", m[1])
	}
	if m := invalidArgRE.FindStringSubmatch(msg); m != nil {
		return Usagef("--%s %q: %s", m[2], m[1], wants(cmd, m[2], m[3]))
	}
	if m := needsArgRE.FindStringSubmatch(msg); m != nil {
		name := m[2]
		if name == "" {
			if f := cmd.Flags().ShorthandLookup(m[1]); f != nil {
				name = f.Name
			}
		}
		if f := cmd.Flags().Lookup(name); f != nil {
			return Usagef("--%s needs a value: %s", name, valueName(f))
		}
		return Usagef("--%s needs a value", name)
	}
	return Usagef("%s", msg)
}

// unknownFlag says that --name is not a flag of cmd, with a note for a
// Kafka-tool flag or the closest flag names.
func unknownFlag(cmd *cobra.Command, name string) string {
	msg := fmt.Sprintf("unknown flag --%s", name)
	if s := suggestFlags(cmd, name); len(s) > 0 {
		msg += "\nDid you mean " + strings.Join(s, " or ") + "?"
	}
	if note, ok := kafkaFlags[name]; ok {
		msg += "\n" + note
	}
	return msg
}

// suggestFlags returns cmd's flag names close to name: at most two edits
// apart or starting with it; failing those, sharing a word of five
// letters or more with it (--bootstrap-server → --source-bootstrap).
func suggestFlags(cmd *cobra.Command, name string) []string {
	var words []string
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return r == '-' || r == '.' }) {
		if len(w) >= 5 {
			words = append(words, w)
		}
	}
	var out, sharing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if raw.Distance(name, f.Name) <= 2 || (len(name) >= 3 && strings.HasPrefix(f.Name, name)) {
			out = append(out, "--"+f.Name)
			return
		}
		for _, w := range words {
			if strings.Contains(f.Name, w) {
				sharing = append(sharing, "--"+f.Name)
				return
			}
		}
	})
	if len(out) == 0 {
		out = sharing // only when no name is close
	}
	sort.Strings(out)
	return out
}

// wants explains the value a flag takes, from its type.
func wants(cmd *cobra.Command, name, reason string) string {
	f := cmd.Flags().Lookup(name)
	if f == nil {
		return reason
	}
	switch f.Value.Type() {
	case "duration":
		return "want a duration with a unit, such as 90s, 2m or 1h30m"
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "want a whole number"
	case "bool":
		return "want true or false"
	}
	return reason
}

// valueName is what a flag's value is called in help (FILE, DURATION).
func valueName(f *pflag.Flag) string {
	name, _ := pflag.UnquoteUsage(f)
	if name == "" {
		name = f.Value.Type()
	}
	return name
}

// Group makes cmd a command of sub-commands (`kmirror mirrors`): without
// one it is a usage error that lists them; an unknown one is a usage error
// with the closest names. Help (-h) exits 0.
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	// The sub-command's flags (--config ...) may follow a mistyped name;
	// they must not hide that the name is wrong.
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		if len(args) == 0 {
			return Usagef("a sub-command is required: %s", strings.Join(names, ", "))
		}
		msg := fmt.Sprintf("unknown sub-command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			return Usagef("%s\nDid you mean %s?", msg, strings.Join(s, " or "))
		}
		return Usagef("%s; sub-commands: %s", msg, strings.Join(names, ", "))
	}
	return cmd
}

// Examples formats example command lines for a command's help: each
// "# comment" line stays, each command line is indented.
func Examples(lines ...string) string {
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// MirrorArg is the mirror a command acts on: the positional MIRROR, or
// --mirror (the flag of earlier versions); both given must agree.
func MirrorArg(args []string, flag string, required bool) (string, error) {
	switch {
	case len(args) > 1:
		return "", Usagef("give one mirror (got %d arguments: %s)", len(args), strings.Join(args, " "))
	case len(args) == 1 && flag != "" && flag != args[0]:
		return "", Usagef("the mirror is given twice, as %q and --mirror %q", args[0], flag)
	case len(args) == 1:
		return args[0], nil
	case flag == "" && required:
		return "", Usagef("the mirror is required: give its name (or --mirror NAME)")
	}
	return flag, nil
}

// Wrap breaks text into lines of at most 80 columns at spaces, for help
// texts written as one line.
func Wrap(text string) string {
	var b strings.Builder
	col := 0
	for i, w := range strings.Fields(text) {
		if i > 0 && col+1+len(w) > 80 {
			b.WriteByte('\n')
			col = 0
		} else if i > 0 {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

// NoArgs refuses any positional argument, naming it.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("unexpected argument %q: this command takes none (flags start with --)", strings.Join(args, " "))
	}
	return nil
}

// MaxArgs refuses more than n positional arguments, naming what they are.
func MaxArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return Usagef("give at most %d %s (got %d: %s)", n, what, len(args), strings.Join(args, " "))
		}
		return nil
	}
}
