package disruption

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

func TestConditions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mutate     func(f *fixture, nc *karpv1.NodeClaim)
		versions   Versions
		consol     bool
		at         time.Time
		driftedHas string
	}{
		{"initialized an hour ago, consolidateAfter 1m", func(*fixture, *karpv1.NodeClaim) {}, Versions{}, true, time.Time{}, ""},
		{"a pod event 20 s ago", func(_ *fixture, nc *karpv1.NodeClaim) {
			nc.Status.LastPodEventTime = metav1.NewTime(now.Add(-20 * time.Second))
		}, Versions{}, false, now.Add(40 * time.Second), ""},
		{"not initialized", func(_ *fixture, nc *karpv1.NodeClaim) { nc.Status.Conditions = nil }, Versions{}, false, time.Time{}, ""},
		{"consolidateAfter Never", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("Never")
		}, Versions{}, false, time.Time{}, ""},
		{"NodePool template changed", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Template.Labels = map[string]string{"x": "y"}
		}, Versions{}, true, time.Time{}, DriftNodePool},
		{"AKSNodeClass changed", func(f *fixture, _ *karpv1.NodeClaim) {
			gen := "Ubuntu2404"
			f.c.NodeClasses[0].Spec.ImageFamily = &gen
		}, Versions{}, true, time.Time{}, DriftNodeClass},
		{"a budget change is not drift", func(f *fixture, _ *karpv1.NodeClaim) {
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
		}, Versions{}, true, time.Time{}, ""},
		{"a newer node image in the gallery", bootedImage(oldImage), imageVersions(newImage), true, time.Time{}, DriftImage},
		{"the current node image", bootedImage(newImage), imageVersions(newImage), true, time.Time{}, ""},
		{"image version case-folded as ARM does", bootedImage(strings.ToLower(newImage)), imageVersions(newImage), true, time.Time{}, ""},
		{"image of a definition that was not resolved", bootedImage(oldImage), Versions{Images: map[string]string{}}, true, time.Time{}, ""},
		{"an image karpfunc does not know", bootedImage("/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/images/custom"),
			imageVersions(newImage), true, time.Time{}, ""},
		{"control plane upgraded", kubelet("v1.33.2"), Versions{Kubernetes: "1.34.1"}, true, time.Time{}, DriftK8sVersion},
		{"kubelet at the control plane's version", kubelet("v1.34.1"), Versions{Kubernetes: "1.34.1"}, true, time.Time{}, ""},
		{"Kubernetes version unknown", kubelet("v1.33.2"), Versions{}, true, time.Time{}, ""},
		{"Kubernetes before image, as the provider checks", func(f *fixture, nc *karpv1.NodeClaim) {
			bootedImage(oldImage)(f, nc)
			kubelet("v1.33.2")(f, nc)
		}, Versions{Kubernetes: "1.34.1", Images: imageVersions(newImage).Images}, true, time.Time{}, DriftK8sVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			nc := f.node("a", "Standard_D4as_v5", "on-demand")
			tc.mutate(f, nc)
			hashes := map[string]string{}
			for _, c := range f.c.NodeClasses {
				hashes[c.Name] = NodeClassHash(c)
			}
			got := Conditions(nc, f.c.Nodes[0], f.np, hashes, tc.versions, now)
			if got.Consolidatable != tc.consol || !got.ConsolidatableAt.Equal(tc.at) {
				t.Errorf("consolidatable %t at %v, want %t at %v", got.Consolidatable, got.ConsolidatableAt, tc.consol, tc.at)
			}
			if (tc.driftedHas == "") != (got.Drifted == "") || (tc.driftedHas != "" && got.Drifted != tc.driftedHas) {
				t.Errorf("drifted %q, want %q", got.Drifted, tc.driftedHas)
			}
		})
	}
}

var (
	oldImage = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202510.03.0"
	newImage = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202511.07.0"
)

func bootedImage(id string) func(*fixture, *karpv1.NodeClaim) {
	return func(_ *fixture, nc *karpv1.NodeClaim) { nc.Status.ImageID = id }
}

func imageVersions(id string) Versions {
	img, ok := nodeimage.Parse(id)
	if !ok {
		panic(id)
	}
	return Versions{Images: map[string]string{img.DefinitionKey(): id}}
}

func kubelet(v string) func(*fixture, *karpv1.NodeClaim) {
	return func(f *fixture, _ *karpv1.NodeClaim) { f.c.Nodes[0].Status.NodeInfo.KubeletVersion = v }
}

// TestVersionDriftReplacesFirst: a node on an older image, or with another
// kubelet version than the control plane, is a drift command with a
// replacement for its pods (replacement first), within the Drifted budget.
func TestVersionDriftReplacesFirst(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mutate   func(*fixture, *karpv1.NodeClaim)
		versions Versions
		budget   string
		want     string // command method, "" none
	}{
		{"newer image", bootedImage(oldImage), imageVersions(newImage), "100%", "drift"},
		{"control plane upgraded", kubelet("v1.33.2"), Versions{Kubernetes: "1.34.1"}, "100%", "drift"},
		{"current versions", bootedImage(newImage), imageVersions(newImage), "100%", ""},
		{"newer image, Drifted budget 0", bootedImage(oldImage), imageVersions(newImage), "0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
			f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: tc.budget, Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}}
			nc := f.node("a", "Standard_D4as_v5", "on-demand")
			tc.mutate(f, nc)
			f.pod("web-0", "a", "500m", "512Mi")
			d := Decide(State{Cluster: f.c, Catalog: f.cat, Now: now, Options: f.opts, Versions: tc.versions})
			switch {
			case tc.want == "" && d.Command != nil:
				t.Fatalf("command %s, want none", d.Command)
			case tc.want != "" && (d.Command == nil || d.Command.Method != tc.want || len(d.Command.Replacements) != 1):
				t.Fatalf("command %v, want %s with one replacement (refusals %v)", d.Command, tc.want, d.Refusals)
			}
		})
	}
}
