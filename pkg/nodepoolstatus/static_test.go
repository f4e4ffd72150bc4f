package nodepoolstatus

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/staticcapacity"
)

// With static capacity off, a static NodePool is not Ready and says why by
// name; a dynamic one is untouched.
func TestRefuseStatic(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready := class("", "")
	ready.StatusConditions().SetTrue("Ready")
	classes := map[string]*v1beta1.AKSNodeClass{"default": ready}
	replicas := int64(2)
	for _, tc := range []struct {
		name     string
		replicas *int64
		refused  bool
	}{{"static", &replicas, true}, {"dynamic", nil, false}} {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Generation: 1}}
		np.Spec.Replicas = tc.replicas
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: "default"}
		np.Status = RefuseStatic(np, PoolStatus(context.Background(), np, classes, nil, clk), clk)
		cond := np.StatusConditions().Get(karpv1.ConditionTypeValidationSucceeded)
		refused := cond.IsFalse() && cond.Reason == staticcapacity.ReasonDisabled && strings.Contains(cond.Message, staticcapacity.Setting)
		if refused != tc.refused || np.StatusConditions().Root().IsTrue() == tc.refused {
			t.Errorf("%s: ValidationSucceeded %+v, Ready %v; want refused=%v", tc.name, cond, np.StatusConditions().Root().IsTrue(), tc.refused)
		}
	}
}
