package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
)

// Launch phases.
const (
	phaseNIC       = "NIC"       // the NIC is being created; the VM PUT waits for it
	phaseVM        = "VM"        // the VM create was accepted and is running
	phaseReplacing = "Replacing" // a failed VM is being deleted before the next create
)

// launchState is the value of apis.AnnotationLaunch, which records on a
// NodeClaim the launch in progress: the offering whose VM is being created,
// how far it got, how many offerings were tried, and when it is next looked
// at. The NodeClaim, not a Function instance's memory, is the launch's
// source of truth: any invocation picks it up where the last one left it.
type launchState struct {
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	Phase        string `json:"phase"`
	// Attempt counts the offerings tried, the current one included.
	Attempt int `json:"attempt"`
	// Failures counts the current offering's launch errors that are not
	// about capacity (InvalidParameter, ImageNotFound, ...).
	Failures int `json:"failures,omitempty"`
	// LastError is the last launch error, for the message when the
	// NodeClaim is given up.
	LastError string `json:"lastError,omitempty"`
	// Begun is when the first create began; a launch still not done after
	// the registration TTL is given up.
	Begun time.Time `json:"begun"`
	// Checks counts the looks at the current create, for the backoff.
	Checks    int       `json:"checks,omitempty"`
	NextCheck time.Time `json:"nextCheck,omitzero"`
}

func launchStateOf(nc *karpv1.NodeClaim) *launchState {
	raw, ok := nc.Annotations[apis.AnnotationLaunch]
	if !ok {
		return nil
	}
	state := &launchState{}
	if err := json.Unmarshal([]byte(raw), state); err != nil || state.Attempt < 0 {
		// Unreadable (edited by hand?): the VM in Azure is the truth, and
		// the reconciler rebuilds the state from it.
		return nil
	}
	return state
}

func (st *launchState) hasOffering() bool { return st.InstanceType != "" }

func (st *launchState) setOffering(choice Choice) {
	st.InstanceType, st.Zone, st.CapacityType = choice.InstanceType.Name, choice.Offering.Zone, choice.Offering.CapacityType
	st.Attempt++
	st.Failures, st.Checks = 0, 0
}

func (st *launchState) clearOffering() { st.InstanceType, st.Zone, st.CapacityType = "", "", "" }

// describes reports whether inst is the VM of st's offering.
func (st *launchState) describes(inst *cloudprovider.Instance) bool {
	return strings.EqualFold(st.InstanceType, inst.InstanceType) && st.Zone == inst.Zone && st.CapacityType == inst.CapacityType
}

func (st *launchState) String() string {
	return fmt.Sprintf("%s in %s (%s)", st.InstanceType, st.Zone, st.CapacityType)
}

// choice is state's offering as the catalog describes it (its pods capacity
// from maxPods). A VM size the catalog does not know any more is reported.
func (lr *launcher) choice(cat *catalog.Catalog, state *launchState, maxPods int32) (Choice, error) {
	instanceType, ok := cat.Get(state.InstanceType)
	if !ok {
		return Choice{}, fmt.Errorf("VM size %s is not in the instance-type catalog", state.InstanceType)
	}
	instanceType = instanceType.WithMaxPods(maxPods)
	for _, offering := range instanceType.Offerings {
		if offering.Zone == state.Zone && offering.CapacityType == state.CapacityType {
			return Choice{InstanceType: instanceType, Offering: offering}, nil
		}
	}
	return Choice{InstanceType: instanceType, Offering: catalog.Offering{Zone: state.Zone, CapacityType: state.CapacityType, Available: true}}, nil
}

// writeLaunchState stores state on nc, guarded by resourceVersion; nc is
// updated in place.
func (lr *launcher) writeLaunchState(ctx context.Context, nc *karpv1.NodeClaim, state *launchState) error {
	raw, err := json.Marshal(state)
	if err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[apis.AnnotationLaunch] = string(raw)
	if err := lr.kube.Patch(ctx, nc, patch); err != nil {
		return fmt.Errorf("recording the launch of NodeClaim %s: %w", nc.Name, err)
	}
	return nil
}
