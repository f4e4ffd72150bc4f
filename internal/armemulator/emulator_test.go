package armemulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
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
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/interruption"
)

const (
	sub = "sub-1"
	rg  = "MC_RG"
	loc = "eastus"

	testSubnetID = "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"
)

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.SubscriptionIDs == nil {
		opts.SubscriptionIDs = []string{sub}
	}
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func httpClient(t *testing.T, s *Server) *http.Client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertPEM()) {
		t.Fatal("CACertPEM is not PEM")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

type token string

func (tk token) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(tk), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

func armOptions(t *testing.T, s *Server) *arm.ClientOptions {
	cfg := cloud.AzurePublic
	cfg.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: s.URL()},
	}
	return &arm.ClientOptions{
		ClientOptions:         policy.ClientOptions{Cloud: cfg, Transport: httpClient(t, s), Retry: policy.RetryOptions{MaxRetries: -1}},
		DisableRPRegistration: true,
	}
}

func clients(t *testing.T, s *Server) (*armcompute.VirtualMachinesClient, *armnetwork.InterfacesClient) {
	vms, err := armcompute.NewVirtualMachinesClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	nics, err := armnetwork.NewInterfacesClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return vms, nics
}

func nicBody() armnetwork.Interface {
	return armnetwork.Interface{
		Location: ptr(loc),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
			Name:       ptr("ipconfig1"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: ptr(testSubnetID)}},
		}}},
	}
}

func vmBody(nicID string, bootstrap string) armcompute.VirtualMachine {
	return armcompute.VirtualMachine{
		Location: ptr(loc),
		Zones:    []*string{ptr("2")},
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: ptr(armcompute.VirtualMachineSizeTypes("Standard_D2s_v5"))},
			OSProfile:       &armcompute.OSProfile{ComputerName: ptr("vm-1"), CustomData: ptr(bootstrap)},
			NetworkProfile: &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{
				ID: ptr(nicID),
			}}},
		},
	}
}

func armCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func TestProtocolChecks(t *testing.T) {
	s := start(t, Options{})
	c := httpClient(t, s)
	base := s.URL() + "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/vm-1"
	tests := []struct {
		name, method, url, auth string
		status                  int
		code                    string
	}{
		{"no authorization", "GET", base + "?api-version=2026-04-01", "", 401, "AuthenticationFailed"},
		{"basic auth", "GET", base + "?api-version=2026-04-01", "Basic abc", 401, "AuthenticationFailed"},
		{"no api-version", "GET", base, "Bearer x", 400, "MissingApiVersionParameter"},
		{"unknown subscription", "GET", strings.Replace(base, sub, "other", 1) + "?api-version=1", "Bearer x", 403, "AuthorizationFailed"},
		{"unsupported route", "GET", s.URL() + "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Storage/storageAccounts/a?api-version=1", "Bearer x", 400, "InvalidResourceType"},
		{"unsupported method", "PATCH", base + "?api-version=2026-04-01", "Bearer x", 400, "InvalidResourceType"},
		{"missing VM", "GET", base + "?api-version=2026-04-01", "Bearer x", 404, "ResourceNotFound"},
		{"delete missing VM", "DELETE", base + "?api-version=2026-04-01", "Bearer x", 204, ""},
		{"bad body", "PUT", base + "?api-version=2026-04-01", "Bearer x", 400, "InvalidRequestContent"},
		{"bad sku filter", "GET", s.URL() + "/subscriptions/" + sub + "/providers/Microsoft.Compute/skus?api-version=2021-07-01&$filter=name%20eq%20'x'", "Bearer x", 400, "InvalidFilterInQueryString"},
		{"api-version not a date", "GET", base + "?api-version=1", "Bearer x", 400, "InvalidApiVersionParameter"},
		{"api-version the SDK does not send", "GET", base + "?api-version=2024-07-01", "Bearer x", 400, "NoRegisteredProviderFound"},
		{"network api-version on a VM", "GET", base + "?api-version=2025-05-01", "Bearer x", 400, "NoRegisteredProviderFound"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader("{not json"))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.code == "" {
				return
			}
			var body errorResponse
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if body.Error.Code != tc.code || body.Error.Message == "" {
				t.Errorf("error = %+v, want code %s and a message", body.Error, tc.code)
			}
		})
	}
}

func TestVMValidationAndNICInUse(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond})
	vms, nics := clients(t, s)
	ctx := context.Background()
	nicID := azure.NICResourceID(sub, rg, "vm-1-nic")

	_, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(nicID, ""), nil)
	if code := armCode(err); code != "InvalidParameter" || !strings.Contains(err.Error(), "was not found") {
		t.Fatalf("VM with missing NIC: %v, want InvalidParameter", err)
	}

	p, err := nics.BeginCreateOrUpdate(ctx, rg, "vm-1-nic", nicBody(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := p.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *nic.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || *nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress == "" {
		t.Errorf("NIC after poll: state %v, ip %v", *nic.Properties.ProvisioningState, nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress)
	}

	bad := vmBody(nicID, "!!not base64")
	if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", bad, nil); armCode(err) != "InvalidParameter" {
		t.Errorf("VM with bad customData: %v, want InvalidParameter", err)
	}

	vp, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(nicID, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := vp.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *vm.Properties.ProvisioningState != "Succeeded" || vm.Properties.OSProfile.CustomData != nil {
		t.Errorf("VM after poll: state %s, customData returned: %v", *vm.Properties.ProvisioningState, vm.Properties.OSProfile.CustomData != nil)
	}

	// The NIC is taken: another VM cannot use it, and it cannot be deleted.
	other := vmBody(nicID, "")
	other.Properties.OSProfile.ComputerName = ptr("vm-2")
	if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-2", other, nil); armCode(err) != "NicInUse" {
		t.Errorf("second VM on same NIC: %v, want NicInUse", err)
	}
	if _, err := nics.BeginDelete(ctx, rg, "vm-1-nic", nil); armCode(err) != "NicInUse" {
		t.Errorf("deleting attached NIC: %v, want NicInUse", err)
	}

	// Deleting the VM frees the NIC (no deleteOption: it stays).
	dp, err := vms.BeginDelete(ctx, rg, "vm-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := s.NICs(); len(got) != 1 || got[0].Properties.VirtualMachine != nil {
		t.Fatalf("NIC after VM delete: %d NICs, still attached", len(got))
	}
	np, err := nics.BeginDelete(ctx, rg, "vm-1-nic", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.NICs()) != 0 {
		t.Error("NIC still present after delete")
	}
}

func TestLongRunningOperationFollowsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := start(t, Options{OpDelay: time.Minute, Clock: clk})
	vms, nics := clients(t, s)
	ctx := context.Background()

	np, err := nics.BeginCreateOrUpdate(ctx, rg, "n", nicBody(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if np.Done() {
		t.Fatal("NIC operation done before the clock moved")
	}
	clk.Step(time.Minute)
	if _, err := np.Poll(ctx); err != nil || !np.Done() {
		t.Fatalf("NIC operation not done after OpDelay: %v", err)
	}
	if _, err := np.Result(ctx); err != nil {
		t.Fatal(err)
	}

	vp, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(azure.NICResourceID(sub, rg, "n"), ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := vms.Get(ctx, rg, "vm-1", nil)
	if err != nil || *got.Properties.ProvisioningState != "Creating" {
		t.Fatalf("VM right after PUT: %v, %v", got.Properties, err)
	}
	clk.Step(59 * time.Second)
	if _, err := vp.Poll(ctx); err != nil || vp.Done() {
		t.Fatalf("VM operation done early (err %v)", err)
	}
	clk.Step(time.Second)
	res, err := vp.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	if err != nil || *res.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("VM after OpDelay: %v", err)
	}
}

func TestAsyncFailureLeavesFailedVM(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, Faults: []Rule{{Operation: OpPutVM, Zone: "2", Code: "ZonalAllocationFailed", Async: true}}})
	vms, nics := clients(t, s)
	ctx := context.Background()
	np, _ := nics.BeginCreateOrUpdate(ctx, rg, "n", nicBody(), nil)
	if _, err := np.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	vp, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(azure.NICResourceID(sub, rg, "n"), ""), nil)
	if err != nil {
		t.Fatalf("PUT should be accepted, got %v", err)
	}
	_, err = vp.PollUntilDone(ctx, nil)
	if armCode(err) != "ZonalAllocationFailed" {
		t.Fatalf("poll error = %v, want ZonalAllocationFailed", err)
	}
	if v := s.VMs(); len(v) != 1 || *v[0].Properties.ProvisioningState != "Failed" {
		t.Errorf("VM state after async failure: %v", v)
	}
}

func TestRules(t *testing.T) {
	r := NewRules(
		Rule{Operation: OpPutVM, SKU: "standard_d2s_v5", Zone: "1", Code: "ZonalAllocationFailed", Count: 2},
		Rule{Operation: OpGetVM, Name: "vm-x", Code: "TooManyRequests"},
	)
	tests := []struct {
		req  Request
		want string
	}{
		{Request{Operation: OpPutVM, SKU: "Standard_D2s_v5", Zone: "eastus-1"}, "ZonalAllocationFailed"},
		{Request{Operation: OpPutVM, SKU: "Standard_D2s_v5", Zone: "eastus-2"}, ""},
		{Request{Operation: OpPutVM, SKU: "Standard_D4s_v5", Zone: "eastus-1"}, ""},
		{Request{Operation: OpPutVM, SKU: "Standard_D2s_v5", Zone: "eastus-1"}, "ZonalAllocationFailed"},
		{Request{Operation: OpPutVM, SKU: "Standard_D2s_v5", Zone: "eastus-1"}, ""}, // Count used up
		{Request{Operation: OpGetVM, Name: "vm-y"}, ""},
		{Request{Operation: OpGetVM, Name: "VM-X"}, "TooManyRequests"},
		{Request{Operation: OpGetVM, Name: "vm-x"}, "TooManyRequests"}, // Count 0: forever
	}
	for i, tc := range tests {
		f := r.Inject(tc.req)
		got := ""
		if f != nil {
			got = f.Code
		}
		if got != tc.want {
			t.Errorf("step %d %+v: fault %q, want %q", i, tc.req, got, tc.want)
		}
	}
	statuses := map[string]int{"TooManyRequests": 429, "ZonalAllocationFailed": 409, "NotFound": 404, "Whatever": 400}
	for code, want := range statuses {
		if got := (&Fault{Code: code}).status(); got != want {
			t.Errorf("default status for %s = %d, want %d", code, got, want)
		}
	}
}

// testCustomData is customData as the launcher renders it.
func testCustomData(t *testing.T, mutate func(*azure.NodeBootstrap)) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	nb := azure.NodeBootstrap{
		Cluster: azure.ClusterBootstrap{APIServerFQDN: "c.hcp.eastus.azmk8s.io", KubernetesVersion: "1.33.2",
			ClusterCAPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			NetworkPlugin: "azure", NetworkPluginMode: "overlay", NetworkDataplane: "cilium", DNSServiceIP: "10.0.0.10"},
		SubscriptionID: sub, ResourceGroup: rg, Location: loc, AdminUsername: "azureuser",
		SubnetID: "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/virtualNetworks/v/subnets/s",
		Token:    "abcdef.0123456789abcdef", MaxPods: 50, NetworkSecurityGroup: AKSSecurityGroup,
		Reservations: &catalog.Reservations{
			KubeReserved:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1050Mi")},
			SystemReserved:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")},
			MemoryAvailable: resource.MustParse("100Mi"), NodeFSAvailablePercent: 10, NodeFSInodesFreePercent: 5,
		},
		Labels: map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot",
			"example.kubernetes.io/team": "a"}, // not settable by a kubelet: left out of its flags
		Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}},
	}
	if mutate != nil {
		mutate(&nb)
	}
	data, err := nb.CustomData()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestKubeletForBootedVM(t *testing.T) {
	skuList := []*armcompute.ResourceSKU{{
		Name: ptr("Standard_D2ps_v5"), ResourceType: ptr("virtualMachines"), Locations: []*string{ptr(loc)},
		Capabilities: []*armcompute.ResourceSKUCapabilities{
			{Name: ptr("vCPUs"), Value: ptr("2")}, {Name: ptr("MemoryGB"), Value: ptr("8")}, {Name: ptr("CpuArchitectureType"), Value: ptr("Arm64")},
		},
	}}
	boot := testCustomData(t, nil)
	mkVM := func(size string, spot bool, customData string) *vmState {
		vm := vmBody("", customData)
		vm.Name = ptr("vm-1")
		vm.Properties.HardwareProfile.VMSize = ptr(armcompute.VirtualMachineSizeTypes(size))
		if spot {
			vm.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		}
		return &vmState{vm: vm, sub: sub, rg: rg, location: loc, zone: "eastus-2"}
	}
	nodeResources := func(sku string, maxPods int32) (corev1.ResourceList, string, bool) {
		if sku != "Standard_D4s_v5" {
			return nil, "", false
		}
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, "amd64", true
	}
	s := &Server{opts: Options{SKUs: skuList, NodeResources: nodeResources}, nics: map[string]*nicState{}}

	t.Run("from SKU capabilities", func(t *testing.T) {
		k, err := s.kubeletFor(mkVM("Standard_D2ps_v5", true, boot))
		if err != nil {
			t.Fatal(err)
		}
		n := k.node
		wantLabels := map[string]string{
			"kubernetes.io/hostname": "vm-1", "node.kubernetes.io/instance-type": "Standard_D2ps_v5",
			"topology.kubernetes.io/zone": "eastus-2", "topology.kubernetes.io/region": "eastus",
			"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64", "karpenter.sh/capacity-type": "spot",
			"karpenter.sh/nodepool": "default", "kubernetes.azure.com/role": "agent",
		}
		for k, v := range wantLabels {
			if n.Labels[k] != v {
				t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
			}
		}
		if _, ok := n.Labels["example.kubernetes.io/team"]; ok {
			t.Error("the kubelet registers a kubernetes.io label NodeRestriction refuses")
		}
		if n.Annotations[KwokNodeAnnotation] != "fake" {
			t.Error("kwok annotation missing")
		}
		if want := azure.ProviderID(sub, rg, "vm-1"); n.Spec.ProviderID != want {
			t.Errorf("providerID = %q, want %q", n.Spec.ProviderID, want)
		}
		if len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Key != "dedicated" || n.Spec.Taints[1].Key != "karpenter.sh/unregistered" ||
			n.Spec.Taints[1].Effect != corev1.TaintEffectNoExecute {
			t.Errorf("taints = %v", n.Spec.Taints)
		}
		// The guest sees 8 GiB less 7.5%; the kubelet keeps 1050Mi
		// kube-reserved and 100Mi for eviction.
		mem := n.Status.Capacity[corev1.ResourceMemory]
		allocatableMem := n.Status.Allocatable[corev1.ResourceMemory]
		pods := n.Status.Allocatable[corev1.ResourcePods]
		if guest := int64(8<<30) - 644245095; mem.Value() != guest || allocatableMem.Value() != guest-1150<<20 || pods.Value() != 50 {
			t.Errorf("capacity memory %s, allocatable memory %s, allocatable pods %s", mem.String(), allocatableMem.String(), pods.String())
		}
		if n.Status.NodeInfo.KubeletVersion != "v1.33.2" {
			t.Errorf("kubelet version %q", n.Status.NodeInfo.KubeletVersion)
		}
		if k.prov.apiServer != "c.hcp.eastus.azmk8s.io" || k.prov.token != "abcdef.0123456789abcdef" {
			t.Errorf("provisioning = %+v", k.prov)
		}
	})
	t.Run("from NodeResources", func(t *testing.T) {
		k, err := s.kubeletFor(mkVM("Standard_D4s_v5", false, boot))
		if err != nil {
			t.Fatal(err)
		}
		cpu := k.node.Status.Allocatable[corev1.ResourceCPU]
		if cpu.String() != "3900m" || k.node.Labels["kubernetes.io/arch"] != "amd64" {
			t.Errorf("allocatable cpu %s, labels %v", cpu.String(), k.node.Labels)
		}
	})
	t.Run("unknown size never joins", func(t *testing.T) {
		if _, err := s.kubeletFor(mkVM("Standard_Unknown", false, boot)); err == nil || !strings.Contains(err.Error(), "Standard_Unknown") {
			t.Errorf("err = %v, want one naming the size", err)
		}
	})
	enc := func(script string) string { return base64.StdEncoding.EncodeToString([]byte(script)) }
	for _, tc := range []struct{ name, customData, want string }{
		{"no customData", "", "no customData"},
		{"the old JSON document", "eyJ2ZXJzaW9uIjoia2FycGZ1bmMuYXp1cmUvdjEifQ==", "not a bash script"},
		{"no API server", enc("#!/bin/bash\nKUBE_CA_CRT=x\n"), "API_SERVER_NAME is not set"},
		{"CA not PEM", enc("#!/bin/bash\nAPI_SERVER_NAME=a\nKUBE_CA_CRT=eA==\nKUBERNETES_VERSION=1.33.0\nKUBELET_FLAGS=\"--kubeconfig=k\"\nNETWORK_PLUGIN=azure\nENABLE_TLS_BOOTSTRAPPING=true\nTLS_BOOTSTRAP_TOKEN=abcdef.0123456789abcdef\n"), "KUBE_CA_CRT is not a PEM certificate"},
		{"no TLS bootstrapping", enc("#!/bin/bash\nAPI_SERVER_NAME=a\nKUBE_CA_CRT=eA==\nKUBERNETES_VERSION=1.33.0\nKUBELET_FLAGS=\"--kubeconfig=k\"\nNETWORK_PLUGIN=azure\n"), "no kubelet credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.kubeletFor(mkVM("Standard_D4s_v5", false, tc.customData)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestProvisionRefusesWhatTheKubeletWould(t *testing.T) {
	for _, tc := range []struct{ name, flags, labels, want string }{
		{"kubernetes.io label", "--kubeconfig=k", "example.kubernetes.io/team=a", "unknown 'kubernetes.io' or 'k8s.io' labels"},
		{"bad taint", "--kubeconfig=k --register-with-taints=a:Sometimes", "", "--register-with-taints entry"},
		{"bad max pods", "--kubeconfig=k --max-pods=many", "", "--max-pods"},
		{"no kubeconfig", "--max-pods=10", "", "no --kubeconfig"},
		{"not a flag", "kubeconfig", "", "not --name=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := testCustomData(t, nil)
			raw, _ := base64.StdEncoding.DecodeString(data)
			lines := strings.Split(string(raw), "\n")
			for i, l := range lines {
				switch {
				case strings.HasPrefix(l, "KUBELET_FLAGS="):
					lines[i] = "KUBELET_FLAGS=\"" + tc.flags + "\""
				case strings.HasPrefix(l, "KUBELET_NODE_LABELS="):
					lines[i] = "KUBELET_NODE_LABELS=\"" + tc.labels + "\""
				}
			}
			_, err := provision(base64.StdEncoding.EncodeToString([]byte(strings.Join(lines, "\n"))))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("provision = %v, want %q", err, tc.want)
			}
		})
	}
}

// capture is a bus.Publisher that keeps what it is given.
type capture struct {
	mu   sync.Mutex
	msgs map[string][]bus.Message
}

func (c *capture) Publish(_ context.Context, queue string, msgs ...bus.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.msgs == nil {
		c.msgs = map[string][]bus.Message{}
	}
	c.msgs[queue] = append(c.msgs[queue], msgs...)
	return nil
}

func (c *capture) Close(context.Context) error { return nil }

func (c *capture) get(queue string) []bus.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bus.Message(nil), c.msgs[queue]...)
}

func TestEvict(t *testing.T) {
	for _, schema := range []string{SchemaEventGrid, SchemaCloudEvents} {
		t.Run(schema, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			var mu sync.Mutex
			var evicted []string
			eg := &capture{}
			s := start(t, Options{OpDelay: time.Millisecond, Clock: clk, EvictionNotice: 15 * time.Second,
				EventGrid:  EventGrid{Publisher: eg, Queue: "interruption", Schema: schema},
				OnEviction: func(id string) { mu.Lock(); evicted = append(evicted, id); mu.Unlock() }})
			vms, nics := clients(t, s)
			ctx := context.Background()
			np, _ := nics.BeginCreateOrUpdate(ctx, rg, "n", nicBody(), nil)
			clk.Step(time.Second)
			if _, err := np.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			body := vmBody(azure.NICResourceID(sub, rg, "n"), "")
			body.Properties.NetworkProfile.NetworkInterfaces[0].Properties = &armcompute.NetworkInterfaceReferenceProperties{DeleteOption: ptr(armcompute.DeleteOptionsDelete)}
			vp, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", body, nil)
			if err != nil {
				t.Fatal(err)
			}
			clk.Step(time.Second)
			if _, err := vp.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Evict("vm-1"); err == nil || !strings.Contains(err.Error(), "not a spot VM") {
				t.Fatalf("evicting on-demand VM: %v", err)
			}
			s.mu.Lock()
			s.vms[resourceKey(sub, rg, "vm-1")].vm.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
			s.mu.Unlock()
			if err := s.Evict("vm-1"); err != nil {
				t.Fatal(err)
			}
			if err := s.Evict("vm-1"); err == nil || !strings.Contains(err.Error(), "already being evicted") {
				t.Errorf("second eviction of the same VM: %v", err)
			}
			clk.Step(14 * time.Second)
			if len(s.VMs()) != 1 {
				t.Fatal("the VM went before its notice ran out")
			}
			clk.Step(time.Second)
			if len(s.VMs()) != 0 || len(s.NICs()) != 0 {
				t.Errorf("after eviction: %d VMs, %d NICs (NIC has deleteOption Delete)", len(s.VMs()), len(s.NICs()))
			}
			var msgs []bus.Message
			for deadline := time.Now().Add(5 * time.Second); len(msgs) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				msgs = eg.get("interruption")
			}
			if len(msgs) != 1 {
				t.Fatalf("Event Grid delivered %d messages; want 1", len(msgs))
			}
			m := msgs[0]
			vmID := azure.VMResourceID(sub, rg, "vm-1")
			if m.ApplicationProperties["aeg-event-type"] != "Notification" || m.ApplicationProperties["aeg-output-event-id"] != m.ID ||
				m.ApplicationProperties["aeg-subscription-name"] != "KARPFUNC-INTERRUPTION" || m.ApplicationProperties["aeg-delivery-count"] != "0" {
				t.Errorf("application properties = %v", m.ApplicationProperties)
			}
			var doc map[string]any
			if err := json.Unmarshal(m.Body, &doc); err != nil {
				t.Fatal(err)
			}
			typeKey := "eventType"
			if schema == SchemaCloudEvents {
				typeKey = "type"
				if doc["specversion"] != "1.0" {
					t.Errorf("CloudEvent specversion = %v", doc["specversion"])
				}
			}
			if doc[typeKey] != "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated" || doc["subject"] != vmID {
				t.Errorf("body = %s", m.Body)
			}
			props := doc["data"].(map[string]any)["resourceInfo"].(map[string]any)["properties"].(map[string]any)
			if props["annotationName"] != "VirtualMachinePreempted" || props["targetResourceId"] != vmID {
				t.Errorf("annotation = %v", props)
			}
			// What Azure's stand-in sends, karpfunc's parser reads.
			sig, err := interruption.ParseEventGrid(m.Body, m.ApplicationProperties)
			if err != nil || sig.ProviderID != "azure://"+vmID || sig.Schema != schema || !sig.Gone {
				t.Errorf("parsed = %+v, %v", sig, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(evicted) != 1 || evicted[0] != vmID || s.Counters().Evictions != 1 || s.Counters().Preempted != 1 {
				t.Errorf("evictions reported: %v", evicted)
			}
			if err := s.Evict("vm-1"); err == nil {
				t.Error("evicting a missing VM succeeded")
			}
		})
	}
}
