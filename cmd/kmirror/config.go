package main

import (
	"fmt"
	"io"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/config/reference"
)

func cmdConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: kmirror config validate --config FILE | kmirror config reference | kmirror config sample")
		return cli.ExitUsage
	}
	switch args[0] {
	case "validate":
		return cmdConfigValidate(args[1:], stdout, stderr)
	case "reference":
		fs := cli.NewFlagSet("config reference", stderr)
		if code, ok := cli.ParseFlags(fs, args[1:]); !ok {
			return code
		}
		_, _ = stdout.Write(reference.Generate())
		return cli.ExitOK
	case "sample":
		fs := cli.NewFlagSet("config sample", stderr)
		if code, ok := cli.ParseFlags(fs, args[1:]); !ok {
			return code
		}
		_, _ = io.WriteString(stdout, reference.Sample)
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "kmirror config: unknown sub-command %q (validate, reference, sample)\n", args[0])
	return cli.ExitUsage
}

func cmdConfigValidate(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("config validate", stderr)
	var cf cli.ConfigFlags
	cf.Register(fs)
	cfg, code, ok := cf.ParseAndLoad(fs, args, stderr)
	if !ok {
		return code
	}
	fmt.Fprintf(stdout, "%s is valid.\n%s", cf.Path, cfg.Summary())
	return cli.ExitOK
}
