// Package logging builds kmirror's hclog logger from configuration. Every
// component logs through a named sub-logger of the root built here (for
// example "kmirror.daemon", later "kmirror.mirror.<name>" and
// "plugin.<kind>.<name>"), so that one setting controls level and format.
package logging

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// Formats accepted by log.format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// New returns the root logger writing to w at level ("trace", "debug", "info",
// "warn" or "error") in format ("text" or "json").
func New(w io.Writer, level, format string) (hclog.InterceptLogger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	var json bool
	switch strings.ToLower(format) {
	case FormatText, "":
	case FormatJSON:
		json = true
	default:
		return nil, fmt.Errorf("log format %q is not one of text, json", format)
	}
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:              "kmirror",
		Level:             lvl,
		Output:            w,
		JSONFormat:        json,
		IncludeLocation:   false,
		DisableTime:       false,
		Color:             hclog.ColorOff,
		IndependentLevels: false,
	})
	return wrapIntercept(il), nil
}

// ParseLevel maps a log.level value to an hclog level.
func ParseLevel(level string) (hclog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "trace":
		return hclog.Trace, nil
	case "debug":
		return hclog.Debug, nil
	case "info", "":
		return hclog.Info, nil
	case "warn", "warning":
		return hclog.Warn, nil
	case "error":
		return hclog.Error, nil
	}
	return hclog.NoLevel, fmt.Errorf("log level %q is not one of trace, debug, info, warn, error", level)
}
