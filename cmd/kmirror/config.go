package main

import (
	"fmt"
	"io"

	"github.com/kmirror/kmirror/core/config/reference"
)

func cmdConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: kmirror config validate --config FILE | kmirror config reference | kmirror config sample")
		return exitUsage
	}
	switch args[0] {
	case "validate":
		return cmdConfigValidate(args[1:], stdout, stderr)
	case "reference":
		fs := newFlagSet("config reference", stderr)
		if code, ok := parseFlags(fs, args[1:]); !ok {
			return code
		}
		_, _ = stdout.Write(reference.Generate())
		return exitOK
	case "sample":
		fs := newFlagSet("config sample", stderr)
		if code, ok := parseFlags(fs, args[1:]); !ok {
			return code
		}
		_, _ = io.WriteString(stdout, reference.Sample)
		return exitOK
	}
	fmt.Fprintf(stderr, "kmirror config: unknown sub-command %q (validate, reference, sample)\n", args[0])
	return exitUsage
}

func cmdConfigValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("config validate", stderr)
	var cf configFlags
	cf.register(fs)
	cfg, code, ok := cf.parseAndLoad(fs, args, stderr)
	if !ok {
		return code
	}
	fmt.Fprintf(stdout, "%s is valid.\n%s", cf.path, cfg.Summary())
	return exitOK
}
