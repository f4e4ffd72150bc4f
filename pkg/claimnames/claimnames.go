// Package claimnames names NodeClaims so that a name is never used twice in
// a cluster's life, while a redelivered or concurrent pass that sees the same
// cluster still derives the same name (and so creates nothing twice).
//
// A NodeClaim's VM, NIC and OS disk are named after it, and its events,
// decision records and metrics carry its name: a name used again would let
// a new VM meet an old one's leftovers and mix two machines' histories.
// Karpenter gets unique names from the API server (generateName); karpfunc
// cannot, because its idempotency comes from names a redelivery derives again.
//
// The scheme. A name is "<nodepool>-<16 hex>", a hash of the NodePool, the
// UIDs of the pods the claim is made for, and a generation. The generation
// comes from the cluster's name counter, a number kept in the annotation
// apis.AnnotationNodeClaimGeneration of the Lease LeaseName in karpfunc's namespace:
//
//   - A pass reads the counter (its view) BEFORE it lists NodeClaims, and
//     names a claim with the first generation >= the view whose name no
//     NodeClaim in its list holds.
//   - After creating claims a pass raises the counter past their
//     generations (Retire), and termination raises it past a claim's
//     generation (kept on the claim in apis.AnnotationNodeClaimGeneration) before it
//     removes the claim's finalizer. So by the time a name is free again at
//     the API server the counter is past its generation, and every later
//     view starts above it: the name is never derived again.
//   - Just before creating, a pass reads the counter again. If it moved past
//     the claim's generation since the view, the name may be one that was
//     created and already removed: the pass adopts the claim if it exists
//     and otherwise does not create it (its pods wait for a fresh pass).
//
// Why a redelivery creates nothing twice. A pass that runs after another's
// creates lists their claims, and the scheduler puts the pods on them
// (in-flight capacity) or, when it cannot, the name moves to the next
// generation. Two passes that overlap (a session lock lost) read the same
// counter unless one read it after the other's Retire; since a pass creates
// before it retires and reads before it lists, a view taken after a Retire
// comes with a list that holds the retired claims. Passes with the same view
// derive the same names for the same pods, so the API server's AlreadyExists
// makes the second adopt the first's claim.
//
// What is left. A name is created again only if a claim could be created,
// deleted and finalized between a pass's last counter read and its Create
// (one API round trip; termination alone takes a Lifecycle invocation). Two
// claims for the same pods arise only when a third pass retires a
// generation inside another's read-to-Create round trip while a second
// pass takes its view; the extra claim is an empty node consolidation
// removes, never a reused name. Passes on different views (one saw a pod
// the other did not) may group pods differently; the names then differ and
// both sets of claims are created, as any two passes on different views
// would.
//
// The counter starts (when its Lease is first created) at the Unix time in
// milliseconds, so a counter lost with karpfunc's namespace restarts above
// every generation used before (a pass raises it by one at most).
package claimnames

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/apis"
)

const (
	// LeaseName holds the cluster's name counter (no holder: the Lease is
	// only the counter's home, in karpfunc's namespace, which karpfunc may
	// already write Leases in).
	LeaseName = "karpfunc-nodeclaim-names"
	// maxPrefix keeps names within 63 characters (a DNS label, the limit of
	// a Node's hostname): prefix, "-", 16 hex.
	maxPrefix = 46
	// maxRetries bounds Retire's optimistic-lock retries.
	maxRetries = 8
)

// Name is the NodeClaim name for pods in nodePool at generation.
func Name(nodePool string, pods []*corev1.Pod, generation int64) string {
	uids := make([]string, 0, len(pods))
	for _, pod := range pods {
		uids = append(uids, string(pod.UID))
	}
	sort.Strings(uids)
	key := "karpfunc/nodeclaim/v2\x00" + nodePool + "\x00" + strings.Join(uids, ",") + "\x00" + strconv.FormatInt(generation, 10)
	sum := sha256.Sum256([]byte(key))
	prefix := nodePool
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	return prefix + "-" + hex.EncodeToString(sum[:8])
}

// Free is the Name of the lowest generation >= view that held does not
// report as taken, and that generation.
func Free(nodePool string, pods []*corev1.Pod, view int64, held func(string) bool) (string, int64) {
	for generation := view; ; generation++ {
		if name := Name(nodePool, pods, generation); !held(name) {
			return name, generation
		}
	}
}

// GenerationOf reads the generation a NodeClaim (or any object) was named
// with; false when it carries none (claims named before the counter).
func GenerationOf(obj metav1.Object) (int64, bool) {
	value, ok := obj.GetAnnotations()[apis.AnnotationNodeClaimGeneration]
	if !ok {
		return 0, false
	}
	generation, err := strconv.ParseInt(value, 10, 64)
	return generation, err == nil
}

// SetGeneration records generation on obj.
func SetGeneration(obj metav1.Object, generation int64) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[apis.AnnotationNodeClaimGeneration] = strconv.FormatInt(generation, 10)
	obj.SetAnnotations(annotations)
}

// Counter reads and raises the cluster's name counter.
type Counter struct {
	kube      client.Client
	namespace string
	clock     clock.Clock
}

// NewCounter returns the counter kept in namespace.
func NewCounter(kube client.Client, namespace string, clk clock.Clock) *Counter {
	return &Counter{kube: kube, namespace: namespace, clock: clk}
}

// CounterError is a failure to read or raise the counter, with its cause.
type CounterError struct {
	Op  string // "reading" or "raising"
	Key client.ObjectKey
	error
}

func (e *CounterError) Error() string {
	return fmt.Sprintf("%s the NodeClaim name counter (Lease %s, annotation %s): %v", e.Op, e.Key, apis.AnnotationNodeClaimGeneration, e.error)
}

func (e *CounterError) Unwrap() error { return e.error }

// Read returns the counter, creating its Lease at the first read.
func (c *Counter) Read(ctx context.Context) (int64, error) {
	lease, err := c.get(ctx)
	if err != nil {
		return 0, &CounterError{Op: "reading", Key: c.key(), error: err}
	}
	return valueOf(lease)
}

// Retire raises the counter past generation (to generation+1 when it is
// not there yet), so no view taken afterwards derives a name of that
// generation. It keeps the counter monotonic: a concurrent raise is
// re-read, never overwritten.
func (c *Counter) Retire(ctx context.Context, generation int64) error {
	for range maxRetries {
		lease, err := c.get(ctx)
		if err != nil {
			return &CounterError{Op: "raising", Key: c.key(), error: err}
		}
		cur, err := valueOf(lease)
		if err != nil {
			return err
		}
		if cur > generation {
			return nil
		}
		SetGeneration(lease, generation+1)
		err = c.kube.Update(ctx, lease) // the resourceVersion read is the precondition
		if !apierrors.IsConflict(err) {
			if err != nil {
				return &CounterError{Op: "raising", Key: c.key(), error: err}
			}
			return nil
		}
	}
	return &CounterError{Op: "raising", Key: c.key(), error: fmt.Errorf("still conflicting after %d attempts", maxRetries)}
}

func (c *Counter) key() client.ObjectKey {
	return client.ObjectKey{Namespace: c.namespace, Name: LeaseName}
}

// get reads the Lease, creating it (counter = now in Unix milliseconds)
// when it does not exist; a concurrent creation is read back.
func (c *Counter) get(ctx context.Context) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	err := c.kube.Get(ctx, c.key(), lease)
	if !apierrors.IsNotFound(err) {
		return lease, err
	}
	lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: LeaseName}}
	SetGeneration(lease, c.clock.Now().UnixMilli())
	err = c.kube.Create(ctx, lease)
	if apierrors.IsAlreadyExists(err) {
		lease = &coordinationv1.Lease{}
		err = c.kube.Get(ctx, c.key(), lease)
	}
	return lease, err
}

func valueOf(lease *coordinationv1.Lease) (int64, error) {
	generation, ok := GenerationOf(lease)
	if !ok {
		return 0, fmt.Errorf("Lease %s/%s: annotation %s is missing or not an integer (%q); delete the Lease and karpfunc recreates it",
			lease.Namespace, lease.Name, apis.AnnotationNodeClaimGeneration, lease.Annotations[apis.AnnotationNodeClaimGeneration])
	}
	return generation, nil
}
