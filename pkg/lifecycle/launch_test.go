package lifecycle

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// launchWorld is a real API server and the ARM emulator behind the real
// launcher, with the lifecycle controller on a fake clock (the emulator's own clock
// is real: creates take VMCreateDelay of real time).
type launchWorld struct {
	kube  client.Client
	arm   *armemulator.Server
	lc    *Controller
	clock *clocktesting.FakeClock
	store *offerings.Store
	// launched: the NodeClaims a look found Launched.
	launched map[string]bool
}

// TestLaunch runs the launch reconciler against one API server; each case
// has its own emulator and unavailable-offerings ConfigMap.
func TestLaunch(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube := testenv.Client(t, cp.RESTConfig())
	if err := kube.Create(t.Context(), &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	t.Run("a capacity failure moves to the next offering", func(t *testing.T) { launchCapacityFailure(t, kube) })
	t.Run("a non-capacity error never loops", func(t *testing.T) { launchNonCapacityError(t, kube) })
	t.Run("a throttled or failed poll deletes nothing", func(t *testing.T) { launchThrottledPoll(t, kube) })
}

func newLaunchWorld(t *testing.T, kube client.Client, vmCreate time.Duration) *launchWorld {
	t.Helper()
	arm, err := armemulator.Start(t.Context(), armemulator.Options{SubscriptionIDs: []string{testenv.SubscriptionID},
		OpDelay: 10 * time.Millisecond, VMCreateDelay: vmCreate, Logger: slog.New(slog.DiscardHandler), Network: testenv.Network()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = arm.Close() })
	key, err := azure.GenerateSSHPublicKey("launch-test")
	if err != nil {
		t.Fatal(err)
	}
	creator, err := azure.NewLauncher(azure.Options{SubscriptionID: testenv.SubscriptionID, ResourceGroup: testenv.ResourceGroup,
		Location: testenv.Location, ClusterName: testenv.ClusterName, SubnetID: testenv.SubnetID(), SSHPublicKey: key,
		Endpoint: arm.URL(), CACertPEM: arm.CACertPEM(), Token: arm.Token(),
		Retry: policy.RetryOptions{MaxRetries: -1}, // every 429 and 5xx reaches the reconciler
		Bootstrap: &azure.ClusterBootstrap{APIServerFQDN: "test-dns.hcp.eastus.azmk8s.io", ClusterCAPEM: arm.CACertPEM(),
			KubernetesVersion: "1.33.2", NetworkPlugin: azure.NetworkPluginAzure, NetworkPluginMode: azure.NetworkPluginModeOver,
			NetworkDataplane: azure.NetworkDataplaneCil, DNSServiceIP: azure.DefaultDNSServiceIP},
		BootstrapTokens: azure.StaticToken("test00.0000000000000000")})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse([]byte(testCatalog))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	store := offerings.NewStore(kube, "", "unavailable-"+strings.ReplaceAll(strings.ToLower(t.Name()[strings.LastIndex(t.Name(), "/")+1:]), "_", "-"), clk)
	lc := New(Options{Kube: kube, ClusterName: testenv.ClusterName, Clock: clk, Logger: slog.New(slog.DiscardHandler),
		Launch: &LaunchOptions{Creator: creator, Catalog: cat, Offerings: store}})
	return &launchWorld{kube: kube, arm: arm, lc: lc, clock: clk, store: store, launched: map[string]bool{}}
}

func (w *launchWorld) claim(t *testing.T, name string) *karpv1.NodeClaim {
	t.Helper()
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "np"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: NodeClassGroup, Kind: NodeClassKind, Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "small")},
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		}}
	if err := w.kube.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

// look runs one launch check of name the way a scheduled message would:
// at the time the previous look asked for. It returns that next time
// (zero: none) and the NodeClaim as stored (nil once deleted).
func (w *launchWorld) look(t *testing.T, name string) (time.Time, *karpv1.NodeClaim) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := w.kube.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return time.Time{}, nil
		}
		t.Fatal(err)
	}
	res, err := w.lc.Check(t.Context(), name, string(nc.UID))
	if err != nil {
		t.Fatalf("Check(%s): %v", name, err)
	}
	w.checkOutcome(t, res)
	if err := w.kube.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return res.RequeueAt, nil
		}
		t.Fatal(err)
	}
	return res.RequeueAt, nc
}

// checkOutcome fails the test when a look's outcome lacks the
// continuation its result calls for: the next launch check at RequeueAt,
// the liveness check once launched by this look, a provisioning pass
// after a give-up.
func (w *launchWorld) checkOutcome(t *testing.T, res Result) {
	t.Helper()
	has := func(typ string, due time.Time) bool {
		for _, cont := range res.Outcome.Continuations {
			if cont.Type() == typ && (due.IsZero() || cont.Due().Equal(due)) {
				return true
			}
		}
		return false
	}
	if !res.RequeueAt.IsZero() && !has(messages.TypeNodeClaimLaunch, res.RequeueAt) {
		t.Errorf("the launch asks for a look at %v, but its outcome (%s) holds no launch check then", res.RequeueAt, res.Outcome)
	}
	if res.GaveUp && !has(messages.TypeProvision, time.Time{}) {
		t.Errorf("the launch gave the NodeClaim up, but its outcome (%s) asks for no provisioning pass", res.Outcome)
	}
	if res.Launched && !w.launched[res.NodeClaim] && !has(messages.TypeNodeClaimLiveness, time.Time{}) {
		t.Errorf("the launch wrote Launched, but its outcome (%s) asks for no liveness check", res.Outcome)
	}
	w.launched[res.NodeClaim] = res.Launched
}

// run looks at name until nothing is left to look at, stepping the fake
// clock to each requested time and giving the emulator real time.
func (w *launchWorld) run(t *testing.T, name string, each func(*karpv1.NodeClaim)) *karpv1.NodeClaim {
	t.Helper()
	for range 40 {
		at, nc := w.look(t, name)
		if each != nil && nc != nil {
			each(nc)
		}
		if at.IsZero() {
			stored := &karpv1.NodeClaim{}
			if err := w.kube.Get(t.Context(), client.ObjectKey{Name: name}, stored); err != nil {
				if client.IgnoreNotFound(err) == nil {
					return nil
				}
				t.Fatal(err)
			}
			return stored
		}
		w.clock.SetTime(at)
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("NodeClaim %s: launch still running after 40 looks", name)
	return nil
}

func launchCapacityFailure(t *testing.T, kube client.Client) {
	w := newLaunchWorld(t, kube, 50*time.Millisecond)
	// The cheapest offering (small, eastus-1, spot) fails in the async
	// create, as allocation failures do.
	w.arm.Faults().Add(armemulator.Rule{Operation: armemulator.OpPutVM, Zone: "eastus-1", Code: azure.CodeZonalAllocationFailed, Async: true, Count: 1})
	w.claim(t, "cap")
	nc := w.run(t, "cap", nil)
	if nc == nil || !nc.StatusConditions().Get(karpv1.ConditionTypeLaunched).IsTrue() {
		t.Fatalf("NodeClaim not launched: %+v", nc)
	}
	if z := nc.Labels[corev1.LabelTopologyZone]; z != "eastus-2" {
		t.Errorf("launched in %s; want the next offering, small in eastus-2", z)
	}
	if c := w.arm.Counters(); c.VMCreates != 2 || c.VMDeletes != 1 {
		t.Errorf("%d VM creates, %d deletes; want the failed VM deleted and one more create", c.VMCreates, c.VMDeletes)
	}
	set, err := w.store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e := set.Entries(); len(e) != 1 || e[0].Zone != "eastus-1" || e[0].Reason != azure.CodeZonalAllocationFailed {
		t.Errorf("unavailable offerings %v; want small spot eastus-1 (ZonalAllocationFailed)", e)
	}
	if st := launchStateOf(nc); st == nil || st.Attempt != 2 {
		t.Errorf("launch record %+v; want attempt 2", st)
	}
}

func launchNonCapacityError(t *testing.T, kube client.Client) {
	w := newLaunchWorld(t, kube, 50*time.Millisecond)
	const msg = "The value of parameter imageReference is invalid."
	w.arm.Faults().Add(armemulator.Rule{Operation: armemulator.OpPutVM, Code: "InvalidParameter", Message: msg})
	w.claim(t, "bad")
	var sawFalse bool
	nc := w.run(t, "bad", func(nc *karpv1.NodeClaim) {
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched); c != nil && c.IsFalse() {
			if c.Reason != "InvalidParameter" || !strings.Contains(c.Message, msg) {
				t.Errorf("Launched=False with %q / %q; want reason InvalidParameter and ARM's message", c.Reason, c.Message)
			}
			sawFalse = true
		}
	})
	if nc != nil {
		t.Fatalf("NodeClaim still there after its launch failed %d times: %+v", DefaultMaxLaunchFailures, nc.Status)
	}
	if !sawFalse {
		t.Error("never saw Launched=False")
	}
	if got := w.arm.Counters().Requests[armemulator.OpPutVM]; got != DefaultMaxLaunchFailures {
		t.Errorf("%d VM PUTs; want %d, then the claim given up", got, DefaultMaxLaunchFailures)
	}
	set, err := w.store.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if e := set.Entries(); len(e) != 1 || e[0].InstanceType != "small" || e[0].Reason != "InvalidParameter" {
		t.Errorf("unavailable offerings %v; want the failing offering excluded for InvalidParameter", e)
	}
	var evs corev1.EventList
	if err := w.kube.List(t.Context(), &evs); err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, ev := range evs.Items {
		if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Name == "bad" && strings.Contains(ev.Message, "InvalidParameter") && strings.Contains(ev.Message, msg) {
			warned++
		}
	}
	if warned == 0 {
		t.Error("no Warning event names InvalidParameter and ARM's message")
	}
}

func launchThrottledPoll(t *testing.T, kube client.Client) {
	w := newLaunchWorld(t, kube, time.Hour) // the create never finishes in this test
	w.claim(t, "slow")
	at, _ := w.look(t, "slow") // NIC
	w.clock.SetTime(at)
	time.Sleep(50 * time.Millisecond)
	at, _ = w.look(t, "slow") // VM PUT
	if got := w.arm.Counters().VMCreates; got != 1 {
		t.Fatalf("%d VM creates after two looks; want the create begun", got)
	}
	for _, f := range []armemulator.Rule{
		{Operation: armemulator.OpGetVM, Code: azure.CodeTooManyRequests, RetryAfter: 3 * time.Second},
		{Operation: armemulator.OpGetVM, Code: "InternalServerError", StatusCode: 500},
	} {
		w.arm.Faults().Reset()
		w.arm.Faults().Add(f)
		w.clock.SetTime(at)
		next, nc := w.look(t, "slow")
		if next.IsZero() || nc == nil {
			t.Fatalf("%s on the poll: no next look (%v) or claim gone", f.Code, next)
		}
		if f.RetryAfter > 0 && next.Sub(at) < f.RetryAfter {
			t.Errorf("%s: next look after %s; ARM asked for %s", f.Code, next.Sub(at), f.RetryAfter)
		}
		if c := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched); c != nil && c.IsFalse() {
			t.Errorf("%s on the poll wrote Launched=False (%s)", f.Code, c.Reason)
		}
		at = next
	}
	if c := w.arm.Counters(); c.VMDeletes != 0 || c.NICDeletes != 0 || len(w.arm.VMs()) != 1 {
		t.Errorf("after throttled and failed polls: %d VM deletes, %d NIC deletes, %d VMs; want the creating VM untouched", c.VMDeletes, c.NICDeletes, len(w.arm.VMs()))
	}
}
