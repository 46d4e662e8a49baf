package logging

import (
	"io"
	"log"
	"time"

	"github.com/hashicorp/go-hclog"
)

// durations converts every time.Duration in args to its String form ("1.5s")
// so that both formats render durations alike: hclog's JSON format would
// write a time.Duration as an integer of nanoseconds. args is not modified;
// a copy is returned when a conversion is needed.
func durations(args []any) []any {
	var out []any
	for i, a := range args {
		d, ok := a.(time.Duration)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = d.String()
	}
	if out == nil {
		return args
	}
	return out
}

// logger is an hclog.Logger that renders time.Duration arguments as strings;
// its sub-loggers (Named, With, ResetNamed) do too.
type logger struct{ hclog.Logger }

func wrap(l hclog.Logger) hclog.Logger { return logger{l} }

func (l logger) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, durations(args)...)
}
func (l logger) Trace(msg string, args ...any) { l.Logger.Trace(msg, durations(args)...) }
func (l logger) Debug(msg string, args ...any) { l.Logger.Debug(msg, durations(args)...) }
func (l logger) Info(msg string, args ...any)  { l.Logger.Info(msg, durations(args)...) }
func (l logger) Warn(msg string, args ...any)  { l.Logger.Warn(msg, durations(args)...) }
func (l logger) Error(msg string, args ...any) { l.Logger.Error(msg, durations(args)...) }
func (l logger) ImpliedArgs() []any            { return durations(l.Logger.ImpliedArgs()) }
func (l logger) With(args ...any) hclog.Logger { return wrap(l.Logger.With(durations(args)...)) }
func (l logger) Named(name string) hclog.Logger {
	return wrap(l.Logger.Named(name))
}
func (l logger) ResetNamed(name string) hclog.Logger {
	return wrap(l.Logger.ResetNamed(name))
}

// interceptLogger is the root logger: a logger whose sink and output methods
// delegate to the hclog.InterceptLogger it wraps.
type interceptLogger struct {
	logger
	il hclog.InterceptLogger
}

func wrapIntercept(il hclog.InterceptLogger) hclog.InterceptLogger {
	return interceptLogger{logger: logger{il}, il: il}
}

func (l interceptLogger) RegisterSink(sink hclog.SinkAdapter)   { l.il.RegisterSink(sink) }
func (l interceptLogger) DeregisterSink(sink hclog.SinkAdapter) { l.il.DeregisterSink(sink) }

// StandardLoggerIntercept is StandardLogger, as in hclog (the interface still
// has the deprecated name).
func (l interceptLogger) StandardLoggerIntercept(opts *hclog.StandardLoggerOptions) *log.Logger {
	return l.il.StandardLogger(opts)
}

// StandardWriterIntercept is StandardWriter, as in hclog.
func (l interceptLogger) StandardWriterIntercept(opts *hclog.StandardLoggerOptions) io.Writer {
	return l.il.StandardWriter(opts)
}

func (l interceptLogger) NamedIntercept(name string) hclog.InterceptLogger {
	return wrapIntercept(l.il.NamedIntercept(name))
}
func (l interceptLogger) ResetNamedIntercept(name string) hclog.InterceptLogger {
	return wrapIntercept(l.il.ResetNamedIntercept(name))
}
