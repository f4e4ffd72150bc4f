package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/disruption"
	"github.com/karpfunc/karpfunc/pkg/disruption/live"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

const (
	location    = "eastus"
	clusterName = "test"
)

// counter counts what the instance reads from the API server: every
// response body's bytes, and requests.
type counter struct{ bytes, requests atomic.Int64 }

func (c *counter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		c.requests.Add(1)
		if resp != nil && resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.bytes}
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	read, err := b.ReadCloser.Read(p)
	b.n.Add(int64(read))
	return read, err
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, ...bus.Message) error { return nil }
func (nopPublisher) Close(context.Context) error                           { return nil }

// runInstance is one handler instance: a cold pass, the changes, a warm pass.
func runInstance(ctx context.Context, which, kubeconfig string, s shape, changes int, cacheOpts snapshot.CacheOptions) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	writer := rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100 // as the handler
	cfg.DisableCompression = !apiCompression
	reads := &counter{}
	cfg.Wrap(reads.wrap)
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: apis.Scheme})
	if err != nil {
		return err
	}
	other, err := client.New(writer, client.Options{Scheme: apis.Scheme})
	if err != nil {
		return err
	}
	cacheLog := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cacheOpts.Logger = cacheLog.With("instance", which)
	if !plainList {
		if cacheOpts.Pages, err = snapshot.NewPageReader(cfg); err != nil {
			return err
		}
		cacheOpts.Pages.ListsAtOnce = listsAtOnce
	}
	cache := snapshot.NewCache(kube, cacheOpts)
	defer cache.Close()
	snapKube := snapshot.WithCache(kube, cache)
	cat, err := catalog.Default(location)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	prov := provisioning.New(provisioning.Options{Kube: snapKube, Catalog: cat, ClusterName: clusterName,
		Clock: clock.RealClock{}, Logger: quiet})
	dis := live.New(live.Options{Kube: snapKube, Catalog: cat, Replacer: prov, ClusterName: clusterName,
		Clock: clock.RealClock{}, Logger: quiet, Engine: disruption.Options{TimeLimit: time.Minute}})
	pass := func(ctx context.Context) (string, error) {
		if which == "provision" {
			res, err := prov.Provision(ctx)
			return fmt.Sprintf("solve %s; %d pending, %d NodeClaims created, %d launching, %d events not written", res.SolveDuration.Round(time.Millisecond),
				res.PendingPods, len(res.Created), len(res.Launching), res.EventsNotWritten.Total()), err
		}
		res, err := dis.Pass(ctx, live.PodEvents{})
		return fmt.Sprintf("decided %q, %d refused kinds", res.Decided, len(res.Refused)), err
	}
	served, err := newPodListsServed(writer)
	if err != nil {
		return err
	}
	m := &meter{reads: reads, cache: cache, served: served}
	if err := m.measure(ctx, "cold "+which, profiled("cold "+which, pass)); err != nil {
		return err
	}
	round := 0
	if which == "disruption" {
		round = 1
	}
	if err := makeChanges(ctx, other, s, changes, round); err != nil {
		return err
	}
	return m.measure(ctx, "warm "+which, profiled("warm "+which, pass))
}

// plainList: the instance's cache reads every kind with the client's List
// (-plain-list), not pods and nodes with a snapshot.PageReader.
var plainList bool

// listsAtOnce is the instance's PageReader.ListsAtOnce.
var listsAtOnce int

// apiCompression: the instance asks the API server for gzip
// (-api-compression, default true), as the handler does unless
// KARPFUNC_API_COMPRESSION=false.
var apiCompression bool

// cpuProfile is the path -cpuprofile writes each pass's CPU profile to,
// with the pass's name appended (".cold-provision", ".warm-disruption").
var cpuProfile string

// profiled is pass, under a CPU profile when -cpuprofile is set.
func profiled(name string, pass func(context.Context) (string, error)) func(context.Context) (string, error) {
	if cpuProfile == "" {
		return pass
	}
	return func(ctx context.Context) (string, error) {
		file, err := os.Create(cpuProfile + "." + strings.ReplaceAll(name, " ", "-"))
		if err != nil {
			return "", err
		}
		defer func() { _ = file.Close() }()
		if err := pprof.StartCPUProfile(file); err != nil {
			return "", err
		}
		defer pprof.StopCPUProfile()
		return pass(ctx)
	}
}

type meter struct {
	served         *podListsServed
	reads          *counter
	cache          *snapshot.Cache
	bytes, reqs    int64
	listed, events int64
}

// measure runs one pass and prints its figures. Reads count from the end
// of the previous pass: a warm pass's include the watch events the
// changes caused.
func (m *meter) measure(ctx context.Context, name string, pass func(context.Context) (string, error)) error {
	resetPeakRSS()
	stopHeap, peakHeap := sampleHeap()
	servedBefore, err := m.served.read(ctx)
	if err != nil {
		return err
	}
	cpuBefore := readCPU()
	start := time.Now()
	summary, err := pass(ctx)
	wall := time.Since(start)
	cpu := readCPU().since(cpuBefore)
	stopHeap()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	servedAfter, err := m.served.read(ctx)
	if err != nil {
		return err
	}
	st := m.cache.Stats()
	bytes, reqs := m.reads.bytes.Load(), m.reads.requests.Load()
	fmt.Printf("%-17s wall %8s  peak RSS %5d MB  peak heap %5d MB  read %8.1f MB in %5d requests, %7d objects (%d listed, %d watch events)  %s\n%17s %s\n",
		name, wall.Round(time.Millisecond), peakRSS()>>20, *peakHeap>>20, float64(bytes-m.bytes)/(1<<20), reqs-m.reqs,
		st.ListedObjects-m.listed+st.WatchEvents-m.events, st.ListedObjects-m.listed, st.WatchEvents-m.events, summary, "", cpu+"; "+servedSince(servedBefore, servedAfter))
	m.bytes, m.reqs, m.listed, m.events = bytes, reqs, st.ListedObjects, st.WatchEvents
	return nil
}

// resetPeakRSS resets the kernel's high-water mark of this process's RSS
// (VmHWM), so peakRSS is the pass's own.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func peakRSS() int64 { return highWaterRSS("/proc/self/status") }

// highWaterRSS reads VmHWM from a /proc/<pid>/status file (0 if it cannot).
func highWaterRSS(statusPath string) int64 {
	status, err := os.ReadFile(statusPath)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sampleHeap samples the live heap every 5 ms until stopped.
func sampleHeap() (stop func(), peak *int64) {
	peak = new(int64)
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		ticker := time.NewTicker(5 * time.Millisecond)
		defer ticker.Stop()
		for {
			metrics.Read(sample)
			if live := int64(sample[0].Value.Uint64()); live > *peak {
				*peak = live
			}
			select {
			case <-done:
				return
			case <-ticker.C:
			}
		}
	}()
	return func() { close(done); <-finished }, peak
}

// makeChanges makes n changes through the API server: half new pending
// pods, 40% bound pods deleted, the rest nodes relabelled. round keeps
// each instance's changes apart (the second instance creates other pods,
// deletes others).
func makeChanges(ctx context.Context, kube client.Client, s shape, n, round int) error {
	creates, deletes := n/2, n*2/5
	for i := range creates {
		if err := createPod(ctx, kube, s.pods+s.pending+round*n+i, s, true); err != nil {
			return err
		}
	}
	stride := s.pods / max(deletes, 1)
	for i := range deletes {
		pod, _ := boundPod(i*stride+round, s, false)
		if err := kube.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	for i := range n - creates - deletes {
		node := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: nodeName((round*n + i) % s.nodes)}, node); err != nil {
			return err
		}
		node.Labels["bench/changed"] = strconv.Itoa(i)
		if err := kube.Update(ctx, node); err != nil {
			return err
		}
	}
	return nil
}
