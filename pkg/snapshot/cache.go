package snapshot

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Defaults of CacheOptions.
const (
	// DefaultPageSize is the page of the kinds read through the client (a
	// PageReader reads pods and nodes whole). Small pages multiply the
	// requests of a large kind until the list can outlast its continue
	// token, which expires at etcd's compaction (every 5 minutes) and
	// starts the list over; a page of 5,000 pods is a few tens of MB of
	// protobuf at most, decoded then stripped.
	DefaultPageSize = 5000
	// DefaultCatchUp bounds how long a pass waits for one kind's watch to
	// reach the pass's resourceVersion (the bookmark a nudged watch gets
	// arrives within about two seconds) before it relists the kind.
	DefaultCatchUp = 4 * time.Second
	// DefaultRelistBelow: when the freshness probe fails, a lagging kind
	// with at most this many objects is relisted at once, cheaper than
	// waiting for a bookmark.
	DefaultRelistBelow = 1000
	// nudgeTimeoutSeconds is the timeout of a nudged watch: the API server
	// sends a bookmark 2 s before a watch's deadline (cacheWatcher's
	// nextBookmarkTime in k8s.io/apiserver), so 3 s asks for one at once.
	nudgeTimeoutSeconds = 3
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// PageSize is the limit of each LIST page the client reads (the kinds
	// Pages does not read), and how often, in objects, the budget is
	// checked while Pages reads a kind in whole LISTs (default
	// DefaultPageSize).
	PageSize int64
	// CatchUp (default DefaultCatchUp).
	CatchUp time.Duration
	// RelistBelow (default DefaultRelistBelow; negative: never relist a
	// kind for being small).
	RelistBelow int
	// Pages, when set, reads pods and nodes (PageReader); else kube does.
	Pages *PageReader
	// Budget is the heap the cached objects may take, in bytes; zero
	// derives it from the memory limit (MemoryBudget).
	Budget int64
	// CheckShared keeps a copy of every object a snapshot shares with the
	// cache and, before the next snapshot (or at CheckShared), fails with
	// a SharedWriteError if a pass wrote to one. It doubles a pass's
	// memory: a diagnostic for tests (KARPFUNC_SNAPSHOT_CHECK_SHARED).
	CheckShared bool
	Logger      *slog.Logger
}

// Stats count what the cache read, since it was made.
type Stats struct {
	// Lists are LIST requests (pages and resourceVersion probes).
	Lists int64
	// Relists are kinds read whole again (cold start, 410 Gone, a kind
	// that could not catch up, a small lagging kind).
	Relists int64
	// ListedObjects are objects decoded from LISTs; WatchEvents from watches.
	ListedObjects, WatchEvents int64
	// Probes are freshness probes (streaming lists that match nothing).
	Probes int64
	// Nudges are watches restarted to get a bookmark.
	Nudges int64
}

// Cache is the warm snapshot: see the package documentation.
type Cache struct {
	kube   client.WithWatch
	opts   CacheOptions
	log    *slog.Logger
	kinds  []*kindCache
	passMu sync.Mutex // one freshness procedure at a time
	life   context.Context
	stop   context.CancelFunc
	warm   bool
	handed []handedOut // CheckShared: the last snapshot's shared objects

	lists, relists, listed, events, probes, nudges atomic.Int64
}

type kindCache struct {
	spec *kindSpec

	mu   sync.Mutex
	objs map[string]client.Object
	rv   uint64 // every change up to rv has been applied
	gen  uint64 // the watch goroutine that may apply events
	// listed is where the last list was whole; read in parts, its watch
	// skips the changes a namespace's LIST already held until it passes
	// the last part's resourceVersion.
	listed listedAt
	// watching is the WATCH being consumed now (numbered by watches),
	// 0 while there is none: a freshness probe proves the kind's view
	// only for a watch up before and after it (catchUpKind).
	watching, watches uint64
	// counted is how many objects the budget check counted (checkBudget,
	// before the cold start's lists): the first list's size hint.
	counted  int64
	cancel   context.CancelFunc
	advanced chan struct{} // closed (and replaced) when rv moves
	nudge    chan struct{}
	// failing: the last WATCH request failed (forbidden, unreachable); a
	// pass relists the kind rather than wait for a watch that is not there.
	failing atomic.Bool
	// keys and sorted hold objs in the API server's order as of the last
	// snapshot; changed are the keys changed since (sorted is rebuilt
	// from them, not sorted again whole); stale: rebuild all.
	keys    []string
	sorted  []client.Object
	changed map[string]struct{}
	stale   bool
}

// NewCache makes an empty cache; the first Cluster call lists everything.
// kube must be able to LIST and WATCH every kind of a Cluster.
func NewCache(kube client.WithWatch, opts CacheOptions) *Cache {
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.CatchUp <= 0 {
		opts.CatchUp = DefaultCatchUp
	}
	if opts.RelistBelow == 0 {
		opts.RelistBelow = DefaultRelistBelow
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Budget <= 0 {
		opts.Budget = MemoryBudget()
	}
	life, stop := context.WithCancel(context.Background())
	c := &Cache{kube: kube, opts: opts, log: opts.Logger, life: life, stop: stop}
	for i := range kinds {
		c.kinds = append(c.kinds, &kindCache{spec: &kinds[i], advanced: make(chan struct{}), nudge: make(chan struct{}, 1)})
	}
	return c
}

// Close stops the watches.
func (c *Cache) Close() { c.stop() }

// Stats reports what the cache has read so far.
func (c *Cache) Stats() Stats {
	return Stats{Lists: c.lists.Load(), Relists: c.relists.Load(), ListedObjects: c.listed.Load(),
		WatchEvents: c.events.Load(), Probes: c.probes.Load(), Nudges: c.nudges.Load()}
}

// Cluster returns a snapshot at least as fresh as the cluster when the call
// began (see the package documentation). A cold cache lists every kind; a
// warm one proves each kind has caught up with a quorum resourceVersion.
func (c *Cache) Cluster(ctx context.Context) (*Cluster, error) {
	started := time.Now()
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if err := c.checkShared(); err != nil {
		return nil, err
	}
	if !c.warm {
		if err := c.coldStart(ctx); err != nil {
			return nil, timeErr(ctx, "snapshot", started, err)
		}
		c.warm = true
		// The cold list leaves the heap's next GC target set from a heap
		// still growing (the last collection ran mid-list), so the first
		// warm passes would pay a whole mark of the cached objects, most
		// of a warm pass's CPU at AKS's limits. A collection now, beside
		// the cold pass's solve, sets the target from the cache as it
		// stays.
		go goruntime.GC()
	} else if err := c.catchUp(ctx); err != nil {
		return nil, timeErr(ctx, "snapshot", started, err)
	}
	if err := CheckTime(ctx, "snapshot", started); err != nil {
		return nil, err
	}
	return c.build(), nil
}

// coldStart checks the object counts against the budget, then lists every
// kind (pages of PageSize, each LIST a consistent read) and starts its watch.
func (c *Cache) coldStart(ctx context.Context) error {
	if err := c.checkBudget(ctx); err != nil {
		return err
	}
	return c.eachKind(ctx, func(ctx context.Context, kind *kindCache) error { return c.relist(ctx, kind) })
}

func (c *Cache) eachKind(ctx context.Context, f func(context.Context, *kindCache) error) error {
	errs := make([]error, len(c.kinds))
	var wg sync.WaitGroup
	for i, kind := range c.kinds {
		wg.Go(func() {
			if err := f(ctx, kind); err != nil {
				errs[i] = &ListError{Kind: kind.spec.name, error: err}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// catchUp reads the cluster's current resourceVersion once with a quorum
// read (quorumRV; etcd's revision is one counter for every kind), then
// brings every kind there at once (catchUpKind).
func (c *Cache) catchUp(ctx context.Context) error {
	target, err := c.quorumRV(ctx)
	if err != nil {
		return err
	}
	return c.eachKind(ctx, func(ctx context.Context, kind *kindCache) error {
		started := time.Now()
		how, err := c.catchUpKind(ctx, kind, target)
		c.log.Debug("snapshot: caught up", "kind", kind.spec.name, "how", how, "at", kind.currentRV(), "want", target, "took", time.Since(started))
		return err
	})
}

// catchUpKind proves the kind's view holds every change up to target:
//   - its watch has applied an event at or past target (a busy kind);
//   - else a freshness probe (probe) shows the API server's watch cache
//     for the kind is at or past target, its own watch, up before the
//     probe and still after it, having been handed every event up to it
//     (probeWatched; a relist or reconnect in progress is waited for);
//   - else (a server without the probe, a failing watch) the kind is
//     relisted when small or failing, or nudged for a bookmark and, failing
//     that within CatchUp, relisted.
func (c *Cache) catchUpKind(ctx context.Context, kind *kindCache, target uint64) (string, error) {
	if kind.waitFor(ctx, target, 0) {
		return "events", nil
	}
	if kind.failing.Load() {
		return "relist", c.relist(ctx, kind)
	}
	probeErr := c.probeWatched(ctx, kind, target)
	if probeErr == nil {
		return "probe", nil
	}
	if kind.waitFor(ctx, target, 0) {
		return "relist", nil // a relist in progress got there first
	}
	if err := ctx.Err(); err != nil {
		return "probe", fmt.Errorf("catching up to resourceVersion %d: %w", target, err)
	}
	c.log.Debug("snapshot: freshness probe failed", "kind", kind.spec.name, "error", probeErr)
	if kind.size() <= c.opts.RelistBelow {
		return "relist", c.relist(ctx, kind)
	}
	c.nudges.Add(1)
	select {
	case kind.nudge <- struct{}{}:
	default:
	}
	if kind.waitFor(ctx, target, c.opts.CatchUp) {
		return "bookmark", nil
	}
	if err := ctx.Err(); err != nil {
		return "bookmark", fmt.Errorf("catching up to resourceVersion %d: %w", target, err)
	}
	c.log.Warn("snapshot: watch did not catch up; relisting", "kind", kind.spec.name, "at", kind.currentRV(), "want", target, "bound", c.opts.CatchUp)
	return "relist", c.relist(ctx, kind)
}

// errNoWatch: the kind had no WATCH up to take the probe's word for.
var errNoWatch = errors.New("the kind's watch was not up throughout the probe")

// probeWatched probes the kind's freshness (probe), which proves the
// kind's view only if its own WATCH was being consumed before the probe
// and still is after it: one that has ended (a relist, a reconnect, a 410)
// may not have been handed the events up to target. A relist or a
// reconnect in progress is waited for (up to CatchUp).
func (c *Cache) probeWatched(ctx context.Context, kind *kindCache, target uint64) error {
	watch := kind.waitForWatch(ctx, c.opts.CatchUp)
	if watch == 0 {
		return errNoWatch
	}
	if err := c.probe(ctx, kind, target); err != nil {
		return err
	}
	if !kind.stillWatching(watch) {
		return errNoWatch
	}
	return nil
}

// probeSelector matches no object (a label both equal to a value and
// absent), so a probe's initial events are none.
const probeSelector = "karpfunc.azure.com/freshness-probe=none,!karpfunc.azure.com/freshness-probe"

// A probe names one object (probeName, in probeNamespace for the
// namespaced kinds) besides its selector: the API server then watches that
// one key, and its watch cache looks the initial events up by key instead
// of walking every object of the kind through the selector (k8s.io/apiserver
// registry.Store.WatchPredicate narrows to the key when the field selector
// matches a single name; cacher's getIntervalFromStoreLocked does GetByKey
// for it, OrderedListPrefix of the whole store otherwise), so a probe
// costs the same whatever the number of objects of the kind.
// The freshness the probe proves is the kind's watch cache's, whatever
// the key (cacher.Watch waits for the cache's resourceVersion first).
const (
	probeNamespace = "default"
	probeName      = "karpfunc-freshness-probe"
)

// probe asks the API server whether its watch cache of the kind has
// reached target: a streaming list (WATCH with sendInitialEvents=true,
// resourceVersion=target, resourceVersionMatch=NotOlderThan, bookmarks
// allowed) over a selector that matches nothing. The server waits until its
// watch cache is at target or later (asking etcd for progress when idle)
// and ends the initial events, here none, with a bookmark annotated
// k8s.io/initial-events-end carrying the cache's resourceVersion (KEP-3157,
// https://kubernetes.io/docs/reference/using-api/api-concepts/#streaming-lists).
// The cache's events up to that point were dispatched, in order, to every
// watcher of the kind, the cache's own watch among them: this is the
// guarantee consistent reads from the watch cache rest on (KEP-2340).
func (c *Cache) probe(ctx context.Context, kind *kindCache, target uint64) error {
	c.probes.Add(1)
	probeCtx, cancel := context.WithTimeout(ctx, c.opts.CatchUp)
	defer cancel()
	timeout := int64(c.opts.CatchUp / time.Second)
	sendInitialEvents := true
	watcher, err := c.kube.Watch(probeCtx, kind.spec.newList(), &client.ListOptions{Namespace: probeNamespace, Raw: &metav1.ListOptions{
		ResourceVersion: strconv.FormatUint(target, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents: &sendInitialEvents, AllowWatchBookmarks: true, LabelSelector: probeSelector,
		FieldSelector: "metadata.name=" + probeName, TimeoutSeconds: &timeout}})
	if err != nil {
		return err
	}
	defer watcher.Stop()
	for {
		select {
		case <-probeCtx.Done():
			return probeCtx.Err()
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				return errors.New("the probe's watch ended before its initial-events-end bookmark")
			}
			if ev.Type == watch.Error {
				return apierrors.FromObject(ev.Object)
			}
			done, err := initialEventsEnd(ev, target)
			if done || err != nil {
				return err
			}
		}
	}
}

// initialEventsEnd reports whether ev is a streaming list's
// initial-events-end bookmark at or past target.
func initialEventsEnd(ev watch.Event, target uint64) (bool, error) {
	obj, ok := ev.Object.(client.Object)
	if !ok || ev.Type != watch.Bookmark {
		return false, fmt.Errorf("the freshness probe got a %s event (%T); it matches no object", ev.Type, ev.Object)
	}
	if obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		return false, nil
	}
	rv, err := parseRV(obj.GetResourceVersion())
	if err != nil {
		return false, err
	}
	if rv < target {
		return false, fmt.Errorf("the freshness probe's bookmark is at resourceVersion %d, before %d", rv, target)
	}
	return true, nil
}

// quorumRV is the cluster's current resourceVersion, read from etcd's
// quorum: a LIST without resourceVersion is a consistent read, and its
// resourceVersion is etcd's revision, one counter for every kind.
func (c *Cache) quorumRV(ctx context.Context) (uint64, error) {
	list := &corev1.NamespaceList{}
	c.lists.Add(1)
	if err := c.kube.List(ctx, list, client.Limit(1)); err != nil {
		return 0, &ListError{Kind: "namespaces", error: err}
	}
	return parseRV(list.GetResourceVersion())
}

func parseRV(s string) (uint64, error) {
	rv, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q is not a number: %w", s, err)
	}
	return rv, nil
}

// relist reads the kind whole, replaces what the cache holds and restarts
// its watch from the list's resourceVersion.
func (c *Cache) relist(ctx context.Context, kind *kindCache) error {
	c.relists.Add(1)
	started := time.Now()
	objs, at, err := c.listAll(ctx, kind.spec, kind.sizeHint())
	if err != nil {
		return err
	}
	c.log.Debug("snapshot: listed", "kind", kind.spec.name, "objects", len(objs), "resourceVersion", at.floor, "parts", len(at.namespaces), "took", time.Since(started))
	kind.mu.Lock()
	defer kind.mu.Unlock()
	if kind.cancel != nil {
		kind.cancel()
	}
	kind.gen++
	kind.watching = 0
	kind.objs, kind.rv, kind.listed, kind.stale = objs, at.floor, at, true
	kind.signalLocked()
	wctx, cancel := context.WithCancel(c.life)
	kind.cancel = cancel
	go c.watchLoop(wctx, kind, kind.gen)
	return nil
}

// listAll reads a kind whole: streamed LISTs (Pages: pods one per
// namespace, each whole at its own resourceVersion, none older than the
// namespaces' list), or pages every one after the first of which is read
// at the first page's resourceVersion, so the whole list is one consistent
// view. An expired continue token starts over.
func (c *Cache) listAll(ctx context.Context, spec *kindSpec, sizeHint int) (map[string]client.Object, listedAt, error) {
	for {
		objs, at, err := c.listPages(ctx, spec, sizeHint)
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			continue
		}
		return objs, at, err
	}
}

// listPages reads spec whole into a map sized for sizeHint objects, so a
// large kind's map is allocated once rather than grown one doubling at a
// time.
func (c *Cache) listPages(ctx context.Context, spec *kindSpec, sizeHint int) (map[string]client.Object, listedAt, error) {
	objs := make(map[string]client.Object, sizeHint)
	add := func(obj client.Object) {
		ingest(obj)
		objs[key(obj)] = obj
	}
	for read, err := range c.pagesOf(ctx, spec, add) {
		if err != nil {
			return nil, listedAt{}, err
		}
		c.lists.Add(1)
		c.listed.Add(read.count)
		if need := int64(len(objs)) * spec.bytesPerObject; need > c.opts.Budget {
			return nil, listedAt{}, &TooLargeError{Counts: map[string]int64{spec.name: int64(len(objs))}, Need: need, Budget: c.opts.Budget, Partial: read.more}
		}
		if !read.more {
			at, err := read.listed()
			return objs, at, err
		}
	}
	return nil, listedAt{}, fmt.Errorf("listing %s: the pages ended without a last page", spec.name)
}

// pagesOf reads spec's pages, handing each object to add: with Pages, the
// next page on its way while one decodes, when it reads the kind; else
// with the client.
func (c *Cache) pagesOf(ctx context.Context, spec *kindSpec, add func(client.Object)) iter.Seq2[page, error] {
	if c.opts.Pages != nil && spec.proto != nil {
		return c.opts.Pages.pages(ctx, spec.proto, c.opts.PageSize, add)
	}
	return func(yield func(page, error) bool) {
		for cont := ""; ; {
			list := spec.newList()
			if err := c.kube.List(ctx, list, client.Limit(c.opts.PageSize), client.Continue(cont)); err != nil {
				yield(page{}, err)
				return
			}
			err := meta.EachListItem(list, func(item runtime.Object) error {
				add(item.(client.Object))
				return nil
			})
			cont = list.GetContinue()
			if !yield(page{count: int64(meta.LenList(list)), more: cont != "", rv: list.GetResourceVersion()}, err) || err != nil || cont == "" {
				return
			}
		}
	}
}

// ingest readies an object as it arrives: compacted (Compact) and, for a
// NodeClaim, its status conditions set up as karpenter's StatusConditions
// sets them up on its first call (operatorpkg status.ConditionTypes.For
// sets every missing condition Unknown, in place). The passes call that
// accessor on the NodeClaims the cache shares with them, often with
// several passes at once; with every condition there, it only reads.
func ingest(obj client.Object) {
	Compact(obj)
	if nc, ok := obj.(*karpv1.NodeClaim); ok {
		nc.StatusConditions()
	}
}

func key(o client.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// watchLoop keeps the kind up to date from its resourceVersion until its
// context ends (a relist replaced it, or the cache closed). A 410 Gone
// relists; other failures watch again after a short backoff.
func (c *Cache) watchLoop(ctx context.Context, kind *kindCache, gen uint64) {
	nudged := false
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		timeout := int64(300 + rand.IntN(300)) // as client-go's reflector: 5-10 minutes
		if nudged {
			timeout = nudgeTimeoutSeconds
		}
		watcher, err := c.kube.Watch(ctx, kind.spec.newList(), &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatUint(kind.currentRV(), 10), AllowWatchBookmarks: true, TimeoutSeconds: &timeout}})
		kind.failing.Store(err != nil && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err))
		if err == nil {
			watch := kind.watchStarted(gen)
			nudged, err = c.consume(ctx, kind, gen, watcher)
			kind.watchEnded(watch)
			watcher.Stop()
		}
		switch {
		case err == nil:
			backoff = 100 * time.Millisecond
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			c.log.Info("snapshot: watch expired; relisting", "kind", kind.spec.name, "error", err)
			if rerr := c.relist(ctx, kind); rerr != nil && ctx.Err() == nil {
				c.log.Warn("snapshot: relist failed", "kind", kind.spec.name, "error", rerr)
				sleep(ctx, backoff)
				continue
			}
			return // relist started the next watch
		case ctx.Err() == nil:
			c.log.Warn("snapshot: watch failed", "kind", kind.spec.name, "error", err)
			sleep(ctx, backoff)
			backoff = min(2*backoff, time.Minute)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// consume applies a watch's events until it ends; nudged reports that it
// was ended to ask the server for a bookmark.
func (c *Cache) consume(ctx context.Context, kind *kindCache, gen uint64, w watch.Interface) (nudged bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-kind.nudge:
			return true, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			if ev.Type == watch.Error {
				return false, apierrors.FromObject(ev.Object)
			}
			c.events.Add(1)
			if err := kind.apply(gen, ev); err != nil {
				return false, err
			}
		}
	}
}

// apply records one event if gen's watch is still the kind's and the
// kind's list did not already hold it.
func (k *kindCache) apply(gen uint64, ev watch.Event) error {
	obj, ok := ev.Object.(client.Object)
	if !ok {
		return fmt.Errorf("watch event %s carries %T", ev.Type, ev.Object)
	}
	rv, err := parseRV(obj.GetResourceVersion())
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		return nil
	}
	if !k.heldLocked(obj, rv) {
		k.recordLocked(ev.Type, obj)
	}
	if rv > k.rv {
		k.rv = rv
		k.signalLocked()
	}
	return nil
}

// heldLocked reports whether the kind's list, read in parts, already held
// obj's change at rv: its namespace's LIST was whole at rv or later. Past
// the last part's resourceVersion, no list holds any change.
func (k *kindCache) heldLocked(obj client.Object, rv uint64) bool {
	if k.listed.namespaces == nil {
		return false
	}
	if rv > k.listed.ceiling {
		k.listed.namespaces = nil
		return false
	}
	return k.listed.holds(obj, rv)
}

func (k *kindCache) recordLocked(change watch.EventType, obj client.Object) {
	switch change {
	case watch.Added, watch.Modified:
		ingest(obj)
		k.objs[key(obj)] = obj
		k.noteLocked(key(obj))
	case watch.Deleted:
		delete(k.objs, key(obj))
		k.noteLocked(key(obj))
	}
}

func (k *kindCache) signalLocked() {
	close(k.advanced)
	k.advanced = make(chan struct{})
}

// watchStarted numbers a WATCH of gen's goroutine as the one being
// consumed (0 if gen's goroutine is no longer the kind's).
func (k *kindCache) watchStarted(gen uint64) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen != gen {
		return 0
	}
	k.watches++
	k.watching = k.watches
	k.signalLocked()
	return k.watching
}

// watchEnded records that watch is no longer consumed.
func (k *kindCache) watchEnded(watch uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if watch != 0 && k.watching == watch {
		k.watching = 0
		k.signalLocked()
	}
}

// waitForWatch is the WATCH being consumed, waiting up to d for one (a
// relist or a reconnect in progress); 0 if none came.
func (k *kindCache) waitForWatch(ctx context.Context, d time.Duration) uint64 {
	var watch uint64
	k.await(ctx, d, func() bool {
		watch = k.watching
		return watch != 0
	})
	return watch
}

// stillWatching reports whether watch is still the one being consumed.
func (k *kindCache) stillWatching(watch uint64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.watching == watch
}

func (k *kindCache) currentRV() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rv
}

func (k *kindCache) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.objs)
}

// sizeHint is how many objects a list of the kind is likely to hold: as
// many as it holds now, or as the budget check counted before the first.
func (k *kindCache) sizeHint() int {
	return max(k.size(), int(min(k.counted, maxSizeHint)))
}

// waitFor reports whether the k reaches rv within d.
func (k *kindCache) waitFor(ctx context.Context, rv uint64, d time.Duration) bool {
	return k.await(ctx, d, func() bool { return k.rv >= rv })
}

// await reports whether done, called under k.mu, holds within d; it is
// checked again each time the kind advances (signalLocked).
func (k *kindCache) await(ctx context.Context, d time.Duration, done func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		holds, advanced := done(), k.advanced
		k.mu.Unlock()
		if holds {
			return true
		}
		select {
		case <-advanced:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// build hands out the cached objects: the kinds the passes write in place
// as deep copies, the rest shared (a pass copies what it writes; see the
// package documentation).
func (c *Cache) build() *Cluster {
	out := &Cluster{}
	for _, kind := range c.kinds {
		kind.mu.Lock()
		// orderedLocked's slice is never written once made (changes make a
		// new one), and fill copies it into the pass's own typed slice, which
		// a pass may reorder.
		objs := kind.orderedLocked()
		kind.mu.Unlock()
		if kind.spec.copyOnRead {
			objs = slices.Clone(objs)
			for i, o := range objs {
				objs[i] = o.DeepCopyObject().(client.Object)
			}
		} else if c.opts.CheckShared {
			c.recordShared(kind, objs)
		}
		kind.spec.fill(out, objs)
	}
	return out
}

func (k *kindCache) noteLocked(name string) {
	if k.changed == nil {
		k.changed = map[string]struct{}{}
	}
	k.changed[name] = struct{}{}
}

// orderedLocked is objs in key order (etcd's, so the API server's): sorted
// whole after a relist, else the last order with the changed keys merged in.
func (k *kindCache) orderedLocked() []client.Object {
	if k.stale || k.keys == nil {
		k.keys = make([]string, 0, len(k.objs))
		for name := range k.objs {
			k.keys = append(k.keys, name)
		}
		slices.Sort(k.keys)
		k.changed, k.stale = nil, false
		k.sorted = make([]client.Object, len(k.keys))
		for i, name := range k.keys {
			k.sorted[i] = k.objs[name]
		}
		return k.sorted
	}
	if len(k.changed) == 0 {
		return k.sorted
	}
	changed := make([]string, 0, len(k.changed))
	for name := range k.changed {
		changed = append(changed, name)
	}
	slices.Sort(changed)
	keys := make([]string, 0, len(k.objs))
	sorted := make([]client.Object, 0, len(k.objs))
	i := 0
	for _, name := range changed {
		for ; i < len(k.keys) && k.keys[i] < name; i++ {
			keys, sorted = append(keys, k.keys[i]), append(sorted, k.sorted[i])
		}
		if i < len(k.keys) && k.keys[i] == name {
			i++ // its current version, if any, is added below
		}
		if obj, ok := k.objs[name]; ok {
			keys, sorted = append(keys, name), append(sorted, obj)
		}
	}
	keys, sorted = append(keys, k.keys[i:]...), append(sorted, k.sorted[i:]...)
	k.keys, k.sorted, k.changed = keys, sorted, nil
	return sorted
}
