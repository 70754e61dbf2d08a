package devserver

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// serverLogger feeds the server's logs into the host's zap logger, dropping
// those below min. It exists instead of the server's own zap adapter because
// that one calls os.Exit on Fatal: with the default no-op logger the host
// process would vanish without a word. Here Fatal becomes a panic, which
// always prints its message and stack, and which a test reports as such.
type serverLogger struct {
	zl       *zap.Logger
	min      zapcore.Level
	settling *atomic.Bool
}

var _ log.Logger = serverLogger{}

// newServerLogger returns the server's logger. While settling is true (the
// server is starting or stopping) its components race each other and report
// failures that resolve by themselves: polls and dials to a service that is
// not up yet or already gone. Those are dropped so that a user sees only
// real problems; Temporal's own tests treat the same messages as expected.
func newServerLogger(zl *zap.Logger, min zapcore.Level, settling *atomic.Bool) serverLogger {
	return serverLogger{zl: zl.Named("temporal"), min: min, settling: settling}
}

// settlingErrors are the error messages known to be transient while the
// server starts or stops.
var settlingErrors = []string{
	"Queue reader unable to retrieve tasks",
	"error from matching when initializing",
	"error fetching user data from parent",
	"Failed to force load non-root partition",
}

func (l serverLogger) Debug(msg string, tags ...tag.Tag) { l.log(zapcore.DebugLevel, msg, tags) }
func (l serverLogger) Info(msg string, tags ...tag.Tag)  { l.log(zapcore.InfoLevel, msg, tags) }
func (l serverLogger) Warn(msg string, tags ...tag.Tag)  { l.log(zapcore.WarnLevel, msg, tags) }
func (l serverLogger) Error(msg string, tags ...tag.Tag) { l.log(zapcore.ErrorLevel, msg, tags) }

// DPanic is an error in production builds, which this is.
func (l serverLogger) DPanic(msg string, tags ...tag.Tag) { l.log(zapcore.ErrorLevel, msg, tags) }

func (l serverLogger) Panic(msg string, tags ...tag.Tag) {
	l.log(zapcore.ErrorLevel, msg, tags)
	panic("temporal server: " + msg)
}

func (l serverLogger) Fatal(msg string, tags ...tag.Tag) {
	l.log(zapcore.ErrorLevel, msg, tags)
	panic(fatal{msg: msg, err: errorOf(tags)})
}

// fatal is what Fatal panics with: the message and the error it was
// logged with, so that a start can tell a port taken from it (launch).
type fatal struct {
	msg string
	err error
}

func (f fatal) Error() string {
	if f.err == nil {
		return "temporal server: " + f.msg
	}
	return "temporal server: " + f.msg + ": " + f.err.Error()
}

func (f fatal) Unwrap() error { return f.err }

// errorOf is the first error among tags, or nil.
func errorOf(tags []tag.Tag) error {
	for _, t := range tags {
		if z, ok := t.(tag.ZapTag); ok && z.Field().Type == zapcore.ErrorType {
			if err, ok := z.Field().Interface.(error); ok {
				return err
			}
		}
	}
	return nil
}

// With lets the server attach its per-service tags once instead of on every
// call.
func (l serverLogger) With(tags ...tag.Tag) log.Logger {
	return serverLogger{zl: l.zl.With(fields(tags)...), min: l.min, settling: l.settling}
}

func (l serverLogger) log(level zapcore.Level, msg string, tags []tag.Tag) {
	if level < l.min || l.settling.Load() && l.transient(level, msg, tags) {
		return
	}
	if ce := l.zl.Check(level, msg); ce != nil {
		ce.Write(fields(tags)...)
	}
}

// transient reports whether a log written while settling is churn rather
// than a problem: any warning, an error caused by the stop cancelling a
// request, and the errors listed in settlingErrors. Who asked for info or
// debug logs is debugging the server and sees everything.
func (l serverLogger) transient(level zapcore.Level, msg string, tags []tag.Tag) bool {
	switch {
	case l.min < zapcore.WarnLevel:
		return false
	case level < zapcore.ErrorLevel:
		return true
	case level > zapcore.ErrorLevel:
		return false
	}
	known := func(prefix string) bool { return strings.HasPrefix(msg, prefix) }
	return slices.ContainsFunc(settlingErrors, known) || slices.ContainsFunc(tags, cancelled)
}

// cancelled reports whether t is an error tag for a cancelled context. The
// server often flattens the cause into a message, so the text is what counts.
func cancelled(t tag.Tag) bool {
	z, ok := t.(tag.ZapTag)
	if !ok || z.Field().Type != zapcore.ErrorType {
		return false
	}
	err, ok := z.Field().Interface.(error)
	return ok && strings.Contains(err.Error(), context.Canceled.Error())
}

// fields converts tags to zap fields; the server's tags are mostly zap
// fields already.
func fields(tags []tag.Tag) []zap.Field {
	out := make([]zap.Field, len(tags))
	for i, t := range tags {
		if z, ok := t.(tag.ZapTag); ok {
			out[i] = z.Field()
		} else {
			out[i] = zap.Any(t.Key(), t.Value())
		}
	}
	return out
}
