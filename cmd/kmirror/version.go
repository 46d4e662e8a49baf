package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kmirror/kmirror/cmd/kmirror/internal/cli"
	"github.com/kmirror/kmirror/core/version"
)

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := cli.NewFlagSet("version", stderr)
	asJSON := fs.Bool("json", false, "print as JSON")
	if code, ok := cli.ParseFlags(fs, args); !ok {
		return code
	}
	info := version.Get()
	if *asJSON {
		b, _ := json.MarshalIndent(info, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return cli.ExitOK
	}
	fmt.Fprint(stdout, info.String())
	return cli.ExitOK
}
