// Command gen writes the files generated from kmirror's configuration
// declarations: docs/config.md (the key reference) and
// docs/kmirror.sample.yaml (a copy of the sample embedded in
// core/config/reference). Run it from the
// repository root: go run ./core/config/gen
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kmirror/kmirror/core/config/reference"
)

func main() {
	root := flag.String("root", ".", "repository root (the directory holding go.mod)")
	flag.Parse()
	if _, err := os.Stat(filepath.Join(*root, "go.mod")); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %s is not the repository root (no go.mod): run it from the root or pass -root\n", *root)
		os.Exit(1)
	}
	files := map[string][]byte{
		filepath.Join(*root, "docs", "config.md"):           reference.Generate(),
		filepath.Join(*root, "docs", "kmirror.sample.yaml"): []byte(reference.Sample),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %v\n", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
