package tests

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/nodepoolstatus"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// dFamilies are the quota families of the catalog's D-series sizes, the
// sizes examples/nodepool.yaml allows.
func dFamilies(cat *catalog.Catalog) map[string]bool {
	out := map[string]bool{}
	for _, it := range cat.InstanceTypes {
		if it.Labels[catalog.LabelSKUFamily] == "D" {
			out[offerings.QuotaFamily(it.Name)] = true
		}
	}
	return out
}

// onDemandOnly narrows the sample NodePool to on-demand capacity.
func onDemandOnly(t *testing.T, kube client.Client) {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := kube.Get(context.Background(), client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == karpv1.CapacityTypeLabelKey {
			np.Spec.Template.Spec.Requirements[i].Values = []string{karpv1.CapacityTypeOnDemand}
		}
	}
	if err := kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
}

// TestQuotaNextFamily: every D family but one has no quota left, the
// cheapest among them: the pods run on the family that has quota, and no
// create is refused for quota.
func TestQuotaNextFamily(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "quota-next", BootDelay: time.Second})
	ctx := context.Background()
	const open = "standardDSv5Family"
	families := dFamilies(env.Catalog)
	if !families[open] {
		t.Fatalf("the catalog has no %s sizes: %v", open, families)
	}
	quota := armemulator.Quota{Families: map[string]int64{}, Regional: 200}
	for family := range families {
		if family != open {
			quota.Families[family] = 0
		}
	}
	quota.Families[open] = 64
	env.ARM.SetQuota(quota)
	onDemandOnly(t, env.Kube)

	if err := env.Kube.Create(ctx, deployment("quota-next", 6, "1", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "quota-next running", func() (bool, string) { return allRunning(ctx, env.Kube, "quota-next", 6) })
	for _, vm := range env.ARM.VMs() {
		size := string(*vm.Properties.HardwareProfile.VMSize)
		if offerings.QuotaFamily(size) != open {
			t.Errorf("VM %s is a %s (%s); only %s has quota", *vm.Name, size, offerings.QuotaFamily(size), open)
		}
	}
	if refused := env.ARM.Counters().QuotaRefusals; refused != 0 {
		t.Errorf("%d creates refused for quota; want none", refused)
	}
}

// TestQuotaExhausted: no quota is left anywhere the NodePool can launch:
// nothing is created, and the pods' events and the NodePool's status say
// which quota and what to ask for.
func TestQuotaExhausted(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "quota-none", BootDelay: time.Second})
	ctx := context.Background()
	quota := armemulator.Quota{Families: map[string]int64{}, Regional: 200, Spot: 0}
	for family := range dFamilies(env.Catalog) {
		quota.Families[family] = 0
	}
	env.ARM.SetQuota(quota)
	onDemandOnly(t, env.Kube)

	if err := env.Kube.Create(ctx, deployment("quota-none", 2, "1", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "events naming the quota", func() (bool, string) {
		list := &corev1.EventList{}
		if err := env.Kube.List(ctx, list, client.InNamespace("default")); err != nil {
			return false, err.Error()
		}
		for _, ev := range list.Items {
			if ev.Reason == "FailedScheduling" && strings.Contains(ev.InvolvedObject.Name, "quota-none") &&
				strings.Contains(ev.Message, "Family quota in") && strings.Contains(ev.Message, "ask for a quota increase of standard") {
				return true, ""
			}
		}
		return false, "no FailedScheduling event naming a family quota"
	})
	eventually(t, 30*time.Second, "NodePool QuotaAvailable False", func() (bool, string) {
		np := &karpv1.NodePool{}
		if err := env.Kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
			return false, err.Error()
		}
		cond := np.StatusConditions().Get(nodepoolstatus.ConditionTypeQuotaAvailable)
		if cond == nil || !cond.IsFalse() || cond.Reason != nodepoolstatus.ReasonQuotaExhausted || !strings.Contains(cond.Message, "ask for a quota increase of standard") {
			return false, fmt.Sprintf("condition: %+v", cond)
		}
		return true, ""
	})
	if c := env.ARM.Counters(); c.VMCreates != 0 || c.QuotaRefusals != 0 {
		t.Errorf("%d creates, %d refused for quota; want none", c.VMCreates, c.QuotaRefusals)
	}
}

// TestQuotaUsagesForbidden: the usages API refuses (403): provisioning
// goes on as before, and says so once.
func TestQuotaUsagesForbidden(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "quota-403", BootDelay: time.Second})
	ctx := context.Background()
	env.ARM.Faults().Add(armemulator.Rule{Operation: armemulator.OpListUsages, Code: "AuthorizationFailed", StatusCode: 403,
		Message: "The client does not have authorization to perform action 'Microsoft.Compute/locations/usages/read'."})
	if err := env.Kube.Create(ctx, deployment("quota-403", 3, "1", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "quota-403 running", func() (bool, string) { return allRunning(ctx, env.Kube, "quota-403", 3) })
	data, err := os.ReadFile(env.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "provisioning goes on without quota awareness"); n != 1 {
		t.Errorf("the failing usages API is reported %d times in the log; want once", n)
	}
	if env.ARM.Counters().Requests[armemulator.OpListUsages] == 0 {
		t.Errorf("the usages API was never asked")
	}
}

// TestQuotaErrorTeachesCache: with quota awareness off, a create ARM
// refuses for a family's quota marks every size of that family
// unavailable in the shared cache, with ARM's own figures in the reason,
// and the pods run on the family that has quota.
func TestQuotaErrorTeachesCache(t *testing.T) {
	t.Parallel()
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "quota-learn", BootDelay: time.Second,
		HostSettings: map[string]string{"KARPFUNC_QUOTA_AWARE": "false"}})
	ctx := context.Background()
	const open = "standardDSv5Family"
	quota := armemulator.Quota{Families: map[string]int64{}, Regional: 200}
	for family := range dFamilies(env.Catalog) {
		quota.Families[family] = 0
	}
	quota.Families[open] = 64
	env.ARM.SetQuota(quota)
	onDemandOnly(t, env.Kube)

	if err := env.Kube.Create(ctx, deployment("quota-learn", 4, "1", "1Gi")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "quota-learn running", func() (bool, string) { return allRunning(ctx, env.Kube, "quota-learn", 4) })
	if env.ARM.Counters().QuotaRefusals == 0 {
		t.Fatal("no create was refused for quota: the test tests nothing")
	}
	set, err := offerings.NewStore(env.Kube, localenv.Namespace, "", nil).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	learnt := 0
	for _, entry := range set.Entries() {
		if entry.Family == "" {
			continue
		}
		learnt++
		if quota.Families[entry.Family] != 0 && !strings.EqualFold(entry.Family, open) {
			t.Errorf("entry %s names a family the test did not limit", entry)
		}
		if entry.InstanceType != "" || entry.CapacityType != karpv1.CapacityTypeOnDemand || !strings.Contains(entry.Reason, "(limit 0, usage 0, required ") {
			t.Errorf("entry %s: want the whole family, on-demand, with ARM's figures (limit 0, usage 0, required N)", entry)
		}
	}
	if learnt == 0 {
		t.Errorf("no family entry in the cache: %v", set.Entries())
	}
}
