// Command funchost runs the local Azure Functions host standalone: it reads
// host.json and the function folders, starts the custom handler, serves the
// local Service Bus's HTTP API on loopback, and prints its URL.
//
//	funchost --app-root . --functions-dir functions --bus-addr 127.0.0.1:7080 \
//	    --setting PROVISION_QUEUE=provision
//
// Publish with POST <bus>/queues/<queue>/messages (a JSON array of
// bus.Message); inspect with GET <bus>/queues and GET <bus>/queues/<queue>/deadletter.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/karpfunc/karpfunc/internal/funchost"
)

type settingsFlag map[string]string

func (s settingsFlag) String() string { return fmt.Sprint(map[string]string(s)) }

func (s settingsFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	s[name] = val
	return nil
}

func main() {
	settings := settingsFlag{}
	var opts funchost.Options
	flag.StringVar(&opts.AppRoot, "app-root", ".", "directory holding host.json")
	flag.StringVar(&opts.FunctionsDir, "functions-dir", "", "directory holding the <Name>/function.json folders (default: the app root; relative to it)")
	flag.StringVar(&opts.Executable, "executable", "", "handler executable, overriding host.json's defaultExecutablePath")
	flag.StringVar(&opts.BusAddr, "bus-addr", "127.0.0.1:0", "loopback address for the bus's HTTP API")
	flag.IntVar(&opts.MaxDeliveryCount, "max-delivery-count", 10, "deliveries before a message is dead-lettered")
	flag.DurationVar(&opts.RetryDelay, "retry-delay", time.Second, "pause before an abandoned message is redelivered")
	flag.Var(settings, "setting", "app setting NAME=VALUE (repeatable); also passed to the handler's environment")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "funchost: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	opts.Settings = settings

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, err := funchost.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "funchost:", err)
		os.Exit(1)
	}
	fmt.Println(host.BusURL())
	<-ctx.Done()
	host.Stop()
}
