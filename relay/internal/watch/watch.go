// Package watch is the relay proper: shared informers on Pods, Nodes and
// karpenter.sh/v1 NodeClaims, whose handlers feed the batcher and the sender.
// It only reads the cluster (list and watch), matching the relay's RBAC.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/relay/internal/batcher"
	"github.com/karpfunc/karpfunc/relay/internal/events"
	"github.com/karpfunc/karpfunc/relay/internal/sender"
)

// NodeClaims is the resource the relay watches for deletions.
var NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// NodePools and AKSNodeClasses are watched for spec changes (drift).
var (
	NodePools      = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	AKSNodeClasses = schema.GroupVersionResource{Group: "karpenter.azure.com", Version: "v1beta1", Resource: "aksnodeclasses"}
	// NodeOverlays change prices and capacities: a change asks for a
	// Disruption pass like a NodePool's (consolidation reprices, and the
	// overlays' status is written).
	NodeOverlays    = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1alpha1", Resource: "nodeoverlays"}
	disruptionSlot  = 5 * time.Second
	causeSpecChange = "spec-changed"
	// causeSpecAdded and causeSpecDeleted: a NodePool or AKSNodeClass
	// appeared or went; their status (and the NodePools that reference a
	// class) follows. causeRelayStarted: the relay (re)started with some.
	causeSpecAdded    = "spec-added"
	causeSpecDeleted  = "spec-deleted"
	causeRelayStarted = "relay-started"
)

// Options configure the relay.
type Options struct {
	// Cluster names the cluster in every event; required.
	Cluster string
	// Kube reads Pods and Nodes.
	Kube kubernetes.Interface
	// Metadata reads NodeClaims: the relay needs only their metadata
	// (UID, name, deletionTimestamp), and there is no generated clientset.
	Metadata metadata.Interface
	// Publisher receives the messages, through a retrying sender.
	Publisher bus.Publisher
	// BatchIdleDuration and BatchMaxDuration bound a provision window
	// (defaults 1s and 10s).
	BatchIdleDuration, BatchMaxDuration time.Duration
	// Resync is how often still-unschedulable pods are re-announced, a safety
	// net for a lost or failed trigger (default 30s).
	Resync time.Duration
	// RetryBaseDelay and RetryMaxDelay bound publish retries (defaults in sender).
	RetryBaseDelay, RetryMaxDelay time.Duration
	// SendWorkers is how many messages are published at once (default in
	// sender). With one, messages reach the bus in the order the handlers
	// sent them while no publish fails.
	SendWorkers int
	// SyncTimeout bounds the initial list of every informer (default 2m).
	SyncTimeout time.Duration
	// Clock is injected for the batch windows and resync; nil: real clock.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// OnSynced, if set, is called once every informer has synced (readiness).
	OnSynced func()
}

func (o *Options) defaults() error {
	switch {
	case o.Kube == nil:
		return errors.New("watch: kubernetes client is nil")
	case o.Metadata == nil:
		return errors.New("watch: metadata client is nil")
	case o.Publisher == nil:
		return errors.New("watch: publisher is nil")
	}
	if o.BatchIdleDuration == 0 {
		o.BatchIdleDuration = time.Second
	}
	if o.BatchMaxDuration == 0 {
		o.BatchMaxDuration = 10 * time.Second
	}
	if o.Resync == 0 {
		o.Resync = 30 * time.Second
	}
	if o.Resync < 0 {
		return fmt.Errorf("watch: resync period must be positive, got %s", o.Resync)
	}
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = 2 * time.Minute
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// relay holds the running parts.
type relay struct {
	opts   Options
	log    *slog.Logger
	events events.Builder
	batch  *batcher.Batcher
	send   *sender.Sender
	pods   cache.SharedIndexInformer
	nodes  cache.SharedIndexInformer
	claims cache.SharedIndexInformer

	// For the pod metrics (metrics.go): the Pending pods' informer, when
	// each pod the relay saw Unschedulable was first marked so (UID ->
	// time.Time), and what it saw of each Pending pod (UID -> *podProgress).
	pending            cache.SharedIndexInformer
	unschedulableSince sync.Map
	progress           sync.Map
	// bound pods (spec.nodeName set): their deletion or completion can
	// make a node empty or underutilized.
	bound cache.SharedIndexInformer
	// specs are NodePools and AKSNodeClasses.
	specs []cache.SharedIndexInformer
	// buffers are CapacityBuffers and PodTemplates (buffers.go).
	buffers []cache.SharedIndexInformer

	mu       sync.Mutex
	lastSent map[string]string // cause -> ID of the last Disruption event sent
	// podEvents are nodes with pod events since the last flush, and the
	// latest event's time.
	podEvents   map[string]bool
	podEventsAt time.Time
}

// Run starts the informers and publishes until ctx is done. It returns an
// error if the options are invalid or the initial sync fails (for example,
// the karpenter.sh CRDs are not installed, or RBAC forbids a list).
func Run(ctx context.Context, opts Options) error {
	watcher, err := newRelay(ctx, opts)
	if err != nil {
		return err
	}
	factories := watcher.newInformers()
	if err := watcher.registerGauges(); err != nil {
		return fmt.Errorf("watch: registering gauges: %w", err)
	}
	if err := watcher.addHandlers(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { watcher.send.Run(ctx) })
	wg.Go(func() {
		if err := watcher.batch.Run(ctx, watcher.emitWindow); err != nil {
			watcher.log.Error("batcher stopped", "error", err)
		}
	})
	for _, factory := range factories {
		factory.Start(ctx.Done())
	}
	defer func() {
		cancel()
		for _, factory := range factories {
			factory.Shutdown()
		}
		wg.Wait()
	}()

	if synced, err := watcher.waitForSync(ctx); !synced {
		return err
	}
	watcher.log.Info("relay watching", "cluster", opts.Cluster, "batchIdle", opts.BatchIdleDuration,
		"batchMax", opts.BatchMaxDuration, "resync", opts.Resync)
	if opts.OnSynced != nil {
		opts.OnSynced()
	}
	// NodePools and AKSNodeClasses created or changed while no relay ran
	// came in the initial list, which is no change: one pass brings their
	// status up to date.
	specs := 0
	for _, informer := range watcher.specs {
		specs += len(informer.GetStore().ListKeys())
	}
	if specs > 0 {
		watcher.askDisruption(causeRelayStarted)
	}
	watcher.loop(ctx)
	return nil
}

// newRelay checks the options and builds the relay's event builder, batcher
// and sender. It fails with a reason before starting informers that would
// otherwise retry a 404 or 403 forever behind a sync that never completes.
func newRelay(ctx context.Context, opts Options) (*relay, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	builder, err := events.NewBuilder(opts.Cluster)
	if err != nil {
		return nil, err
	}
	batch, err := batcher.New(batcher.Options{IdleDuration: opts.BatchIdleDuration, MaxDuration: opts.BatchMaxDuration, Clock: opts.Clock})
	if err != nil {
		return nil, err
	}
	send, err := sender.New(sender.Options{Publisher: opts.Publisher, Logger: opts.Logger, BaseDelay: opts.RetryBaseDelay, MaxDelay: opts.RetryMaxDelay,
		Workers: opts.SendWorkers})
	if err != nil {
		return nil, err
	}
	if _, err := opts.Metadata.Resource(NodeClaims).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("watch: listing %s (are the Karpenter CRDs installed and may the relay list them?): %w", NodeClaims.GroupResource(), err)
	}
	return &relay{opts: opts, log: opts.Logger, events: builder, batch: batch, send: send, lastSent: map[string]string{}, podEvents: map[string]bool{}}, nil
}

// informerFactory is what Run does with each informer factory.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// newInformers creates the relay's informers and returns their factories in
// start order.
//
// Only pods that are not bound matter for provisioning, so the pod informer
// lists and watches spec.nodeName="" alone: in a big cluster that is a tiny
// fraction of the pods. A pod that gets bound leaves the selection, which
// the informer delivers as a delete.
func (r *relay) newInformers() []informerFactory {
	kube := r.opts.Kube
	selecting := func(selector fields.Selector) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = selector.String() })
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, selecting(fields.OneTermEqualSelector("spec.nodeName", "")))
	pendingFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, selecting(fields.OneTermEqualSelector("status.phase", string(corev1.PodPending))))
	nodeFactory := informers.NewSharedInformerFactory(kube, 0)
	metaFactory := metadatainformer.NewSharedInformerFactory(r.opts.Metadata, 0)
	boundFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, selecting(fields.OneTermNotEqualSelector("spec.nodeName", "")))

	r.pods = podFactory.Core().V1().Pods().Informer()
	r.nodes = nodeFactory.Core().V1().Nodes().Informer()
	r.claims = metaFactory.ForResource(NodeClaims).Informer()
	r.pending = pendingFactory.Core().V1().Pods().Informer()
	r.bound = boundFactory.Core().V1().Pods().Informer()
	r.specs = []cache.SharedIndexInformer{metaFactory.ForResource(NodePools).Informer(), metaFactory.ForResource(AKSNodeClasses).Informer(),
		metaFactory.ForResource(NodeOverlays).Informer()}
	r.buffers = []cache.SharedIndexInformer{metaFactory.ForResource(CapacityBuffers).Informer(), metaFactory.ForResource(PodTemplates).Informer()}
	return []informerFactory{podFactory, nodeFactory, metaFactory, pendingFactory, boundFactory}
}

// informerHandlers is one informer's transform and event handlers.
type informerHandlers struct {
	informer  cache.SharedIndexInformer
	transform cache.TransformFunc
	handlers  cache.ResourceEventHandler
}

// addHandlers sets each informer's transform and event handlers.
//
// NodePools and AKSNodeClasses: a spec change, a new one or one gone
// changes their status (and may drift nodes); the initial list is not a
// change (the relay restarted). Bound pods: the initial list is not a pod
// event either (nothing happened on the nodes).
func (r *relay) addHandlers() error {
	specHandlers := cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				r.askDisruption(causeSpecAdded)
			}
		},
		UpdateFunc: r.onSpecUpdate,
		DeleteFunc: func(any) { r.askDisruption(causeSpecDeleted) },
	}
	table := []informerHandlers{
		{r.pods, TransformPod, cache.ResourceEventHandlerFuncs{AddFunc: r.onPod, UpdateFunc: func(_, n any) { r.onPod(n) }, DeleteFunc: r.onPodDelete}},
		{r.nodes, TransformNode, cache.ResourceEventHandlerFuncs{AddFunc: r.onNodeAdd, UpdateFunc: r.onNodeUpdate}},
		{r.claims, TransformMetadata, cache.ResourceEventHandlerFuncs{AddFunc: r.onClaimAdd, UpdateFunc: r.onClaimUpdate}},
		{r.pending, TransformPod, cache.ResourceEventHandlerFuncs{AddFunc: r.onPendingPod, UpdateFunc: func(_, n any) { r.onPendingPod(n) }, DeleteFunc: r.onPendingPodGone}},
		{r.specs[0], TransformMetadata, specHandlers},
		{r.specs[1], TransformMetadata, specHandlers},
		{r.specs[2], TransformMetadata, specHandlers},
		{r.buffers[0], TransformMetadata, r.bufferHandlers(true)},
		{r.buffers[1], TransformMetadata, r.bufferHandlers(false)},
		{r.bound, TransformPod, cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					r.onPodEvent(obj)
				}
			},
			UpdateFunc: r.onBoundPodUpdate, DeleteFunc: r.onPodEvent,
		}},
	}
	for _, entry := range table {
		if err := entry.informer.SetTransform(entry.transform); err != nil {
			return fmt.Errorf("watch: setting informer transform: %w", err)
		}
		if _, err := entry.informer.AddEventHandler(entry.handlers); err != nil {
			return fmt.Errorf("watch: adding informer handler: %w", err)
		}
	}
	return nil
}

// waitForSync waits until the informers hold their initial lists, for at
// most SyncTimeout. It reports whether they did; when ctx ends first that
// is no error.
func (r *relay) waitForSync(ctx context.Context) (bool, error) {
	syncCtx, syncCancel := context.WithTimeout(ctx, r.opts.SyncTimeout)
	defer syncCancel()
	for name, informer := range map[string]cache.SharedIndexInformer{"pods": r.pods, "nodes": r.nodes, NodeClaims.GroupResource().String(): r.claims,
		"bound pods": r.bound, NodePools.GroupResource().String(): r.specs[0], AKSNodeClasses.GroupResource().String(): r.specs[1],
		NodeOverlays.GroupResource().String(): r.specs[2]} {
		if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("watch: %s informer did not sync within %s", name, r.opts.SyncTimeout)
		}
	}
	return true, nil
}

// loop resyncs and flushes pod events on their tickers until ctx ends.
func (r *relay) loop(ctx context.Context) {
	ticker := r.opts.Clock.NewTicker(r.opts.Resync)
	defer ticker.Stop()
	flush := r.opts.Clock.NewTicker(disruptionSlot)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			r.resync()
		case <-flush.C():
			r.flushPodEvents()
		}
	}
}

// Unschedulable reports whether kube-scheduler gave up on pod for now: its
// PodScheduled condition is False with reason Unschedulable, it is not bound
// and not terminating. Pods merely waiting for the scheduler's first attempt
// are not provisioning triggers: the scheduler may still place them.
func Unschedulable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

func podRef(p *corev1.Pod) messages.ObjectRef {
	return messages.ObjectRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), ResourceVersion: p.ResourceVersion}
}

func (r *relay) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		r.log.Error("pod informer delivered an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	if !Unschedulable(pod) {
		r.batch.Remove(string(pod.UID))
		return
	}
	r.unschedulableSince.LoadOrStore(pod.UID, pendingSince(pod, r.opts.Clock.Now()))
	if err := r.batch.Add(podRef(pod)); err != nil {
		r.log.Error("pod not batched", "pod", pod.Namespace+"/"+pod.Name, "error", err)
	}
}

func (r *relay) onPodDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		r.batch.Remove(string(pod.UID))
	}
}

// emitWindow publishes one closed batch window.
func (r *relay) emitWindow(pods []messages.ObjectRef) {
	msgs, err := r.events.Provision(pods, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("provision event not built", "pods", len(pods), "error", err)
		return
	}
	r.log.Info("provision window closed", "pods", len(pods), "messages", len(msgs), "id", msgs[0].ID)
	r.send.Send(bus.QueueProvision, msgs...)
}

// resync re-announces every pod that is still unschedulable, except those in
// the open window: they are about to be announced anyway.
func (r *relay) resync() {
	var pods []messages.ObjectRef
	for _, obj := range r.pods.GetStore().List() {
		if pod, ok := obj.(*corev1.Pod); ok && Unschedulable(pod) && !r.batch.Has(string(pod.UID)) {
			pods = append(pods, podRef(pod))
		}
	}
	if len(pods) == 0 {
		return
	}
	batcher.Sort(pods)
	msgs, err := r.events.ProvisionResync(pods, r.opts.Clock.Now(), r.opts.Resync)
	if err != nil {
		r.log.Error("provision resync event not built", "pods", len(pods), "error", err)
		return
	}
	r.log.Info("provision resync", "pods", len(pods), "messages", len(msgs))
	r.send.Send(bus.QueueProvision, msgs...)
}

func (r *relay) onNodeAdd(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		r.emitNode(node)
		if _, preempt := events.Preemption(node); preempt {
			r.emitInterruption(node)
		}
	}
}

// emitInterruption publishes a spot preemption notice at once, not batched:
// the node has seconds left.
func (r *relay) emitInterruption(n *corev1.Node) {
	msg, err := r.events.Interruption(n, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("interruption event not built", "node", n.Name, "error", err)
		return
	}
	r.log.Info("spot preemption scheduled", "node", n.Name, "id", msg.ID)
	r.send.Send(bus.QueueInterruption, msg)
}

// onNodeUpdate reports Ready and NodeHealthy transitions and new spot
// preemption notices only: a status heartbeat that changes nothing the
// Functions act on is not an event.
func (r *relay) onNodeUpdate(oldObj, newObj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	newNode, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	oldReady, oldSince := events.NodeReady(oldNode)
	newReady, newSince := events.NodeReady(newNode)
	if oldReady != newReady || !oldSince.Equal(&newSince) || events.InitInputs(oldNode) != events.InitInputs(newNode) {
		r.emitNode(newNode)
	}
	r.emitNodeHealth(oldNode, newNode)
	oldCond, wasPreempt := events.Preemption(oldNode)
	newCond, preempt := events.Preemption(newNode)
	if preempt && (!wasPreempt || !oldCond.LastTransitionTime.Equal(&newCond.LastTransitionTime) || oldCond.Message != newCond.Message) {
		r.emitInterruption(newNode)
	}
}

// emitNodeHealth reports a NodeHealthy condition that appeared or changed
// status (node repair acts on it).
func (r *relay) emitNodeHealth(oldNode, newNode *corev1.Node) {
	oldCond, had := events.NodeHealth(oldNode)
	newCond, has := events.NodeHealth(newNode)
	if !has || (had && oldCond.Status == newCond.Status && oldCond.LastTransitionTime.Equal(&newCond.LastTransitionTime)) {
		return
	}
	msg, err := r.events.NodeHealth(newNode, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("node health event not built", "node", newNode.Name, "error", err)
		return
	}
	r.send.Send(bus.QueueLifecycle, msg)
}

func (r *relay) emitNode(n *corev1.Node) {
	msg, err := r.events.Node(n, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("node event not built", "node", n.Name, "error", err)
		return
	}
	r.send.Send(bus.QueueLifecycle, msg)
}

func (r *relay) onClaimAdd(obj any) {
	if nc, ok := obj.(*metav1.PartialObjectMetadata); ok && nc.DeletionTimestamp != nil {
		r.emitClaimDeleting(nc)
	}
}

func (r *relay) onClaimUpdate(oldObj, newObj any) {
	oldClaim, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	newClaim, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if ok1 && ok2 && oldClaim.DeletionTimestamp == nil && newClaim.DeletionTimestamp != nil {
		r.emitClaimDeleting(newClaim)
	}
}

func (r *relay) emitClaimDeleting(nc *metav1.PartialObjectMetadata) {
	msg, err := r.events.NodeClaimDeleting(nc, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("nodeclaim event not built", "nodeclaim", nc.Name, "error", err)
		return
	}
	r.log.Info("nodeclaim deleting", "nodeclaim", nc.Name)
	r.send.Send(bus.QueueLifecycle, msg)
}

// onBoundPodUpdate: a bound pod that finished frees its node's capacity.
func (r *relay) onBoundPodUpdate(oldObj, newObj any) {
	oldPod, ok1 := oldObj.(*corev1.Pod)
	newPod, ok2 := newObj.(*corev1.Pod)
	if ok1 && ok2 && !finished(oldPod) && finished(newPod) {
		r.onPodEvent(newPod)
	}
}

// onPodEvent notes a pod event on a node (a pod bound there, deleted or
// finished): it may leave the node empty or underutilized, or restart its
// consolidateAfter. Events are flushed as one Disruption event per slot.
func (r *relay) onPodEvent(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	r.mu.Lock()
	r.podEvents[pod.Spec.NodeName] = true
	r.podEventsAt = r.opts.Clock.Now()
	r.mu.Unlock()
}

// maxPodEventNodes keeps a Disruption event well under Service Bus's
// 256 KiB; beyond it the pass still runs, without moving lastPodEventTime
// for the rest (the next slot's events carry them).
const maxPodEventNodes = 2000

// flushPodEvents sends the nodes with pod events since the last flush.
func (r *relay) flushPodEvents() {
	r.mu.Lock()
	if len(r.podEvents) == 0 {
		r.mu.Unlock()
		return
	}
	nodes := make([]string, 0, len(r.podEvents))
	for node := range r.podEvents {
		nodes = append(nodes, node)
	}
	at := r.podEventsAt
	r.podEvents = map[string]bool{}
	r.mu.Unlock()
	sort.Strings(nodes)
	if len(nodes) > maxPodEventNodes {
		nodes = nodes[:maxPodEventNodes]
	}
	msg, err := r.events.PodEvents(nodes, at, r.opts.Clock.Now())
	if err != nil {
		r.log.Error("disruption event not built", "nodes", len(nodes), "error", err)
		return
	}
	r.log.Info("disruption pass asked", "cause", "pod-events", "nodes", len(nodes), "id", msg.ID)
	r.send.Send(bus.QueueDisruption, msg)
}

// onSpecUpdate: a NodePool or AKSNodeClass whose spec changed (its
// generation moved) may have drifted nodes, and its status follows.
func (r *relay) onSpecUpdate(oldObj, newObj any) {
	oldMeta, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	newMeta, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if ok1 && ok2 && oldMeta.Generation != newMeta.Generation {
		r.askDisruption(causeSpecChange)
	}
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// askDisruption sends one Disruption event per cause and slot: the first
// event of a slot is sent, the rest would carry the same ID and are not.
func (r *relay) askDisruption(cause string) {
	msg, err := r.events.Disruption(cause, r.opts.Clock.Now(), disruptionSlot)
	if err != nil {
		r.log.Error("disruption event not built", "cause", cause, "error", err)
		return
	}
	r.mu.Lock()
	dup := r.lastSent[cause] == msg.ID
	r.lastSent[cause] = msg.ID
	r.mu.Unlock()
	if dup {
		return
	}
	r.log.Info("disruption pass asked", "cause", cause, "id", msg.ID, "at", msg.ScheduledEnqueueTime)
	r.send.Send(bus.QueueDisruption, msg)
}
