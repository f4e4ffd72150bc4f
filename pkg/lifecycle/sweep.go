package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/ownership"
	"github.com/karpfunc/karpfunc/pkg/triggers"
)

// DefaultGCGracePeriod is how old a VM or NIC without a NodeClaim must be
// before the sweep deletes it.
const DefaultGCGracePeriod = 2 * time.Minute

// launchedGrace is how long a NodeClaim must have been Launched before the
// sweep believes its VM is really gone (Karpenter's garbage collection uses
// the same margin against list lag).
const launchedGrace = 10 * time.Second

// stuckDeletion is how long a NodeClaim may sit with a deletion timestamp
// before the sweep asks Terminate again (a lost or dead-lettered trigger).
const stuckDeletion = time.Minute

// InstanceLister lists what the cluster owns at the provider: the
// provider contract's Lister.
type InstanceLister = cloudprovider.Lister

// SweepResult says what one sweep did.
type SweepResult struct {
	VMsDeleted        []string // tagged VMs without a NodeClaim
	NICsDeleted       []string // tagged, detached NICs without a NodeClaim
	NodeClaimsDeleted []string // launched NodeClaims whose VM is gone
	TerminateRetried  []string // NodeClaims stuck in deletion, Terminate asked again
	// Outcome holds those Terminate retries, for the caller to send.
	Outcome triggers.Outcome
}

// Sweep is the garbage collector the Sweep timer runs. It is safe while
// launches are in flight because of the order it reads in: NodeClaims, then
// Azure, then NodeClaims again. A NodeClaim is created before its NIC and
// VM, so a resource in the Azure listing whose NodeClaim exists is in the
// second NodeClaim listing; and a NodeClaim Launched in the first listing
// had its VM before the Azure listing, so a VM missing from it is gone.
func (c *Controller) Sweep(ctx context.Context, lister InstanceLister, grace time.Duration) (SweepResult, error) {
	var res SweepResult
	if grace <= 0 {
		grace = DefaultGCGracePeriod
	}
	view, err := c.sweepView(ctx, lister)
	if err != nil {
		return res, err
	}
	now := c.clock.Now()
	errs := c.sweepVMs(ctx, view, now, grace, &res)
	errs = append(errs, c.sweepNICs(ctx, view, now, grace, &res)...)
	errs = append(errs, c.sweepNodeClaims(ctx, view, now, &res)...)
	errs = append(errs, c.updatePools(ctx, view.before)...)
	return res, errors.Join(errs...)
}

// sweepListing is what one sweep read, in the order Sweep explains.
type sweepListing struct {
	before []karpv1.NodeClaim // NodeClaims before the provider listing
	vms    []*cloudprovider.Instance
	nics   []*cloudprovider.NIC
	// claims are the NodeClaim names after the provider listing.
	claims map[string]bool
	// vmNames are the VMs in the provider listing.
	vmNames map[string]bool
}

// sweepView lists NodeClaims, then the provider's VMs and NICs, then
// NodeClaims again.
func (c *Controller) sweepView(ctx context.Context, lister InstanceLister) (*sweepListing, error) {
	var before karpv1.NodeClaimList
	if err := c.kube.List(ctx, &before); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	vms, err := lister.List(ctx)
	if err != nil {
		return nil, err
	}
	nics, err := lister.ListNICs(ctx)
	if err != nil {
		return nil, err
	}
	var after karpv1.NodeClaimList
	if err := c.kube.List(ctx, &after); err != nil {
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	view := &sweepListing{before: before.Items, vms: vms, nics: nics, claims: map[string]bool{}, vmNames: map[string]bool{}}
	for _, nc := range after.Items {
		view.claims[nc.Name] = true
	}
	for _, vm := range vms {
		view.vmNames[vm.Name] = true
	}
	return view, nil
}

// sweepVMs deletes the tagged VMs older than grace that no NodeClaim owns.
func (c *Controller) sweepVMs(ctx context.Context, view *sweepListing, now time.Time, grace time.Duration, res *SweepResult) []error {
	var errs []error
	for _, vm := range view.vms {
		owner := vm.NodeClaim
		if owner == "" {
			owner = vm.Name
		}
		if view.claims[owner] || view.claims[vm.Name] || vm.State == cloudprovider.StateDeleting || now.Sub(vm.CreatedAt) < grace {
			continue
		}
		if _, err := c.deleter.DeleteStep(ctx, vm.Name); err != nil {
			errs = append(errs, fmt.Errorf("garbage-collecting VM %s: %w", vm.Name, err))
			continue
		}
		c.log.Info("garbage-collected VM without a NodeClaim", "vm", vm.Name, "created", vm.CreatedAt)
		res.VMsDeleted = append(res.VMsDeleted, vm.Name)
	}
	return errs
}

// sweepNICs deletes the tagged, detached NICs older than grace that no
// NodeClaim or VM owns.
func (c *Controller) sweepNICs(ctx context.Context, view *sweepListing, now time.Time, grace time.Duration, res *SweepResult) []error {
	var errs []error
	for _, nic := range view.nics {
		vm := nic.Instance
		owner := nic.NodeClaim
		if owner == "" {
			owner = vm
		}
		if view.claims[owner] || view.claims[vm] || nic.VMName != "" || view.vmNames[vm] || (!nic.CreatedAt.IsZero() && now.Sub(nic.CreatedAt) < grace) {
			continue
		}
		if _, err := c.deleter.DeleteStep(ctx, vm); err != nil {
			errs = append(errs, fmt.Errorf("garbage-collecting NIC %s: %w", nic.Name, err))
			continue
		}
		c.log.Info("garbage-collected NIC without a NodeClaim", "nic", nic.Name)
		res.NICsDeleted = append(res.NICsDeleted, nic.Name)
	}
	return errs
}

// sweepNodeClaims asks Terminate again for our NodeClaims stuck in
// deletion, and deletes the launched ones whose VM is gone.
func (c *Controller) sweepNodeClaims(ctx context.Context, view *sweepListing, now time.Time, res *SweepResult) []error {
	var errs []error
	for i := range view.before {
		nc := &view.before[i]
		if !ownership.Owns(nc) {
			continue // another controller's NodeClaim: its VM is not in our listing, and its deletion is not ours
		}
		if nc.DeletionTimestamp != nil {
			if now.Sub(nc.DeletionTimestamp.Time) <= stuckDeletion {
				continue
			}
			res.Outcome.Then(triggers.TerminateRetry(c.cluster, nc.Name, string(nc.UID), now, time.Millisecond))
			res.TerminateRetried = append(res.TerminateRetried, nc.Name)
			continue
		}
		launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched)
		if launched == nil || !launched.IsTrue() || now.Sub(launched.LastTransitionTime.Time) < launchedGrace || view.vmNames[nc.Name] {
			continue
		}
		c.warn(ctx, nc, events.ReasonGarbageCollected, fmt.Sprintf("NodeClaim %s: its VM no longer exists; deleting the NodeClaim", nc.Name))
		if err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting NodeClaim %s whose VM is gone: %w", nc.Name, err))
			continue
		}
		c.log.Info("garbage-collected NodeClaim whose VM is gone", "nodeclaim", nc.Name)
		res.NodeClaimsDeleted = append(res.NodeClaimsDeleted, nc.Name)
	}
	return errs
}

// updatePools writes status.resources of every NodePool, and of every
// NodePool a NodeClaim names.
func (c *Controller) updatePools(ctx context.Context, claims []karpv1.NodeClaim) []error {
	pools := map[string]bool{}
	for i := range claims {
		pools[claims[i].Labels[karpv1.NodePoolLabelKey]] = true
	}
	var nps karpv1.NodePoolList
	if err := c.kube.List(ctx, &nps); err == nil {
		for _, np := range nps.Items {
			pools[np.Name] = true
		}
	}
	var errs []error
	for np := range pools {
		if err := nodepoolstatus.Update(ctx, c.kube, np); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
