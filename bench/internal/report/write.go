package report

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
)

// Write writes report.md and the charts into dir, and the report to
// stdout.
func Write(dir string, rep Report) error {
	charts := reportCharts(rep)
	for _, c := range chartOrder {
		ch, ok := charts[c.file]
		if !ok {
			continue
		}
		var buf bytes.Buffer
		if err := ch.WritePNG(&buf); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), buf.Bytes(), 0o644); err != nil {
			return err
		}
		rep.Charts = append(rep.Charts, Chart{File: c.file, Title: c.title})
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		return err
	}
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, md.Bytes(), 0o644); err != nil {
		return err
	}
	os.Stdout.Write(md.Bytes())
	log.Printf("bench: report written to %s", path)
	return nil
}
