package disruption

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  func(f *fixture)
		change func(f *fixture) // after the decision, before validation
		want   string           // "" = still valid; else a substring of the refusal
	}{
		{"an empty node still empty", func(f *fixture) {
			f.node("a", "Standard_D4as_v5", "on-demand")
		}, func(*fixture) {}, ""},
		{"a pod landed on the empty node", func(f *fixture) {
			f.node("a", "Standard_D4as_v5", "on-demand")
		}, func(f *fixture) { f.pod("late", "a", "1", "1Gi") }, "no longer qualifies for emptiness"},
		{"the node got do-not-disrupt", func(f *fixture) {
			f.node("a", "Standard_D4as_v5", "on-demand")
		}, func(f *fixture) {
			f.c.Nodes[0].Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
		}, "do-not-disrupt"},
		{"the budget closed", func(f *fixture) {
			f.node("a", "Standard_D4as_v5", "on-demand")
		}, func(f *fixture) { f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}} }, "budget for Empty now allows 0"},
		{"a delete still holds", func(f *fixture) {
			f.node("a", "Standard_D8s_v5", "on-demand")
			f.pods("a", "a", 4, "1", "2Gi")
			f.pod("stay", "a", "100m", "128Mi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })
			f.node("b", "Standard_D8s_v5", "on-demand")
			f.pods("b", "b", 2, "1", "2Gi")
		}, func(*fixture) {}, ""},
		{"the room the pods were to use was taken", func(f *fixture) {
			f.node("a", "Standard_D8s_v5", "on-demand")
			f.pods("a", "a", 4, "1", "2Gi")
			f.pod("stay", "a", "100m", "128Mi", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} })
			f.node("b", "Standard_D8s_v5", "on-demand")
			f.pods("b", "b", 2, "1", "2Gi")
		}, func(f *fixture) { f.pods("late", "a", 3, "1", "2Gi") }, "replacement"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.build(f)
			d := f.decide()
			if d.Command == nil {
				t.Fatalf("no command to validate; refusals %+v", d.Refusals)
			}
			tc.change(f)
			got, err := Validate(State{Cluster: f.c, Catalog: f.cat, Now: now.Add(ValidationDelay)}, d.Command)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want the command to hold", err)
				}
				if strings.Join(names(got.Candidates), ",") != strings.Join(names(d.Command.Candidates), ",") || got.Action() != d.Command.Action() {
					t.Errorf("validated %s, decided %s", got, d.Command)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want a ValidationError containing %q", err, tc.want)
			}
		})
	}
}
