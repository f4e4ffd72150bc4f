package disruption

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

func TestAllowedDisruptions(t *testing.T) {
	str := func(s string) *string { return &s }
	dur := func(s string) *metav1.Duration { d, _ := time.ParseDuration(s); return &metav1.Duration{Duration: d} }
	// now is 2026-12-01 12:00 UTC, a Tuesday.
	for _, tc := range []struct {
		name    string
		budgets []karpv1.Budget
		reason  Reason
		nodes   int
		want    int
		err     string
	}{
		{"default is 10% rounded up", nil, ReasonEmpty, 25, 3, ""},
		{"a count", []karpv1.Budget{{Nodes: "4"}}, ReasonEmpty, 25, 4, ""},
		{"a percentage rounds up", []karpv1.Budget{{Nodes: "33%"}}, ReasonDrifted, 10, 4, ""},
		{"0% of any fleet is 0", []karpv1.Budget{{Nodes: "0%"}}, ReasonDrifted, 10, 0, ""},
		{"the most restrictive active budget wins", []karpv1.Budget{{Nodes: "50%"}, {Nodes: "2"}, {Nodes: "30%"}}, ReasonEmpty, 10, 2, ""},
		{"a budget for other reasons does not apply", []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted}}}, ReasonEmpty, 10, 10, ""},
		{"a budget for this reason applies", []karpv1.Budget{{Nodes: "0", Reasons: []karpv1.DisruptionReason{karpv1.DisruptionReasonDrifted, karpv1.DisruptionReasonEmpty}}}, ReasonEmpty, 10, 0, ""},
		{"a schedule active now (daily 11:30 for 1h)", []karpv1.Budget{{Nodes: "10"}, {Nodes: "0", Schedule: str("30 11 * * *"), Duration: dur("1h")}}, ReasonUnderutilized, 10, 0, ""},
		{"a schedule over (daily 10:00 for 1h)", []karpv1.Budget{{Nodes: "10"}, {Nodes: "0", Schedule: str("0 10 * * *"), Duration: dur("1h")}}, ReasonUnderutilized, 10, 10, ""},
		{"a schedule not yet begun (weekdays 13:00)", []karpv1.Budget{{Nodes: "0", Schedule: str("0 13 * * 1-5"), Duration: dur("8h")}}, ReasonUnderutilized, 10, 10, ""},
		{"a schedule that began yesterday and lasts 30h", []karpv1.Budget{{Nodes: "1", Schedule: str("@daily"), Duration: dur("30h")}}, ReasonUnderutilized, 10, 1, ""},
		{"a bad cron", []karpv1.Budget{{Nodes: "1", Schedule: str("every day"), Duration: dur("1h")}}, ReasonEmpty, 10, 0, `schedule "every day" is not a cron expression`},
		{"duration without schedule", []karpv1.Budget{{Nodes: "1", Duration: dur("1h")}}, ReasonEmpty, 10, 0, "schedule and duration must be set together"},
		{"a percentage over 100", []karpv1.Budget{{Nodes: "150%"}}, ReasonEmpty, 10, 0, "from 0% to 100%"},
		{"not a number", []karpv1.Budget{{Nodes: "many"}}, ReasonEmpty, 10, 0, "non-negative integer or a percentage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: tc.budgets}}}
			got, err := AllowedDisruptions(np, tc.reason, tc.nodes, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "NodePool p: spec.disruption.budgets[") {
					t.Fatalf("error = %v, want one naming the NodePool and budget and containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("allowed = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBudgetsCountDisruptingNodes(t *testing.T) {
	f := newFixture(t)
	f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "50%"}}
	for _, n := range []string{"a", "b", "c", "d"} {
		f.node(n, "Standard_D4as_v5", "on-demand")
	}
	deleting := metav1.NewTime(now)
	f.c.NodeClaims[0].DeletionTimestamp = &deleting
	d := f.decide()
	// 50% of 4 is 2; one is already being deleted: one more may go.
	if got := d.Budgets.Allowed("general", ReasonEmpty); got != 1 {
		t.Errorf("allowed = %d, want 1", got)
	}
	if d.Command == nil || len(d.Command.Candidates) != 1 {
		t.Fatalf("command %v, want emptiness of exactly one node", d.Command)
	}
}

func TestBadBudgetDisruptsNothing(t *testing.T) {
	f := newFixture(t)
	f.np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1", Schedule: func() *string { s := "61 * * * *"; return &s }(), Duration: &metav1.Duration{Duration: time.Hour}}}
	f.node("a", "Standard_D4as_v5", "on-demand")
	d := f.decide()
	if d.Command != nil {
		t.Errorf("command %s despite an unreadable budget", d.Command)
	}
	if len(d.BudgetErrors) == 0 {
		t.Error("no budget error reported")
	}
}
