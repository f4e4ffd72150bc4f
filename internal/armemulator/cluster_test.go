package armemulator

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	corev1 "k8s.io/api/core/v1"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

// withVar rewrites one provisioning variable of customData, as another
// writer of customData would have set it.
func withVar(t *testing.T, customData, name, value string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(customData)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, name+"=") {
			line, found = name+`="`+value+`"`, true
		}
		lines = append(lines, line)
	}
	if !found {
		t.Fatalf("customData has no %s", name)
	}
	return base64.StdEncoding.EncodeToString([]byte(strings.Join(lines, "\n")))
}

// TestNodeNetworkAndImageMustFitTheCluster: the emulated node comes up
// NetworkUnavailable, not Ready, when its NETWORK_PLUGIN is not the one the
// cluster's network profile needs (azure only on classic Azure CNI, none
// on overlay, on Cilium and with plugin none), or when its node image does
// not support its Kubernetes version (Learn's table); otherwise kwok keeps
// it Ready.
func TestNodeNetworkAndImageMustFitTheCluster(t *testing.T) {
	overlay := ManagedCluster{NetworkPlugin: "azure", NetworkPluginMode: "overlay", NetworkDataplane: "cilium"}
	classic := ManagedCluster{NetworkPlugin: "azure", NetworkDataplane: "azure"}
	ciliumNodeSubnet := ManagedCluster{NetworkPlugin: "azure", NetworkDataplane: "cilium"}
	ubuntu2204 := "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202511.07.0"
	ubuntu2404 := "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2404gen2containerd/versions/202511.07.0"
	for _, tc := range []struct {
		name         string
		cluster      ManagedCluster
		plugin, kube string // NETWORK_PLUGIN written into customData; its KUBERNETES_VERSION
		image        string
		ipConfigs    int
		wantNotReady string // "" Ready
	}{
		{"overlay, none", overlay, "none", "1.33.2", ubuntu2204, 1, ""},
		{"overlay, azure (the classic conflist)", overlay, "azure", "1.33.2", ubuntu2204, 1, "NETWORK_PLUGIN=azure"},
		{"zero profile is az aks create's overlay", ManagedCluster{}, "azure", "1.33.2", ubuntu2204, 1, "NETWORK_PLUGIN=azure"},
		{"classic Azure CNI, azure", classic, "azure", "1.33.2", ubuntu2204, 50, ""},
		{"classic Azure CNI, none", classic, "none", "1.33.2", ubuntu2204, 50, "NETWORK_PLUGIN=none"},
		{"Cilium node subnet, azure", ciliumNodeSubnet, "azure", "1.33.2", ubuntu2204, 50, "NETWORK_PLUGIN=azure"},
		{"Ubuntu 22.04 at 1.37", overlay, "none", "1.37.2", ubuntu2204, 1, "2204gen2containerd"},
		{"Ubuntu 24.04 at 1.37", overlay, "none", "1.37.2", ubuntu2404, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, Options{OpDelay: time.Millisecond, Cluster: tc.cluster,
				NodeResources: func(string, int32) (corev1.ResourceList, string, bool) {
					return corev1.ResourceList{}, "amd64", true
				}})
			vms, nics := clients(t, s)
			ctx := context.Background()
			nic := nicBody()
			for i := 2; i <= tc.ipConfigs; i++ {
				nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, &armnetwork.InterfaceIPConfiguration{
					Name:       ptr(fmt.Sprintf("ipconfig%d", i)),
					Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: ptr(testSubnetID)}}})
			}
			np, err := nics.BeginCreateOrUpdate(ctx, rg, "n", nic, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := np.PollUntilDone(ctx, nil); err != nil {
				t.Fatal(err)
			}
			data := testCustomData(t, func(nb *azure.NodeBootstrap) {
				nb.Cluster.KubernetesVersion = tc.kube
				// The node's own settings as the cluster's (its pod network
				// label, its NIC); only NETWORK_PLUGIN is rewritten.
				nb.Cluster.NetworkPlugin, nb.Cluster.NetworkPluginMode, nb.Cluster.NetworkDataplane = "azure", "", "azure"
				if tc.cluster.NetworkPluginMode == "overlay" || tc.cluster == (ManagedCluster{}) {
					nb.Cluster.NetworkPluginMode = "overlay"
				}
			})
			body := vmBody(azure.NICResourceID(sub, rg, "n"), withVar(t, data, "NETWORK_PLUGIN", tc.plugin))
			body.Properties.StorageProfile = &armcompute.StorageProfile{ImageReference: &armcompute.ImageReference{CommunityGalleryImageID: ptr(tc.image)}}
			if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", body, nil); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			k, err := s.kubeletFor(s.vms[resourceKey(sub, rg, "vm-1")])
			s.mu.Unlock()
			if err != nil {
				t.Fatalf("node does not register: %v", err)
			}
			var network *corev1.NodeCondition
			for i := range k.node.Status.Conditions {
				if k.node.Status.Conditions[i].Type == corev1.NodeNetworkUnavailable {
					network = &k.node.Status.Conditions[i]
				}
			}
			_, kwok := k.node.Annotations[KwokNodeAnnotation]
			if tc.wantNotReady == "" {
				if !kwok || network != nil && network.Status == corev1.ConditionTrue {
					t.Fatalf("node not brought Ready: kwok-managed %v, NetworkUnavailable %+v", kwok, network)
				}
				return
			}
			if kwok || network == nil || network.Status != corev1.ConditionTrue || !strings.Contains(network.Message, tc.wantNotReady) {
				t.Fatalf("kwok-managed %v, NetworkUnavailable %+v; want True saying %q and no kwok", kwok, network, tc.wantNotReady)
			}
			if got := s.BootError("vm-1"); !strings.Contains(got, tc.wantNotReady) {
				t.Errorf("BootError = %q, want it to say %q", got, tc.wantNotReady)
			}
		})
	}
}
