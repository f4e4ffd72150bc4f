package tests

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
)

// TestEphemeralOSDiskPool: the example NodePool that selects sizes by the
// provider's sku-storage-ephemeralos-maxsize label brings 20 pods to
// Running (and one pod pinned to a size of each placement), and every VM it
// launched has an ephemeral OS disk as the Azure provider writes it, read
// back through the SDK: diffDiskSettings Local on the size's local disk
// (NVMe > cache > resource), ReadOnly caching, the class's 128 GB.
func TestEphemeralOSDiskPool(t *testing.T) {
	t.Parallel()
	env := startEnv(t, localenv.Options{ClusterName: "e2e", BootDelay: time.Second})
	ctx := context.Background()
	if _, err := env.ApplyFile(ctx, filepath.Join(env.Options.RepoRoot, "examples", "nodepool-ephemeral.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Create(ctx, deployment("eph", 20, "500m", "1Gi")); err != nil {
		t.Fatal(err)
	}
	// One pod each on a size whose ephemeral disk is the cache disk, the
	// resource disk and the NVMe disk, so every placement reaches the
	// emulator whichever sizes the 20 pods get.
	for app, size := range map[string]string{"eph-cache": "Standard_F16s_v2", "eph-resource": "Standard_E4d_v5", "eph-nvme": "Standard_D128ds_v6"} {
		d := deployment(app, 1, "500m", "1Gi")
		d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelInstanceTypeStable: size}
		if err := env.Kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Minute, "20 pods running on the ephemeral pool", func() (bool, string) { return allRunning(ctx, env.Kube, "eph", 20) })
	for _, app := range []string{"eph-cache", "eph-resource", "eph-nvme"} {
		eventually(t, 2*time.Minute, app+" running", func() (bool, string) { return allRunning(ctx, env.Kube, app, 1) })
	}

	// The placement each size's local disks give, from the public facts
	// the catalog is built from (cache disk GiB, resource disk MiB).
	wantPlacement := map[string]armcompute.DiffDiskPlacement{
		"Standard_D64s_v3": armcompute.DiffDiskPlacementCacheDisk, "Standard_F16s_v2": armcompute.DiffDiskPlacementCacheDisk,
		"Standard_E4d_v5": armcompute.DiffDiskPlacementResourceDisk, "Standard_D128ds_v6": armcompute.DiffDiskPlacementNvmeDisk,
	}
	vms := vmClient(t, env)
	claims := nodeClaimList(t, ctx, env.Kube)
	placements := map[armcompute.DiffDiskPlacement]bool{}
	for _, nc := range claims {
		got, err := vms.Get(ctx, localenv.ResourceGroup, nc.Name, nil)
		if err != nil {
			t.Fatalf("GET VM %s: %v", nc.Name, err)
		}
		size := string(*got.Properties.HardwareProfile.VMSize)
		od := got.Properties.StorageProfile.OSDisk
		want, known := wantPlacement[size]
		if !known {
			t.Errorf("VM %s is a %s, which is not a size whose local disk holds a 128 GB ephemeral OS disk", nc.Name, size)
			continue
		}
		if od.DiffDiskSettings != nil {
			placements[ptrValue(od.DiffDiskSettings.Placement)] = true
		}
		if od.DiffDiskSettings == nil || ptrValue(od.DiffDiskSettings.Option) != armcompute.DiffDiskOptionsLocal || ptrValue(od.DiffDiskSettings.Placement) != want {
			t.Errorf("VM %s (%s): diffDiskSettings %s, want Local on %s", nc.Name, size, describeDiff(od.DiffDiskSettings), want)
		}
		if ptrValue(od.Caching) != armcompute.CachingTypesReadOnly || ptrValue(od.DiskSizeGB) != 128 {
			t.Errorf("VM %s (%s): caching %q, diskSizeGB %d; want ReadOnly, 128", nc.Name, size, ptrValue(od.Caching), ptrValue(od.DiskSizeGB))
		}
		if nc.Labels["karpenter.azure.com/sku-storage-ephemeralos-maxsize"] == "" {
			t.Errorf("NodeClaim %s (%s) lacks the sku-storage-ephemeralos-maxsize label", nc.Name, size)
		}
		t.Logf("%s: %s, ephemeral OS disk on %s, max %s GB", nc.Name, size, want, nc.Labels["karpenter.azure.com/sku-storage-ephemeralos-maxsize"])
	}
	if len(placements) != 3 {
		t.Errorf("VMs used placements %v; want CacheDisk, ResourceDisk and NvmeDisk", placements)
	}
}

// TestArm64Pool: the example NodePool that allows only arm64 sizes brings 20 pods to
// Running on arm64 nodes booting the AKS arm64 Gen2 image the provider
// picks for the cluster's Kubernetes version.
func TestArm64Pool(t *testing.T) {
	t.Parallel()
	env := startEnv(t, localenv.Options{ClusterName: "e2e", BootDelay: time.Second})
	ctx := context.Background()
	if _, err := env.ApplyFile(ctx, filepath.Join(env.Options.RepoRoot, "examples", "nodepool-arm64.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.Create(ctx, deployment("arm", 20, "500m", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, "20 pods running on the arm64 pool", func() (bool, string) { return allRunning(ctx, env.Kube, "arm", 20) })

	// Ubuntu 24.04 from Kubernetes 1.34, else 22.04
	// (karpenter-provider-azure@352646f5 pkg/providers/imagefamily/resolver.go:251-284).
	definition := "2204gen2arm64containerd"
	if version.MustParseGeneric(serverVersion(t, env)).AtLeast(version.MajorMinor(1, 34)) {
		definition = "2404gen2arm64containerd"
	}
	var nodes corev1.NodeList
	if err := env.Kube.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		t.Fatal("no nodes")
	}
	for _, n := range nodes.Items {
		if n.Labels[corev1.LabelArchStable] != "arm64" || n.Labels[karpv1.NodePoolLabelKey] != "arm" {
			t.Errorf("node %s: arch %q, nodepool %q; want arm64 from pool arm", n.Name, n.Labels[corev1.LabelArchStable], n.Labels[karpv1.NodePoolLabelKey])
		}
	}
	vms := vmClient(t, env)
	for _, nc := range nodeClaimList(t, ctx, env.Kube) {
		got, err := vms.Get(ctx, localenv.ResourceGroup, nc.Name, nil)
		if err != nil {
			t.Fatalf("GET VM %s: %v", nc.Name, err)
		}
		image := ptrValue(got.Properties.StorageProfile.ImageReference.CommunityGalleryImageID)
		if !strings.Contains(image, "/images/"+definition+"/") {
			t.Errorf("VM %s (%s) boots %s, want image definition %s", nc.Name, *got.Properties.HardwareProfile.VMSize, image, definition)
		}
		t.Logf("%s: %s, %s", nc.Name, *got.Properties.HardwareProfile.VMSize, image)
	}
}

// vmClient is the real SDK's VM client pointed at the emulator.
func vmClient(t *testing.T, env *localenv.Env) *armcompute.VirtualMachinesClient {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(env.ARM.CACertPEM()) {
		t.Fatal("the ARM emulator's CA is not PEM")
	}
	cfg := cloud.AzurePublic
	cfg.Services = map[cloud.ServiceName]cloud.ServiceConfiguration{
		cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: env.ARM.URL()},
	}
	opts := &arm.ClientOptions{DisableRPRegistration: true, ClientOptions: policy.ClientOptions{Cloud: cfg,
		Transport: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}}
	client, err := armcompute.NewVirtualMachinesClient(localenv.SubscriptionID, bearer(env.ARM.Token()), opts)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func describeDiff(d *armcompute.DiffDiskSettings) string {
	if d == nil {
		return "absent"
	}
	return fmt.Sprintf("{option %q, placement %q}", ptrValue(d.Option), ptrValue(d.Placement))
}

func ptrValue[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
