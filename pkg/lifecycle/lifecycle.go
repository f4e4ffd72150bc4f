// Package lifecycle moves a NodeClaim through Karpenter's lifecycle: launch
// (create its instance through the provider contract, package
// cloudprovider), registration (its Node joined), initialization (the Node
// is ready for pods) and termination (drain, delete the VM, release the
// finalizer). Provisioning only creates NodeClaims; this package launches
// them.
//
// Each step reads the current objects and converges them, so any number of
// duplicate or reordered node and NodeClaim events lead to the same result.
// The controller never publishes: the continuations it asks for (the next
// launch check, the liveness check, a provisioning pass) are returned in
// its results' Outcome, which the caller sends. It knows Azure only through
// package cloudprovider's interfaces.
package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/offerings"
	"github.com/karpfunc/karpfunc/pkg/ownership"
)

// DefaultRegistrationTTL is Karpenter's registration timeout.
const DefaultRegistrationTTL = 15 * time.Minute

// DefaultDrainRetry is how soon a drain blocked by a PodDisruptionBudget,
// or pods still terminating, is looked at again.
const DefaultDrainRetry = 2 * time.Second

// DefaultDeleteCheck is how soon a NodeClaim whose VM is being deleted is
// looked at again. Azure deletes a VM in tens of seconds to a few minutes:
// a check every 5 s costs 6 to 12 invocations per deleted node, and no
// invocation waits on the delete.
const DefaultDeleteCheck = 5 * time.Second

// InstanceDeleter deletes a NodeClaim's instance and NIC without waiting:
// the provider contract's Deleter.
type InstanceDeleter = cloudprovider.Deleter

// Options configure a Controller.
type Options struct {
	Kube    client.Client
	Deleter InstanceDeleter
	// Evictor drains pods through the Eviction API (NewEvictor). Required
	// for termination; Terminate fails with a clear error without it.
	Evictor Evictor
	Clock   clock.Clock
	Logger  *slog.Logger
	// ClusterName goes into the continuations the controller asks for.
	ClusterName string
	// Publisher is never published to (the controller returns its
	// continuations in Outcomes); non-nil says the caller sends them.
	// nil: no one does, and RequestTerminate terminates in place.
	Publisher bus.Publisher
	// RegistrationTTL is the liveness timeout (default DefaultRegistrationTTL).
	RegistrationTTL time.Duration
	// DrainRetry (default DefaultDrainRetry).
	DrainRetry time.Duration
	// DeleteCheck (default DefaultDeleteCheck) is how soon a termination
	// waiting on its VM's delete looks again.
	DeleteCheck time.Duration
	// Launch configures the launch reconciler (launch checks, and a Node
	// that joined before its launch was recorded); nil, or no Creator: the
	// controller launches nothing and registers only Launched NodeClaims.
	Launch *LaunchOptions
	// Namespace holds karpfunc's coordination objects (the NodeClaim name
	// counter, package claimnames); default kube-system, as provisioning's.
	Namespace string
}

// Controller runs registration, initialization and termination.
type Controller struct {
	kube       client.Client
	deleter    InstanceDeleter
	evict      Evictor
	clock      clock.Clock
	log        *slog.Logger
	recorder   *events.Recorder
	cluster    string
	pub        bus.Publisher
	regTTL     time.Duration
	drainRetry time.Duration
	deleteChk  time.Duration
	launch     *launcher
	names      *claimnames.Counter
}

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.RegistrationTTL <= 0 {
		opts.RegistrationTTL = DefaultRegistrationTTL
	}
	if opts.DrainRetry <= 0 {
		opts.DrainRetry = DefaultDrainRetry
	}
	if opts.DeleteCheck <= 0 {
		opts.DeleteCheck = DefaultDeleteCheck
	}
	if opts.Namespace == "" {
		opts.Namespace = offerings.DefaultNamespace
	}
	return &Controller{kube: opts.Kube, deleter: opts.Deleter, evict: opts.Evictor, clock: opts.Clock, log: opts.Logger,
		recorder: events.NewRecorder(opts.Kube, opts.Clock), cluster: opts.ClusterName, pub: opts.Publisher,
		regTTL: opts.RegistrationTTL, drainRetry: opts.DrainRetry, deleteChk: opts.DeleteCheck, launch: newLauncher(opts),
		names: claimnames.NewCounter(opts.Kube, opts.Namespace, opts.Clock)}
}

// nodeClaimForProviderID finds the NodeClaim launched as providerID. AKS
// lower-cases resource group names in some provider IDs, so compare
// case-insensitively.
func (c *Controller) nodeClaimForProviderID(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	if providerID == "" {
		return nil, nil
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	for i := range list.Items {
		if ownership.Owns(&list.Items[i]) && strings.EqualFold(list.Items[i].Status.ProviderID, providerID) {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
