// Package testenv starts the real parts a package-level integration test
// needs — the local control plane and the ARM emulator behind the real
// launcher — with the cleanup registered on the test. The whole loop (relay,
// Functions host, handler) is internal/localenv's job; this is the smaller
// world a controller test talks to.
package testenv

import (
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// The Azure identity the emulator serves in package tests.
const (
	SubscriptionID = "00000000-0000-0000-0000-0000000000aa"
	ResourceGroup  = "MC_test"
	Location       = "eastus"
	ClusterName    = "test"
)

// ControlPlane starts etcd and kube-apiserver (plus whatever opts asks for;
// BinDir is filled in) and stops them when the test ends. It skips the test
// under -short.
func ControlPlane(t testing.TB, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := tools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if opts.BinDir, err = tools.EnsureBinaries(t.Context(), root, os.Stderr); err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	// karpfunc's own namespace (its state: offerings ConfigMap, limits
	// Leases) exists wherever the chart is installed.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: offerings.DefaultNamespace}}
	if err := Client(t, cp.RESTConfig()).Create(t.Context(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	return cp
}

// Client is a controller-runtime client for cfg with karpfunc's scheme.
func Client(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	kube, err := client.New(cfg, client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// DefaultServiceAccounts creates the "default" ServiceAccount pods need in
// each namespace, for control planes that run without kube-controller-manager.
func DefaultServiceAccounts(t testing.TB, kube client.Client, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
		if err := kube.Create(t.Context(), sa); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// ARM starts the ARM emulator (fast operations, no Nodes) and returns it
// with the real launcher pointed at it.
func ARM(t testing.TB) (*armemulator.Server, *azure.Launcher) {
	t.Helper()
	arm, err := armemulator.Start(t.Context(), armemulator.Options{SubscriptionIDs: []string{SubscriptionID},
		OpDelay: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Network: Network()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = arm.Close() })
	key, err := azure.GenerateSSHPublicKey("testenv")
	if err != nil {
		t.Fatal(err)
	}
	launcher, err := azure.NewLauncher(azure.Options{SubscriptionID: SubscriptionID, ResourceGroup: ResourceGroup,
		Location: Location, ClusterName: ClusterName, SubnetID: SubnetID(), SSHPublicKey: key,
		Endpoint: arm.URL(), CACertPEM: arm.CACertPEM(), Token: arm.Token(), PollFrequency: time.Second,
		// No cluster joins: the customData is rendered as in production,
		// with the emulator's certificate standing in for a cluster CA.
		Bootstrap: &azure.ClusterBootstrap{APIServerFQDN: "test-dns.hcp.eastus.azmk8s.io", ClusterCAPEM: arm.CACertPEM(),
			KubernetesVersion: "1.33.2", NetworkPlugin: azure.NetworkPluginAzure, NetworkPluginMode: azure.NetworkPluginModeOver,
			NetworkDataplane: azure.NetworkDataplaneCil, DNSServiceIP: azure.DefaultDNSServiceIP},
		BootstrapTokens: azure.StaticToken("test00.0000000000000000")})
	if err != nil {
		t.Fatal(err)
	}
	return arm, launcher
}

// Network is the node resource group's network as AKS creates it (load
// balancer "kubernetes" with its pools, the cluster NSG); SubnetID is a
// bring-your-own subnet with default outbound access next to it.
func Network() armemulator.Network {
	return armemulator.AKSNetwork(SubscriptionID, ResourceGroup, Location)
}

// SubnetID is the node subnet of the test resource group.
func SubnetID() string {
	return "/subscriptions/" + SubscriptionID + "/resourceGroups/" + ResourceGroup +
		"/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
}
