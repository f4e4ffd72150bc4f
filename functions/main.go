// Command handler is karpfunc's Azure Functions custom handler: one Go binary
// that the Functions host starts and invokes over HTTP, one route per
// function folder (functions/<Name>/function.json).
//
// The functions are thin: they decode the CloudEvent, then call the
// controllers in pkg/ that hold all the behaviour. Configuration comes from
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
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	slog.SetDefault(log)
	// controller-runtime's clients log through logr: send it to the same
	// handler, instead of its "SetLogger was never called" stack trace.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	deps := newDependencies(os.Getenv, log)
	obs := setupTelemetry(os.Getenv, log)
	srv := customhandler.NewServer(customhandler.ServerOptions{})
	srv.Register("Provision", customhandler.Handle(obs.instrument("Provision", deps.provisionFunc)))
	srv.Register("Lifecycle", customhandler.Handle(obs.instrument("Lifecycle", deps.lifecycleFunc)))
	srv.Register("Sweep", customhandler.Handle(obs.instrument("Sweep", deps.sweepFunc)))
	srv.Register("Interruption", customhandler.Handle(obs.instrument("Interruption", deps.interruptionFunc)))
	srv.Register("Disruption", customhandler.Handle(obs.instrument("Disruption", deps.disruptionFunc)))
	if err := srv.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("KARPFUNC_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
