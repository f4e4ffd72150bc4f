package lifecycle_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
)

// TestActsOnlyOnItsOwn: a VM, NIC and NodeClaims another controller made
// (NAP tags its VMs with the same karpenter.azure.com_cluster tag) survive
// the Sweep and Terminate; karpfunc's own orphan VM in the same pass does
// not, so the Sweep did run and could delete.
func TestActsOnlyOnItsOwn(t *testing.T) {
	w := start(t)
	ctx := context.Background()

	// Another controller's VM and NIC: launched through ARM, then
	// re-tagged without karpfunc's mark (a PUT may change tags).
	if _, err := w.launcher.Create(ctx, azure.LaunchRequest{Name: "nap-vm", NodePool: "default", InstanceType: "Standard_D2s_v5", Reservations: d2Reservations}); err != nil {
		t.Fatal(err)
	}
	stripMark(t, ctx, w.arm, "nap-vm")
	// karpfunc's orphan: a VM no NodeClaim owns.
	if _, err := w.launcher.Create(ctx, azure.LaunchRequest{Name: "orphan-vm", NodePool: "np", InstanceType: "Standard_D2s_v5", Reservations: d2Reservations}); err != nil {
		t.Fatal(err)
	}
	// Another controller's NodeClaims: one launched whose VM karpfunc
	// cannot see, one being deleted behind the termination finalizer.
	foreignLaunched := foreignClaim(t, ctx, w, "nap-launched", false)
	foreignDeleting := foreignClaim(t, ctx, w, "nap-deleting", true)

	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	res, err := lc.Sweep(ctx, w.launcher, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.VMsDeleted, []string{"orphan-vm"}) || len(res.NICsDeleted) != 0 || len(res.NodeClaimsDeleted) != 0 || len(res.TerminateRetried) != 0 {
		t.Errorf("Sweep = %+v; want only karpfunc's orphan-vm deleted", res)
	}
	if _, err := w.launcher.Get(ctx, "nap-vm"); err != nil {
		t.Errorf("another controller's VM did not survive the Sweep: %v", err)
	}
	if nics, err := armnetwork.NewInterfacesClient(testSub, armCred(w.arm), armOptions(w.arm)); err != nil {
		t.Fatal(err)
	} else if _, err := nics.Get(ctx, rg, azure.NICName("nap-vm"), nil); err != nil {
		t.Errorf("another controller's NIC did not survive the Sweep: %v", err)
	}
	for _, name := range []string{foreignLaunched, foreignDeleting} {
		if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{}); err != nil {
			t.Errorf("another controller's NodeClaim %s did not survive the Sweep: %v", name, err)
		}
	}

	tr, err := lc.Terminate(ctx, foreignDeleting)
	if err != nil || tr.Finished || tr.Evicted != 0 {
		t.Errorf("Terminate(another controller's NodeClaim) = %+v, %v; want nothing done", tr, err)
	}
	nc := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: foreignDeleting}, nc); err != nil || !slices.Contains(nc.Finalizers, karpv1.TerminationFinalizer) {
		t.Errorf("another controller's NodeClaim lost its finalizer to Terminate: %v, finalizers %v", err, nc.Finalizers)
	}
	// Clean up the finalizer we must not touch, so the API server can finish.
	nc.Finalizers = nil
	_ = w.kube.Update(ctx, nc)
}

const testSub = sub

func foreignClaim(t *testing.T, ctx context.Context, w *world, name string, deleting bool) string {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{karpv1.TerminationFinalizer},
		Labels: map[string]string{karpv1.NodePoolLabelKey: "default"}},
		Spec: karpv1.NodeClaimSpec{NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelInstanceTypeStable,
				Operator: corev1.NodeSelectorOpIn, Values: []string{"Standard_D2s_v5"}}}}}
	if err := w.kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = azure.ProviderID(sub, rg, name)
	nc.StatusConditions().SetTrue(karpv1.ConditionTypeLaunched)
	if err := w.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if deleting {
		if err := w.kube.Delete(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// stripMark re-tags a VM and its NIC without karpfunc's mark, keeping the
// cluster tag NAP also writes.
func stripMark(t *testing.T, ctx context.Context, emu *armemulator.Server, name string) {
	t.Helper()
	vms, err := armcompute.NewVirtualMachinesClient(sub, armCred(emu), armOptions(emu))
	if err != nil {
		t.Fatal(err)
	}
	vm, err := vms.Get(ctx, rg, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(vm.Tags, azure.TagManagedBy)
	p, err := vms.BeginCreateOrUpdate(ctx, rg, name, vm.VirtualMachine, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, &runtimePoll); err != nil {
		t.Fatal(err)
	}
	nics, err := armnetwork.NewInterfacesClient(sub, armCred(emu), armOptions(emu))
	if err != nil {
		t.Fatal(err)
	}
	nic, err := nics.Get(ctx, rg, azure.NICName(name), nil)
	if err != nil {
		t.Fatal(err)
	}
	delete(nic.Tags, azure.TagManagedBy)
	np, err := nics.BeginCreateOrUpdate(ctx, rg, azure.NICName(name), nic.Interface, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.PollUntilDone(ctx, &runtimePoll); err != nil {
		t.Fatal(err)
	}
	if vm.Tags[azure.TagCluster] == nil || nic.Tags[azure.TagCluster] == nil {
		t.Fatalf("VM %s or its NIC has no cluster tag; the test needs NAP-like resources", name)
	}
}

type tokenCred string

func (c tokenCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(c), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func armCred(emu *armemulator.Server) azcore.TokenCredential { return tokenCred(emu.Token()) }

var runtimePoll = runtime.PollUntilDoneOptions{Frequency: time.Second}

func armOptions(emu *armemulator.Server) *arm.ClientOptions {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(emu.CACertPEM())
	cfg := cloud.AzurePublic
	cfg.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Endpoint: emu.URL(), Audience: cloud.AzurePublic.Services[cloud.ResourceManager].Audience},
	}
	return &arm.ClientOptions{DisableRPRegistration: true, ClientOptions: policy.ClientOptions{Cloud: cfg,
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}}
}
