package mirrorcmd

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/adminclient"
	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/admin"
)

// fail is err as the command's failure: an error of the admin API keeps
// its message, code and hint, and gets the exit code of its code (see
// exitCodeOf); any other error (the daemon unreachable) is ExitFailure.
func fail(err error) error {
	var e *adminclient.Error
	if !errors.As(err, &e) {
		return cli.Fail(err)
	}
	return &cli.Error{Code: exitCodeOf(e), Err: errors.New(e.Headline()), APICode: e.Code, Hint: e.Hint}
}

// exitCodeOf maps the admin API's error codes to exit codes, one per kind
// of failure a script may branch on; a daemon that sends no code is mapped
// by its HTTP status.
func exitCodeOf(e *adminclient.Error) int {
	switch e.Code {
	case admin.CodeInvalidRequest:
		return cli.ExitUsage
	case admin.CodeNoSuchMirror, admin.CodeNoMatchingTopics:
		return cli.ExitNotFound
	case admin.CodeConflict:
		return cli.ExitConflict
	case admin.CodeUnauthorized:
		return cli.ExitUnauthorized
	case admin.CodeUnavailable, admin.CodeTimeout:
		return cli.ExitUnavailable
	case "":
		switch e.Status {
		case http.StatusBadRequest:
			return cli.ExitUsage
		case http.StatusNotFound, http.StatusUnprocessableEntity:
			return cli.ExitNotFound
		case http.StatusConflict:
			return cli.ExitConflict
		case http.StatusUnauthorized, http.StatusForbidden:
			return cli.ExitUnauthorized
		case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return cli.ExitUnavailable
		}
	}
	return cli.ExitFailure // no_such_route, kafka_refused, internal, ...
}

// safety is the flags of the operations that change roles or delete:
// --dry-run, and for those that ask first, --yes.
type safety struct {
	dryRun bool
	yes    bool
}

// register adds --dry-run, and --yes/-y when confirm (the operation asks
// on a terminal).
func (s *safety) register(cmd *cobra.Command, what string, confirm bool) {
	cmd.Flags().BoolVar(&s.dryRun, "dry-run", false, "print what "+what+" would do per topic and partition, and change nothing (-o json|yaml: the plan document)")
	if confirm {
		cmd.Flags().BoolVarP(&s.yes, "yes", "y", false, "do not ask for confirmation; required off a terminal (scripts)")
	}
}

// mustAsk checks, before anything is called, that a confirmation can be
// asked for: with --yes or --dry-run none is needed; otherwise standard
// input must be a terminal. Scripts pass --yes: an operation that changes
// which cluster is written to is not done on an unattended command line
// by default.
func (s *safety) mustAsk(cmd *cobra.Command, what string) (bool, error) {
	if s.yes || s.dryRun {
		return false, nil
	}
	if !cli.IsTerminal(cmd.InOrStdin()) {
		return false, cli.Usagef("%s asks for confirmation, and standard input is not a terminal: pass --yes to proceed without asking (scripts), or --dry-run to see what it would do", what)
	}
	return true, nil
}

// planFirst runs the dry run or the confirmation of an operation before
// it is sent: with --dry-run it prints the plan and returns done; when ask
// (mustAsk) it shows the plan and asks. plan is called only then.
func (s *safety) planFirst(cmd *cobra.Command, a *adminCmd, ask bool, plan func() (admin.Plan, error)) (done bool, err error) {
	if !s.dryRun && !ask {
		return false, nil
	}
	p, err := plan()
	if err != nil {
		return true, fail(err)
	}
	if s.dryRun {
		a.printDryRun(cmd, p)
		return true, nil
	}
	return false, confirm(cmd, a.uiWriter(cmd), p)
}

// confirm shows plan on the terminal and asks "Proceed? [y/N]"; anything
// but y or yes is a no, and the command ends with ExitFailure, nothing
// changed.
func confirm(cmd *cobra.Command, ui io.Writer, plan admin.Plan) error {
	printPlan(ui, plan, false)
	fmt.Fprint(ui, "Proceed? [y/N] ")
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(ui)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return cli.Failf("%s of mirror %s not confirmed: nothing was changed", plan.Op, plan.Mirror)
}

// uiWriter is where the interactive parts (the plan before the question,
// the prompt, the catch-up progress) go: standard error, so that standard
// output holds only the result; in -o json|yaml the command tree holds
// standard error back for the error document, so they go to the process's
// standard error directly.
func (a *adminCmd) uiWriter(cmd *cobra.Command) io.Writer {
	if a.out.Structured() {
		return os.Stderr
	}
	return cmd.ErrOrStderr()
}

// printDryRun prints a dry run's plan: the plan document in -o json|yaml,
// the table otherwise.
func (a *adminCmd) printDryRun(cmd *cobra.Command, plan admin.Plan) {
	if plan.Steps == nil {
		plan.Steps = []string{}
	}
	if plan.Topics == nil {
		plan.Topics = []admin.TopicPlan{}
	}
	a.out.Print(cmd.OutOrStdout(), plan, func(w io.Writer) { printPlan(w, plan, true) })
}

// printPlan is the text form of a plan: the steps in order, then per
// partition the state now and the action, then what would be created or
// deleted on the old source and the warnings. dryRun ends it with the
// reminder that nothing was changed.
func printPlan(w io.Writer, p admin.Plan, dryRun bool) {
	parts := 0
	for _, t := range p.Topics {
		parts += len(t.Partitions)
	}
	fmt.Fprintf(w, "%s of mirror %s would act on %d topic(s), %d partition(s):\n", p.Op, p.Mirror, len(p.Topics), parts)
	for i, s := range p.Steps {
		fmt.Fprintf(w, "  %d. %s\n", i+1, s)
	}
	if parts > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tLAG\tLAST-MIRRORED\tACTION\tDETAIL")
		for _, t := range p.Topics {
			for _, pp := range t.Partitions {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.Topic, pp.Partition, cli.OrDash(pp.State), cli.Num(pp.Lag), cli.Num(pp.LastMirroredOffset), pp.Action, cli.OrDash(pp.Detail))
			}
		}
		_ = tw.Flush()
	}
	if len(p.CreateOnOldSource) > 0 {
		fmt.Fprintf(w, "Would create on the old source: %s\n", strings.Join(p.CreateOnOldSource, ", "))
	}
	if len(p.DeleteOnOldSource) > 0 {
		fmt.Fprintf(w, "Would DELETE on the old source (and mirror back from scratch): %s\n", strings.Join(p.DeleteOnOldSource, ", "))
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "Warning: %s\n", warn)
	}
	if dryRun {
		fmt.Fprintln(w, "Dry run: nothing was changed.")
	}
}
