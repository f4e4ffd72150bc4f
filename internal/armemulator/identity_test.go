package armemulator

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

func identityID(name string) string {
	return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/" + name
}

// TestLinkedAuthorizationFailed sends VMs carrying user-assigned identities
// through the real armcompute client: one the caller may not assign, and
// one that does not exist, are refused as ARM refuses them; one it may
// assign is accepted and reported with its client ID.
func TestLinkedAuthorizationFailed(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, CallerObjectID: "caller-oid", Identities: []Identity{
		{ResourceID: identityID("kubelet"), ClientID: "kubelet-client", PrincipalID: "kubelet-oid", CallerMayAssign: true},
		{ResourceID: identityID("other"), ClientID: "other-client", PrincipalID: "other-oid"},
	}})
	vms, nics := clients(t, s)
	ctx := context.Background()
	p, err := nics.BeginCreateOrUpdate(ctx, rg, "nic-1", nicBody(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	nicID := azure.NICResourceID(sub, rg, "nic-1")
	withIdentities := func(ids ...string) armcompute.VirtualMachine {
		vm := goodVM(t, nicID)
		vm.Identity = &armcompute.VirtualMachineIdentity{Type: ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{}}
		for _, id := range ids {
			vm.Identity.UserAssignedIdentities[id] = &armcompute.UserAssignedIdentitiesValue{}
		}
		return vm
	}
	for _, tc := range []struct {
		name string
		ids  []string
		want string
	}{
		{"no Managed Identity Operator", []string{identityID("kubelet"), identityID("other")}, identityID("other")},
		{"identity that does not exist", []string{identityID("gone")}, identityID("gone")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", withIdentities(tc.ids...), nil)
			var re *azcore.ResponseError
			if err == nil || !asResponseError(err, &re) {
				t.Fatalf("create = %v, want 403 LinkedAuthorizationFailed", err)
			}
			if re.StatusCode != 403 || re.ErrorCode != "LinkedAuthorizationFailed" ||
				!strings.Contains(err.Error(), "'Microsoft.ManagedIdentity/userAssignedIdentities/assign/action' on the linked scope(s) '"+tc.want+"'") ||
				!strings.Contains(err.Error(), "The client 'caller-oid'") {
				t.Fatalf("create = %d %s %v", re.StatusCode, re.ErrorCode, err)
			}
		})
	}
	if c := s.Counters(); c.VMCreates != 0 {
		t.Fatalf("%d VMs created by refused requests", c.VMCreates)
	}
	poller, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-ok", withIdentities(identityID("kubelet")), nil)
	if err != nil {
		t.Fatalf("create with an identity the caller may assign: %v", err)
	}
	res, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for id, v := range res.Identity.UserAssignedIdentities {
		if strings.EqualFold(id, identityID("kubelet")) && v != nil {
			got = deref(v.ClientID)
		}
	}
	if got != "kubelet-client" {
		t.Errorf("VM identity %+v: want the kubelet identity with client ID kubelet-client", res.Identity)
	}
}

// A VM whose customData names a kubelet identity it does not carry never
// starts its kubelet.
func TestKubeletIdentityMustBeOnTheVM(t *testing.T) {
	s := &Server{opts: Options{NodeResources: func(string, int32) (capacity corev1.ResourceList, arch string, ok bool) {
		return nil, "amd64", true
	}}, nics: map[string]*nicState{}}
	boot := testCustomData(t, func(nb *azure.NodeBootstrap) { nb.Cluster.KubeletIdentityClientID = "kubelet-client" })
	vmWith := func(clientIDs ...string) *vmState {
		vm := vmBody("", boot)
		vm.Name = ptr("vm-1")
		if len(clientIDs) > 0 {
			vm.Identity = &armcompute.VirtualMachineIdentity{UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{}}
			for i, c := range clientIDs {
				vm.Identity.UserAssignedIdentities[identityID(string(rune('a'+i)))] = &armcompute.UserAssignedIdentitiesValue{ClientID: ptr(c)}
			}
		}
		return &vmState{vm: vm, sub: sub, rg: rg, location: loc}
	}
	for _, tc := range []struct {
		name    string
		vm      *vmState
		refused bool
	}{
		{"no identity", vmWith(), true},
		{"another identity", vmWith("other-client"), true},
		{"the kubelet identity", vmWith("other-client", "kubelet-client"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.kubeletFor(tc.vm)
			if tc.refused != (err != nil) || (err != nil && !strings.Contains(err.Error(), "kubelet identity kubelet-client")) {
				t.Errorf("kubeletFor = %v, want refused=%v", err, tc.refused)
			}
		})
	}
}

// A customData without a variable configureAzureJson writes unquoted
// leaves azure.json invalid: the kubelet is not started, and the reason
// names the variable.
func TestProvisionRefusesInvalidAzureJSON(t *testing.T) {
	for _, tc := range []struct{ name, drop, want string }{
		{"control: karpfunc's customData", "", ""},
		{"rate limit QPS missing", "CLOUDPROVIDER_RATELIMIT_QPS=", "CLOUDPROVIDER_RATELIMIT_QPS"},
		{"outbound SNAT missing", "LOAD_BALANCER_DISABLE_OUTBOUND_SNAT=", "LOAD_BALANCER_DISABLE_OUTBOUND_SNAT"},
		{"backoff missing", "CLOUDPROVIDER_BACKOFF=", "CLOUDPROVIDER_BACKOFF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := base64.StdEncoding.DecodeString(testCustomData(t, nil))
			var kept []string
			for _, l := range strings.Split(string(raw), "\n") {
				if tc.drop == "" || !strings.HasPrefix(l, tc.drop) {
					kept = append(kept, l)
				}
			}
			_, err := provision(base64.StdEncoding.EncodeToString([]byte(strings.Join(kept, "\n"))))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("provision = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "/etc/kubernetes/azure.json is not valid JSON") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("provision = %v, want azure.json refused naming %s", err, tc.want)
			}
		})
	}
}
