package azure_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

const (
	testSub      = "00000000-0000-0000-0000-000000000001"
	testRG       = "MC_rg_cluster_eastus"
	testLocation = "eastus"
	testSubnet   = "/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"
)

func sku(name string, zones ...string) *armcompute.ResourceSKU {
	return skuOf(name, "V1,V2", "x64", zones...)
}

// skuOf is a size with its Hyper-V generations and CPU architecture, as
// the Resource SKUs API lists them.
func skuOf(name, generations, arch string, zones ...string) *armcompute.ResourceSKU {
	zs := make([]*string, len(zones))
	for i := range zones {
		zs[i] = &zones[i]
	}
	cap := func(n, v string) *armcompute.ResourceSKUCapabilities {
		return &armcompute.ResourceSKUCapabilities{Name: &n, Value: &v}
	}
	return &armcompute.ResourceSKU{
		Name:         &name,
		ResourceType: ptr("virtualMachines"),
		Locations:    []*string{ptr(testLocation)},
		LocationInfo: []*armcompute.ResourceSKULocationInfo{{Location: ptr(testLocation), Zones: zs}},
		Capabilities: []*armcompute.ResourceSKUCapabilities{cap("vCPUs", "2"), cap("MemoryGB", "8"),
			cap("HyperVGenerations", generations), cap("CpuArchitectureType", arch)},
	}
}

func ptr[T any](v T) *T { return &v }

func startEmulator(t *testing.T, opts armemulator.Options) *armemulator.Server {
	t.Helper()
	if opts.SKUs == nil {
		opts.SKUs = []*armcompute.ResourceSKU{sku("Standard_D2s_v5", "1", "2", "3"), sku("Standard_D4s_v5", "1")}
	}
	if opts.OpDelay == 0 {
		opts.OpDelay = 30 * time.Millisecond
	}
	if opts.Network.LoadBalancers == nil && opts.Network.SecurityGroups == nil {
		opts.Network = armemulator.AKSNetwork(testSub, testRG, testLocation)
	}
	opts.SubscriptionIDs = []string{testSub}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := armemulator.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting emulator: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newLauncher(t *testing.T, emu *armemulator.Server, cluster string, mutate ...func(*azure.Options)) *azure.Launcher {
	t.Helper()
	opts := azure.Options{
		SubscriptionID: testSub, ResourceGroup: testRG, Location: testLocation, ClusterName: cluster,
		SubnetID: testSubnet, Endpoint: emu.URL(), CACertPEM: emu.CACertPEM(), Token: emu.Token(),
		Bootstrap: &azure.ClusterBootstrap{APIServerFQDN: "c.hcp.eastus.azmk8s.io", ClusterCAPEM: testCA(t), KubernetesVersion: "1.33.2",
			NetworkPlugin: "azure", NetworkPluginMode: "overlay", NetworkDataplane: "cilium", DNSServiceIP: "10.0.0.10"},
		BootstrapTokens: azure.StaticToken(testToken),
		SSHPublicKey:    testSSHKey(t),
	}
	for _, m := range mutate {
		m(&opts)
	}
	l, err := azure.NewLauncher(opts)
	if err != nil {
		t.Fatalf("NewLauncher: %v", err)
	}
	return l
}

func testSSHKey(t *testing.T) string {
	t.Helper()
	key, err := azure.GenerateSSHPublicKey("launcher-test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func request(name string) azure.LaunchRequest {
	return azure.LaunchRequest{
		Name: name, NodePool: "default", InstanceType: "Standard_D2s_v5", Zone: "eastus-1",
		CapacityType: azure.CapacityTypeOnDemand, MaxPods: 30, Reservations: ptr(catalog.KubeletReservations(2, 8192, 30)),
		Labels: map[string]string{"karpenter.sh/nodepool": "default", "team": "a"},
		Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		Tags:   map[string]string{"costcenter": "42", "karpenter.azure.com/cluster": "spoof"},
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestLauncherLifecycle(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "cluster-a")
	other := newLauncher(t, emu, "cluster-b")
	c := ctx(t)

	inst, err := l.Create(c, request("node-a"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	wantPID := "azure:///subscriptions/" + testSub + "/resourceGroups/mc_rg_cluster_eastus/providers/Microsoft.Compute/virtualMachines/node-a"
	checks := []struct{ field, got, want string }{
		{"Name", inst.Name, "node-a"},
		{"State", inst.State, azure.StateSucceeded},
		{"ProviderID", inst.ProviderID, wantPID},
		{"InstanceType", inst.InstanceType, "Standard_D2s_v5"},
		{"Zone", inst.Zone, "eastus-1"},
		{"CapacityType", inst.CapacityType, azure.CapacityTypeOnDemand},
		{"tag cluster", inst.Tags[azure.TagCluster], "cluster-a"},
		{"tag managed-by", inst.Tags[azure.TagManagedBy], "karpfunc"},
		{"tag nodepool", inst.Tags[azure.TagNodePool], "default"},
		{"tag nodeclaim", inst.Tags[azure.TagNodeClaim], "node-a"},
		{"tag costcenter", inst.Tags["costcenter"], "42"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.field, ch.got, ch.want)
		}
	}
	if inst.CreatedAt.IsZero() {
		t.Error("CreatedAt is zero")
	}

	// What reached ARM: NIC tagged and referenced, bootstrap intact.
	vms, nics := emu.VMs(), emu.NICs()
	if len(vms) != 1 || len(nics) != 1 {
		t.Fatalf("emulator has %d VMs and %d NICs, want 1 and 1", len(vms), len(nics))
	}
	if got := *nics[0].Name; got != "node-a-nic" {
		t.Errorf("NIC name = %q", got)
	}
	if got := *nics[0].Tags[azure.TagNodeClaim]; got != "node-a" {
		t.Errorf("NIC nodeclaim tag = %q", got)
	}
	if ref := *vms[0].Properties.NetworkProfile.NetworkInterfaces[0].ID; ref != *nics[0].ID {
		t.Errorf("VM references NIC %q, want %q", ref, *nics[0].ID)
	}
	if z := vms[0].Zones; len(z) != 1 || *z[0] != "1" {
		t.Errorf("VM zones = %v, want [1]", z)
	}
	boot, err := azure.ParseCustomData(*vms[0].Properties.OSProfile.CustomData)
	if err != nil {
		t.Fatalf("ParseCustomData: %v", err)
	}
	flags, err := azure.ParseKubeletFlags(boot["KUBELET_FLAGS"])
	if err != nil {
		t.Fatal(err)
	}
	if boot["TLS_BOOTSTRAP_TOKEN"] != testToken || boot["API_SERVER_NAME"] != "c.hcp.eastus.azmk8s.io" || flags["--max-pods"] != "30" ||
		!strings.Contains(boot["KUBELET_NODE_LABELS"], "team=a") || flags["--register-with-taints"] != "karpenter.sh/unregistered:NoExecute" ||
		boot["SUBNET"] != "nodes" {
		t.Errorf("customData = %v", boot)
	}

	// Idempotent: a replayed Create does not PUT again.
	again, err := l.Create(c, request("node-a"))
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if again.ID != inst.ID {
		t.Errorf("second Create returned %q, want %q", again.ID, inst.ID)
	}
	cnt := emu.Counters()
	if cnt.Requests[armemulator.OpPutVM] != 1 || cnt.Requests[armemulator.OpPutNIC] != 1 || cnt.VMCreates != 1 || cnt.NICCreates != 1 {
		t.Errorf("after replay: PUT VM %d, PUT NIC %d, creates %d/%d; want 1 each",
			cnt.Requests[armemulator.OpPutVM], cnt.Requests[armemulator.OpPutNIC], cnt.VMCreates, cnt.NICCreates)
	}

	got, err := l.Get(c, "node-a")
	if err != nil || got.ID != inst.ID || got.State != azure.StateSucceeded {
		t.Fatalf("Get = %+v, %v", got, err)
	}

	if _, err := other.Create(c, request("node-b")); err != nil {
		t.Fatalf("Create for other cluster: %v", err)
	}
	for _, tc := range []struct {
		l    *azure.Launcher
		want string
	}{{l, "node-a"}, {other, "node-b"}} {
		list, err := tc.l.List(c)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(list) != 1 || list[0].Name != tc.want {
			t.Errorf("List = %v, want only %s", names(list), tc.want)
		}
	}

	if err := l.Delete(c, "node-a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, vm := range emu.VMs() {
		if *vm.Name == "node-a" {
			t.Error("VM node-a still exists after Delete")
		}
	}
	for _, n := range emu.NICs() {
		if *n.Name == "node-a-nic" {
			t.Error("NIC node-a-nic still exists after Delete")
		}
	}
	_, err = l.Get(c, "node-a")
	if !azure.IsNotFound(err) {
		t.Fatalf("Get after Delete: IsNotFound(%v) = false", err)
	}
	if azure.IsCapacityError(err) || azure.IsThrottled(err) || azure.IsQuotaError(err) {
		t.Errorf("not-found error misclassified: %v", err)
	}
	if err := l.Delete(c, "node-a"); err != nil {
		t.Errorf("second Delete: %v, want nil", err)
	}
	if cnt := emu.Counters(); cnt.VMDeletes != 1 {
		t.Errorf("VM deletes = %d, want 1", cnt.VMDeletes)
	}
}

func names(list []*azure.Instance) []string {
	var out []string
	for _, i := range list {
		out = append(out, i.Name)
	}
	return out
}

func TestDeleteNICOnlyLaunch(t *testing.T) {
	// A launch that created the NIC and then failed leaves a NIC without VM;
	// Delete must still remove it.
	emu := startEmulator(t, armemulator.Options{})
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpPutVM, Code: "InternalServerError", StatusCode: 500})
	l := newLauncher(t, emu, "c", func(o *azure.Options) { o.Retry = policy.RetryOptions{MaxRetries: -1} })
	if _, err := l.Create(ctx(t), request("node-x")); err == nil {
		t.Fatal("Create succeeded despite injected 500")
	}
	// The launcher already cleaned up after the ARM error.
	if n := len(emu.NICs()); n != 0 {
		t.Fatalf("%d NICs left after failed launch", n)
	}
}

func TestSpotRequest(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "c")
	req := request("spot-1")
	req.CapacityType = azure.CapacityTypeSpot
	inst, err := l.Create(ctx(t), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if inst.CapacityType != azure.CapacityTypeSpot {
		t.Errorf("CapacityType = %q", inst.CapacityType)
	}
	p := emu.VMs()[0].Properties
	if *p.Priority != armcompute.VirtualMachinePriorityTypesSpot || *p.EvictionPolicy != armcompute.VirtualMachineEvictionPolicyTypesDelete || *p.BillingProfile.MaxPrice != -1 {
		t.Errorf("spot settings = %v %v %v", *p.Priority, *p.EvictionPolicy, *p.BillingProfile.MaxPrice)
	}
}

func TestErrorClassification(t *testing.T) {
	noRetry := func(o *azure.Options) { o.Retry = policy.RetryOptions{MaxRetries: -1} }
	tests := []struct {
		name       string
		rule       *armemulator.Rule
		mutate     func(*azure.LaunchRequest)
		capacity   bool
		quota      bool
		throttled  bool
		notFound   bool
		code       string
		retryAfter time.Duration
	}{
		{
			name:     "zonal allocation failure, synchronous",
			rule:     &armemulator.Rule{Operation: armemulator.OpPutVM, Zone: "eastus-2", Code: azure.CodeZonalAllocationFailed},
			mutate:   func(r *azure.LaunchRequest) { r.Zone = "eastus-2" },
			capacity: true, code: azure.CodeZonalAllocationFailed,
		},
		{
			name:     "allocation failure in the async operation",
			rule:     &armemulator.Rule{Operation: armemulator.OpPutVM, SKU: "Standard_D2s_v5", Code: azure.CodeAllocationFailed, Async: true},
			capacity: true, code: azure.CodeAllocationFailed,
		},
		{
			name:     "unknown SKU rejected by SKU validation",
			mutate:   func(r *azure.LaunchRequest) { r.InstanceType = "Standard_Nope" },
			capacity: true, code: azure.CodeSkuNotAvailable,
		},
		{
			name:     "SKU not offered in the zone",
			mutate:   func(r *azure.LaunchRequest) { r.InstanceType = "Standard_D4s_v5"; r.Zone = "eastus-3" },
			capacity: true, code: azure.CodeSkuNotAvailable,
		},
		{
			name: "regional cores quota",
			rule: &armemulator.Rule{Operation: armemulator.OpPutVM, Code: azure.CodeOperationNotAllowed,
				Message: "Operation could not be completed as it results in exceeding approved Total Regional Cores quota."},
			quota: true, code: azure.CodeOperationNotAllowed,
		},
		{
			name:      "throttled with Retry-After",
			rule:      &armemulator.Rule{Operation: armemulator.OpGetVM, Code: azure.CodeTooManyRequests, StatusCode: 429, RetryAfter: 1500 * time.Millisecond},
			throttled: true, code: azure.CodeTooManyRequests, retryAfter: 1500 * time.Millisecond,
		},
		{
			name:      "throttled with whole-second Retry-After",
			rule:      &armemulator.Rule{Operation: armemulator.OpPutNIC, Code: azure.CodeTooManyRequests, RetryAfter: 2 * time.Second},
			throttled: true, code: azure.CodeTooManyRequests, retryAfter: 2 * time.Second,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emu := startEmulator(t, armemulator.Options{})
			if tc.rule != nil {
				emu.Faults().Add(*tc.rule)
			}
			l := newLauncher(t, emu, "c", noRetry)
			req := request("node-e")
			if tc.mutate != nil {
				tc.mutate(&req)
			}
			_, err := l.Create(ctx(t), req)
			if err == nil {
				t.Fatal("Create succeeded, want error")
			}
			if got := azure.IsCapacityError(err); got != tc.capacity {
				t.Errorf("IsCapacityError(%v) = %v", err, got)
			}
			if got := azure.IsQuotaError(err); got != tc.quota {
				t.Errorf("IsQuotaError(%v) = %v", err, got)
			}
			if got := azure.IsThrottled(err); got != tc.throttled {
				t.Errorf("IsThrottled(%v) = %v", err, got)
			}
			if got := azure.IsNotFound(err); got != tc.notFound {
				t.Errorf("IsNotFound(%v) = %v", err, got)
			}
			ae, ok := azure.AsARMError(err)
			if !ok {
				t.Fatalf("AsARMError(%v) = false", err)
			}
			if ae.Code != tc.code || ae.RetryAfter != tc.retryAfter || ae.Message == "" {
				t.Errorf("ARMError = %+v, want code %s, retry after %s, a message", ae, tc.code, tc.retryAfter)
			}
			// A failed launch leaves nothing behind (the throttled GET never
			// got as far as creating anything).
			if vms, nics := emu.VMs(), emu.NICs(); len(vms) != 0 || len(nics) != 0 {
				t.Errorf("after failed launch: %d VMs, %d NICs left", len(vms), len(nics))
			}
		})
	}
}

func TestThrottleRetriedBySDK(t *testing.T) {
	// With the SDK's retries on, one 429 with a short Retry-After is absorbed.
	emu := startEmulator(t, armemulator.Options{})
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpGetVM, Code: azure.CodeTooManyRequests, RetryAfter: 50 * time.Millisecond, Count: 1})
	l := newLauncher(t, emu, "c")
	if _, err := l.Create(ctx(t), request("node-r")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := emu.Counters().Requests[armemulator.OpGetVM]; got < 2 {
		t.Errorf("GET VM requests = %d, want the throttled one and its retry", got)
	}
}

func TestCreateReplacesFailedVM(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	// The async failure is reported once; the launcher's own cleanup is
	// suppressed by failing its VM delete, so a failed VM stays behind.
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpPutVM, Code: azure.CodeAllocationFailed, Async: true, Count: 1})
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpDeleteVM, Code: "Conflict", StatusCode: 409, Count: 1})
	l := newLauncher(t, emu, "c", func(o *azure.Options) { o.Retry = policy.RetryOptions{MaxRetries: -1} })
	if _, err := l.Create(ctx(t), request("node-f")); !azure.IsCapacityError(err) {
		t.Fatalf("first Create: %v, want capacity error", err)
	}
	vms := emu.VMs()
	if len(vms) != 1 || *vms[0].Properties.ProvisioningState != azure.StateFailed {
		t.Fatalf("want one Failed VM left behind, have %d", len(vms))
	}
	inst, err := l.Create(ctx(t), request("node-f"))
	if err != nil {
		t.Fatalf("second Create: %v", err)
	}
	if inst.State != azure.StateSucceeded {
		t.Errorf("State = %q, want Succeeded", inst.State)
	}
	if c := emu.Counters(); c.VMCreates != 2 {
		t.Errorf("VM creates = %d, want 2", c.VMCreates)
	}
}

func TestInvalidLaunchRequests(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "c")
	tests := []struct {
		name   string
		mutate func(*azure.LaunchRequest)
		want   string
	}{
		{"empty name", func(r *azure.LaunchRequest) { r.Name = "" }, "VM name is empty"},
		{"upper-case name", func(r *azure.LaunchRequest) { r.Name = "Node-A" }, "lower-case"},
		{"name too long", func(r *azure.LaunchRequest) { r.Name = strings.Repeat("a", 65) }, "limit is 64"},
		{"no node pool", func(r *azure.LaunchRequest) { r.NodePool = "" }, "NodePool is required"},
		{"no instance type", func(r *azure.LaunchRequest) { r.InstanceType = "" }, "InstanceType is required"},
		{"bad capacity type", func(r *azure.LaunchRequest) { r.CapacityType = "reserved" }, `capacity type "reserved"`},
		{"zone of another region", func(r *azure.LaunchRequest) { r.Zone = "westus-1" }, `zone "westus-1"`},
		{"zone without number", func(r *azure.LaunchRequest) { r.Zone = "eastus-" }, `zone "eastus-"`},
		{"unknown image family", func(r *azure.LaunchRequest) { r.ImageFamily = "Windows" }, `image family "Windows"`},
		{"unknown architecture", func(r *azure.LaunchRequest) { r.Architecture = "s390x" }, `architecture "s390x"`},
		{"negative disk", func(r *azure.LaunchRequest) { r.OSDiskSizeGB = -1 }, "OSDiskSizeGB -1"},
		{"arm64 size that boots only Gen1", func(r *azure.LaunchRequest) {
			r.Architecture, r.HyperVGenerations = "arm64", []string{"V1"}
		}, "no arm64 node image for Hyper-V generation V1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := request("node-i")
			tc.mutate(&req)
			_, err := l.Create(ctx(t), req)
			if !azure.IsInvalidRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Create error = %v, want invalid request mentioning %q", err, tc.want)
			}
		})
	}
	if n := emu.Counters().Requests; len(n) != 0 {
		t.Errorf("invalid requests reached ARM: %v", n)
	}
}

func TestLauncherTrustsOnlyConfiguredCA(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	l := newLauncher(t, emu, "c", func(o *azure.Options) {
		o.CACertPEM = nil
		o.Retry = policy.RetryOptions{MaxRetries: -1} // the SDK retries transport errors
	})
	_, err := l.Get(ctx(t), "node-a")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Get without the emulator CA: %v, want a certificate error", err)
	}
	if azure.IsNotFound(err) {
		t.Error("TLS failure classified as not found")
	}
}

func TestListSKUs(t *testing.T) {
	other := sku("Standard_X")
	other.Locations = []*string{ptr("westus")}
	emu := startEmulator(t, armemulator.Options{SKUs: []*armcompute.ResourceSKU{sku("Standard_D2s_v5", "1"), other}})
	l := newLauncher(t, emu, "c")
	skus, err := l.ListSKUs(ctx(t))
	if err != nil {
		t.Fatalf("ListSKUs: %v", err)
	}
	if len(skus) != 1 || *skus[0].Name != "Standard_D2s_v5" {
		t.Errorf("ListSKUs returned %d SKUs, want only Standard_D2s_v5 in eastus", len(skus))
	}
}

func TestNewLauncherRejectsBadOptions(t *testing.T) {
	base := azure.Options{SubscriptionID: "s", ResourceGroup: "rg", Location: "eastus", ClusterName: "c", Token: "t"}
	tests := []struct {
		name   string
		mutate func(*azure.Options)
		want   string
	}{
		{"no subscription", func(o *azure.Options) { o.SubscriptionID = "" }, "SubscriptionID is required"},
		{"no resource group", func(o *azure.Options) { o.ResourceGroup = "" }, "ResourceGroup is required"},
		{"no cluster", func(o *azure.Options) { o.ClusterName = "" }, "ClusterName is required"},
		{"plain http", func(o *azure.Options) { o.Endpoint = "http://127.0.0.1:1" }, "must be an https:// URL"},
		{"garbage CA", func(o *azure.Options) { o.CACertPEM = []byte("not pem") }, "no PEM certificate"},
		{"SSH key of a type Azure refuses", func(o *azure.Options) { o.SSHPublicKey = "ecdsa-sha2-nistp256 AAAA" }, `key type "ecdsa-sha2-nistp256"`},
		{"SSH key that is not base64", func(o *azure.Options) { o.SSHPublicKey = "ssh-rsa !!!" }, "not base64"},
		{"SSH key path instead of key", func(o *azure.Options) { o.SSHPublicKey = "~/.ssh/id_rsa.pub" }, "not an OpenSSH public key"},
		{"node image version latest", func(o *azure.Options) { o.NodeImageVersion = "latest" }, "not an AKS node image version"},
		{"node identity that is not an identity ID", func(o *azure.Options) { o.NodeIdentities = []string{"kubelet-client"} }, "NODE_IDENTITIES entry"},
		{"kubelet identity the VMs would not carry", func(o *azure.Options) {
			o.Bootstrap = &azure.ClusterBootstrap{APIServerFQDN: "c.hcp.eastus.azmk8s.io", ClusterCAPEM: testCA(t), KubernetesVersion: "1.33.2",
				NetworkPlugin: "azure", NetworkPluginMode: "overlay", NetworkDataplane: "cilium", DNSServiceIP: "10.0.0.10",
				KubeletIdentityClientID: "kubelet-client"}
		}, "NODE_IDENTITIES is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := base
			tc.mutate(&o)
			_, err := azure.NewLauncher(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewLauncher error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestOptionsFromEnv(t *testing.T) {
	all := map[string]string{
		azure.EnvSubscriptionID: testSub, azure.EnvResourceGroup: testRG, azure.EnvLocation: testLocation,
		azure.EnvClusterName: "c", azure.EnvSubnetID: testSubnet, azure.EnvEndpoint: "https://127.0.0.1:9",
		azure.EnvToken: "tok", azure.EnvCAFile: "", azure.EnvSSHPublicKey: testSSHKey(t),
	}
	for _, missing := range []string{azure.EnvSubscriptionID, azure.EnvResourceGroup, azure.EnvLocation, azure.EnvClusterName, azure.EnvSubnetID, azure.EnvSSHPublicKey} {
		t.Run("missing "+missing, func(t *testing.T) {
			for k, v := range all {
				t.Setenv(k, v)
			}
			t.Setenv(missing, "")
			_, err := azure.OptionsFromEnv()
			if err == nil || !strings.Contains(err.Error(), missing) {
				t.Errorf("error = %v, want one naming %s", err, missing)
			}
		})
	}
	t.Run("complete", func(t *testing.T) {
		for k, v := range all {
			t.Setenv(k, v)
		}
		o, err := azure.OptionsFromEnv()
		if err != nil {
			t.Fatal(err)
		}
		if o.Endpoint != "https://127.0.0.1:9" || o.Token != "tok" || o.SubnetID != testSubnet {
			t.Errorf("options = %+v", o)
		}
	})
	t.Run("malformed node image version", func(t *testing.T) {
		for k, v := range all {
			t.Setenv(k, v)
		}
		t.Setenv(azure.EnvNodeImageVersion, "2025-11-07")
		if _, err := azure.OptionsFromEnv(); err == nil || !strings.Contains(err.Error(), azure.EnvNodeImageVersion) {
			t.Errorf("error = %v, want one naming %s", err, azure.EnvNodeImageVersion)
		}
	})
	t.Run("unreadable CA file", func(t *testing.T) {
		for k, v := range all {
			t.Setenv(k, v)
		}
		t.Setenv(azure.EnvCAFile, "/nonexistent/ca.pem")
		if _, err := azure.OptionsFromEnv(); err == nil || !strings.Contains(err.Error(), azure.EnvCAFile) {
			t.Errorf("error = %v, want one naming %s", err, azure.EnvCAFile)
		}
	})
}

// TestImageAndSSHProfile checks what the VM is created with: the node
// image for the size's generation and architecture at the pinned version
// (and the same ID read back as the Instance's ImageID), password login
// off, and the configured SSH key.
func TestImageAndSSHProfile(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{SKUs: []*armcompute.ResourceSKU{
		skuOf("Standard_D2_v3", "V1", "x64", "1", "2", "3"), skuOf("Standard_D2s_v5", "V1,V2", "x64", "1", "2", "3"),
		skuOf("Standard_D2ps_v5", "V2", "Arm64", "1", "2", "3")},
		// The pin is older than the gallery's latest: the pin wins.
		GalleryVersions: []armemulator.GalleryVersion{{Name: "202510.03.1", Published: time.Date(2025, 10, 3, 0, 0, 0, 0, time.UTC)},
			{Name: "202511.07.0", Published: time.Date(2025, 11, 7, 0, 0, 0, 0, time.UTC)}}})
	key := testSSHKey(t)
	l := newLauncher(t, emu, "c", func(o *azure.Options) { o.SSHPublicKey, o.NodeImageVersion = key, "202510.03.1" })
	for _, tc := range []struct {
		name, size, family, arch string
		gens                     []string
		wantImage                string
	}{
		{"gen1-only size", "Standard_D2_v3", "Ubuntu2204", "amd64", []string{"V1"}, "/images/2204containerd/versions/202510.03.1"},
		{"gen1 and gen2 size", "Standard_D2s_v5", "Ubuntu2404", "amd64", []string{"V1", "V2"}, "/images/2404gen2containerd/versions/202510.03.1"},
		{"arm64", "Standard_D2ps_v5", "AzureLinux", "arm64", []string{"V2"}, "/images/V3gen2arm64/versions/202510.03.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("img-" + strings.ToLower(strings.ReplaceAll(tc.name, " ", "-")))
			req.InstanceType, req.ImageFamily, req.Architecture, req.HyperVGenerations = tc.size, tc.family, tc.arch, tc.gens
			inst, err := l.Create(ctx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(inst.ImageID, tc.wantImage) {
				t.Errorf("ImageID = %s, want …%s", inst.ImageID, tc.wantImage)
			}
			var vm *armcompute.VirtualMachine
			for _, v := range emu.VMs() {
				if *v.Name == req.Name {
					vm = v
				}
			}
			if vm == nil {
				t.Fatal("emulator has no VM")
			}
			linux := vm.Properties.OSProfile.LinuxConfiguration
			if linux == nil || linux.DisablePasswordAuthentication == nil || !*linux.DisablePasswordAuthentication {
				t.Fatal("password login is not disabled")
			}
			if linux.SSH == nil || len(linux.SSH.PublicKeys) != 1 || *linux.SSH.PublicKeys[0].KeyData != key ||
				*linux.SSH.PublicKeys[0].Path != "/home/azureuser/.ssh/authorized_keys" {
				t.Fatalf("SSH configuration = %+v", linux.SSH)
			}
			if got := *vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID; got != inst.ImageID {
				t.Errorf("VM image %s, Instance.ImageID %s", got, inst.ImageID)
			}
		})
	}
	noKey := newLauncher(t, emu, "c", func(o *azure.Options) { o.SSHPublicKey = "" })
	if _, err := noKey.Create(ctx(t), request("no-key")); !azure.IsInvalidRequest(err) || !strings.Contains(err.Error(), azure.EnvSSHPublicKey) {
		t.Fatalf("launch without SSH key: %v, want an invalid request naming %s", err, azure.EnvSSHPublicKey)
	}
}

// TestNodeImageFollowsGallery: without a pin, launches boot the gallery's
// latest version; when AKS removes a version ARM refuses it with
// GalleryImageNotFound, and a launcher pinned to it says how to fix it.
func TestNodeImageFollowsGallery(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	emu := startEmulator(t, armemulator.Options{GalleryVersions: []armemulator.GalleryVersion{
		{Name: "202611.02.0", Published: day(2)}, {Name: "202611.16.0", Published: day(16)}}})
	l := newLauncher(t, emu, "c")
	inst, err := l.Create(ctx(t), request("latest"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(inst.ImageID, "/versions/202611.16.0") {
		t.Fatalf("ImageID = %s, want the gallery's latest 202611.16.0", inst.ImageID)
	}
	emu.SetGalleryVersions([]armemulator.GalleryVersion{{Name: "202611.16.0", Published: day(16)}})
	pinned := newLauncher(t, emu, "c", func(o *azure.Options) { o.NodeImageVersion = "202611.02.0" })
	_, err = pinned.Create(ctx(t), request("pinned-gone"))
	ae, ok := azure.AsARMError(err)
	if !ok || ae.Code != "GalleryImageNotFound" || !strings.Contains(err.Error(), azure.EnvNodeImageVersion) {
		t.Fatalf("launch with a version the gallery no longer holds = %v, want GalleryImageNotFound naming %s", err, azure.EnvNodeImageVersion)
	}
}

func TestClassifiersOnOtherErrors(t *testing.T) {
	for _, err := range []error{nil, errors.New("boom"), context.DeadlineExceeded} {
		if azure.IsNotFound(err) || azure.IsCapacityError(err) || azure.IsQuotaError(err) || azure.IsThrottled(err) {
			t.Errorf("%v classified as an ARM error", err)
		}
	}
	wrapped := errors.Join(errors.New("ctx"), azure.NewARMError(409, azure.CodeQuotaExceeded, "cores"))
	if !azure.IsQuotaError(wrapped) {
		t.Error("wrapped QuotaExceeded not classified as quota")
	}
}

func TestCreateRefusesWithoutNodeBootstrap(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	for _, tc := range []struct {
		name   string
		mutate func(*azure.Options)
		want   string
	}{
		{"no bootstrap settings", func(o *azure.Options) { o.Bootstrap = nil }, "no node bootstrap configured"},
		{"no token source", func(o *azure.Options) { o.BootstrapTokens = nil }, "no node bootstrap configured"},
		{"token source fails", func(o *azure.Options) { o.BootstrapTokens = failingTokens{} }, "getting a TLS bootstrap token: forbidden"},
		{"malformed token", func(o *azure.Options) { o.BootstrapTokens = azure.StaticToken("nope") }, "bootstrap token is not of the form"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLauncher(t, emu, "c", tc.mutate)
			_, err := l.Create(ctx(t), request("node-x"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create error = %v, want %q", err, tc.want)
			}
			if n := len(emu.VMs()) + len(emu.NICs()); n != 0 {
				t.Errorf("%d resources created before the bootstrap was known to be complete", n)
			}
		})
	}
}

type failingTokens struct{}

func (failingTokens) Token(context.Context) (string, error) { return "", errors.New("forbidden") }

// TestNodeIdentities: VMs carry the node identities, so the kubelet
// identity customData names is on the VM; a caller without Managed
// Identity Operator on it gets ARM's LinkedAuthorizationFailed.
func TestNodeIdentities(t *testing.T) {
	kubeletID := "/subscriptions/" + testSub + "/resourceGroups/" + testRG + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/c-agentpool"
	withKubeletIdentity := func(o *azure.Options) {
		o.Bootstrap.KubeletIdentityClientID = "kubelet-client"
		o.NodeIdentities = []string{kubeletID}
	}
	for _, tc := range []struct {
		name      string
		mayAssign bool
		wantErr   string
	}{
		{"caller with Managed Identity Operator", true, ""},
		{"caller without it", false, "LinkedAuthorizationFailed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emu := startEmulator(t, armemulator.Options{Identities: []armemulator.Identity{
				{ResourceID: kubeletID, ClientID: "kubelet-client", PrincipalID: "kubelet-oid", CallerMayAssign: tc.mayAssign}}})
			l := newLauncher(t, emu, "cluster-a", withKubeletIdentity)
			_, err := l.Create(ctx(t), request("node-a"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Create = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			vms := emu.VMs()
			if len(vms) != 1 || vms[0].Identity == nil || vms[0].Identity.UserAssignedIdentities[kubeletID] == nil ||
				vms[0].Identity.UserAssignedIdentities[kubeletID].ClientID == nil ||
				*vms[0].Identity.UserAssignedIdentities[kubeletID].ClientID != "kubelet-client" {
				t.Fatalf("VM identity = %+v, want the kubelet identity", vms[0].Identity)
			}
		})
	}
}
