// Command relay is karpfunc's in-cluster relay: it watches Pods, Nodes and
// karpenter.sh/v1 NodeClaims with read-only access and publishes provisioning
// and lifecycle triggers to the message bus (Azure Service Bus in production,
// the local Functions host's bus in development; see bus.FromEnv).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/go-logr/logr"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	// The relay image has no base layer and so no CA bundle: use these
	// roots when the system has none (Service Bus, Entra ID over TLS).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/telemetry"
	"github.com/karpfunc/karpfunc/pkg/version"
	"github.com/karpfunc/karpfunc/relay/internal/watch"
)

type flags struct {
	kubeconfig string
	cluster    string
	batchIdle  time.Duration
	batchMax   time.Duration
	resync     time.Duration
	healthAddr string
	logLevel   slog.Level
	kubeQPS    float64
	kubeBurst  int
}

func parseFlags(args []string) (flags, error) {
	var parsed flags
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	fs.StringVar(&parsed.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means the in-cluster service account")
	fs.StringVar(&parsed.cluster, "cluster-name", "", "name of this cluster in every event and the provisioning session ID (required)")
	fs.DurationVar(&parsed.batchIdle, "batch-idle-duration", time.Second, "close a provisioning window after this long without a new unschedulable pod")
	fs.DurationVar(&parsed.batchMax, "batch-max-duration", 10*time.Second, "close a provisioning window at the latest this long after it opened")
	fs.DurationVar(&parsed.resync, "resync", 30*time.Second, "re-announce still-unschedulable pods this often (safety net for lost triggers)")
	fs.StringVar(&parsed.healthAddr, "health-probe-bind-address", ":8081", "address serving /healthz and /readyz; empty disables")
	fs.TextVar(&parsed.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.Float64Var(&parsed.kubeQPS, "kube-api-qps", 20, "client QPS towards the API server")
	fs.IntVar(&parsed.kubeBurst, "kube-api-burst", 40, "client burst towards the API server")
	if err := fs.Parse(args); err != nil {
		return parsed, err
	}
	if fs.NArg() > 0 {
		return parsed, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	switch {
	case parsed.cluster == "":
		return parsed, errors.New("--cluster-name is required")
	case parsed.batchIdle <= 0 || parsed.batchMax <= 0 || parsed.resync <= 0:
		return parsed, errors.New("--batch-idle-duration, --batch-max-duration and --resync must be positive")
	case parsed.batchIdle > parsed.batchMax:
		return parsed, fmt.Errorf("--batch-idle-duration %s is longer than --batch-max-duration %s", parsed.batchIdle, parsed.batchMax)
	}
	return parsed, nil
}

func main() {
	flagValues, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: flagValues.logLevel}))
	slog.SetDefault(log)
	// controller-runtime's clients log through logr: send it to the same
	// handler, instead of its "SetLogger was never called" stack trace.
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	klog.SetSlogLogger(log.With("component", "client-go"))
	// Which build runs, once per process: what a bug report quotes.
	log.Info("karpfunc relay starting", version.Get().LogAttrs()...)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flagValues, log); err != nil {
		log.Error("relay failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags, log *slog.Logger) error {
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = float32(f.kubeQPS)
	cfg.Burst = f.kubeBurst
	cfg.UserAgent = "karpfunc-relay"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	pub, err := bus.FromEnv()
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := pub.Close(closeCtx); err != nil {
			log.Warn("closing the bus publisher", "error", err)
		}
	}()

	// Metrics for Prometheus on the health address (/metrics); traces,
	// and metrics too, over OTLP when OTEL_EXPORTER_OTLP_* say where.
	tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "karpfunc-relay", Getenv: os.Getenv, Prometheus: true, Logger: log})
	if err != nil {
		log.Error("telemetry settings not usable; the relay runs without that telemetry", "error", err)
	}
	defer tel.Shutdown(context.Background())

	var ready atomic.Bool
	if f.healthAddr != "" {
		srv := healthServer(f.healthAddr, &ready, tel.MetricsHandler())
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("health server stopped", "error", err)
			}
		}()
		defer srv.Close()
	}
	return watch.Run(ctx, watch.Options{
		Cluster: f.cluster, Kube: kube, Metadata: meta, Publisher: pub,
		BatchIdleDuration: f.batchIdle, BatchMaxDuration: f.batchMax, Resync: f.resync,
		Logger: log, OnSynced: func() { ready.Store(true) },
	})
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// healthServer answers /healthz while the process runs and /readyz once the
// informers have synced, so a rollout waits for a relay that actually watches;
// /metrics serves the Prometheus exposition.
func healthServer(addr string, ready *atomic.Bool, metrics http.Handler) *http.Server {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
