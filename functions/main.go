// Command handler is karpfunc's Azure Functions custom handler: one Go binary
// that the Functions host starts and invokes over HTTP, one route per
// function folder (functions/<Name>/function.json).
//
// The functions are thin: one adapter (adapter.go) decodes the CloudEvent,
// dispatches on its type to a handler that calls the controllers in pkg/
// holding all the behaviour, sends the continuations the handler asks for
// and reports failures onto the objects concerned. Configuration comes from
// app settings (environment variables); see config.go.
package main

import (
	"context"
	"fmt"
	"github.com/go-logr/logr"
	"log/slog"
	"os"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpfunc/karpfunc/functions/internal/customhandler"
	"github.com/karpfunc/karpfunc/pkg/version"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(log)
	// controller-runtime's clients log through logr: send it to the same
	// handler, instead of its "SetLogger was never called" stack trace.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	// Which build runs, once per process: what a bug report quotes.
	log.Info("karpfunc handler starting", version.Get().LogAttrs()...)
	deps := newDependencies(os.Getenv, log)
	obs := setupTelemetry(os.Getenv, log)
	srv := customhandler.NewServer(customhandler.ServerOptions{})
	for _, fn := range deps.functions() {
		srv.Register(fn.name, customhandler.Handle(obs.instrument(fn.name, adapt(fn, deps))))
	}
	if err := srv.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}

// functions are the Azure Functions this handler serves, one per folder
// under functions/ (<Name>/function.json).
func (d *dependencies) functions() []function {
	return []function{d.provisionFunction(), d.lifecycleFunction(), d.sweepFunction(), d.interruptionFunction(), d.disruptionFunction()}
}

func logLevel() slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(os.Getenv("KARPFUNC_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return level
}
