package tests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/localenv"
)

// TestImageDrift: nodes boot the gallery's latest node image
// (status.imageID names it); when AKS publishes a newer one, the node
// drifts (ImageDrift) and is replaced first by one on the new image.
func TestImageDrift(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "imagedrift", BootDelay: time.Second,
		// A short cache and a frequent safety-net pass: nothing else
		// announces a gallery release.
		SweepSchedule: "*/10 * * * * *", HostSettings: map[string]string{"KARPFUNC_NODE_IMAGE_TTL": "5s"}})
	ctx := context.Background()
	kube := env.Kube
	app := deployment("steady", 1, "500m", "512Mi")
	app.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "general"}
	if err := kube.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "steady running", func() (bool, string) { return allRunning(ctx, kube, "steady", 1) })
	before := claimOfPod(t, ctx, kube, onlyPod(t, ctx, kube, "steady"))
	latest := armemulator.DefaultGalleryVersions()
	if !strings.HasSuffix(before.Status.ImageID, "/versions/"+latest[len(latest)-1].Name) {
		t.Fatalf("status.imageID %q is not the gallery's latest %s", before.Status.ImageID, latest[len(latest)-1].Name)
	}
	const release = "202612.01.0"
	env.ARM.SetGalleryVersions(append(latest, armemulator.GalleryVersion{Name: release, Published: time.Now().Add(-time.Hour)}))
	eventually(t, 3*time.Minute, "the node on the old image replaced by one on "+release, func() (bool, string) {
		pod, ok := soleLivePod(ctx, kube, "steady")
		if !ok || pod.Spec.NodeName == "" {
			// Between the eviction and the new pod's binding.
			return false, "the steady pod is being replaced"
		}
		now := claimOfPod(t, ctx, kube, pod)
		if now.Name == before.Name {
			cond := now.StatusConditions().Get(karpv1.ConditionTypeDrifted)
			return false, fmt.Sprintf("still on %s (Drifted %v)", now.Name, cond)
		}
		return strings.HasSuffix(now.Status.ImageID, "/versions/"+release), "replacement boots " + now.Status.ImageID
	})
	if n := eventCount(t, ctx, kube, "DisruptionTerminating", "Disrupting NodeClaim: Drifted"); n == 0 {
		t.Error("no DisruptionTerminating event for the drifted NodeClaim")
	}
}
