// Package telemetry sets up what refuel's binaries report about
// themselves: zap logs (also as the Temporal SDK's logger) and Prometheus
// metrics (also as the SDK's metrics handler).
package telemetry

import (
	"fmt"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger returns a console logger at the given level (debug, info,
// warn, error); json switches to JSON lines for log collectors.
func NewLogger(level string, json bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	cfg := zap.NewDevelopmentConfig()
	if json {
		cfg = zap.NewProductionConfig()
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.DisableStacktrace = true
	cfg.EncoderConfig.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	return cfg.Build()
}

// SDKLogger adapts zap to the Temporal SDK's key-value logger.
func SDKLogger(z *zap.Logger) log.Logger {
	return sdkLogger{z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type sdkLogger struct{ s *zap.SugaredLogger }

func (l sdkLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
func (l sdkLogger) Info(msg string, kv ...any)  { l.s.Infow(msg, kv...) }
func (l sdkLogger) Warn(msg string, kv ...any)  { l.s.Warnw(msg, kv...) }
func (l sdkLogger) Error(msg string, kv ...any) { l.s.Errorw(msg, kv...) }

// With implements log.WithLogger so SDK loggers keep their fields.
func (l sdkLogger) With(kv ...any) log.Logger { return sdkLogger{l.s.With(kv...)} }
