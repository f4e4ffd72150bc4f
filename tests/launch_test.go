package tests

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/funchost"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/bus"
)

// TestLongLaunch: VM creates take longer than the Functions host's
// functionTimeout. A Provision pass only begins them and returns; scheduled
// launch checks see them through. Everything converges with no invocation
// timing out and no message delivered twice.
func TestLongLaunch(t *testing.T) {
	const (
		vmCreate            = 20 * time.Second
		functionTimeout     = 8 * time.Second
		launchCheckInterval = 2 * time.Second
	)
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "long", VMCreateDelay: vmCreate, BootDelay: time.Second,
		MaxDeliveryCount: 3, RetryDelay: 200 * time.Millisecond,
		HostSettings: map[string]string{
			funchost.FunctionTimeoutSetting:  "00:00:08",
			"KARPFUNC_LAUNCH_CHECK_INTERVAL": launchCheckInterval.String(),
		}})
	ctx := context.Background()
	kube := env.Kube
	// Nodes of at most 4 vCPUs: three 3-vCPU pods need three VMs.
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == "karpenter.azure.com/sku-cpu" {
			np.Spec.Template.Spec.Requirements[i].Values = []string{"5"}
		}
	}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := kube.Create(ctx, deployment("slow", 3, "3", "4Gi")); err != nil {
		t.Fatal(err)
	}

	// While the creates run, no Provision invocation is: the pass began
	// them and returned.
	// The creates run side by side: at some instant all three VMs are
	// Creating (launches one after another never have two).
	sawBegunIdle, mostCreating := "", 0
	eventually(t, 85*time.Second, "slow running", func() (bool, string) {
		creating := 0
		for _, vm := range env.ARM.VMs() {
			if vm.Properties != nil && vm.Properties.ProvisioningState != nil && *vm.Properties.ProvisioningState == "Creating" {
				creating++
				if sawBegunIdle == "" && env.Host.Stats()[bus.QueueProvision].InFlight == 0 {
					sawBegunIdle = *vm.Name
				}
			}
		}
		mostCreating = max(mostCreating, creating)
		return allRunning(ctx, kube, "slow", 3)
	})
	converged := time.Since(start)
	waitIdle(t, env)

	if sawBegunIdle == "" {
		t.Error("never saw a VM creating while no Provision invocation ran: the pass waited for the creates")
	}
	claims := nodeClaimList(t, ctx, kube)
	if len(claims) < 3 {
		t.Fatalf("%d NodeClaims for three pods that each need their own VM", len(claims))
	}
	if mostCreating < 3 {
		t.Errorf("at most %d VMs were creating at once; want the three creates side by side", mostCreating)
	}
	var firstCreated, lastLaunched time.Time
	for _, nc := range claims {
		launched := nc.StatusConditions().Get(karpv1.ConditionTypeLaunched)
		if launched == nil || !launched.IsTrue() {
			t.Errorf("NodeClaim %s: Launched is %v", nc.Name, launched)
			continue
		}
		// The create outlasted the timeout an invocation waiting for it
		// would have hit.
		if took := launched.LastTransitionTime.Sub(nc.CreationTimestamp.Time); took < functionTimeout {
			t.Errorf("NodeClaim %s launched %s after it was created; the emulator's creates take %s", nc.Name, took, vmCreate)
		}
		if firstCreated.IsZero() || nc.CreationTimestamp.Before(&metav1.Time{Time: firstCreated}) {
			firstCreated = nc.CreationTimestamp.Time
		}
		if launched.LastTransitionTime.After(lastLaunched) {
			lastLaunched = launched.LastTransitionTime.Time
		}
		var st struct {
			InstanceType string `json:"instanceType"`
			Attempt      int    `json:"attempt"`
		}
		if err := json.Unmarshal([]byte(nc.Annotations[apis.AnnotationLaunch]), &st); err != nil || st.InstanceType != nc.Labels[corev1.LabelInstanceTypeStable] || st.Attempt != 1 {
			t.Errorf("NodeClaim %s: launch record %q (%v) does not name its instance type %s as the first attempt", nc.Name,
				nc.Annotations[apis.AnnotationLaunch], err, nc.Labels[corev1.LabelInstanceTypeStable])
		}
	}
	if puts, n := env.ARM.Counters().Requests[armemulator.OpPutVM], len(claims); puts != n {
		t.Errorf("%d VM PUTs for %d NodeClaims: a create was sent twice", puts, n)
	}
	for _, q := range []string{bus.QueueProvision, bus.QueueLifecycle} {
		s := env.Host.Stats()[q]
		if s.Abandoned != 0 || s.DeadLettered != 0 || s.Delivered != s.Completed {
			t.Errorf("queue %s: %d delivered, %d completed, %d abandoned, %d dead-lettered; want every delivery completed the first time",
				q, s.Delivered, s.Completed, s.Abandoned, s.DeadLettered)
		}
	}
	for name, fs := range env.Host.FunctionStats() {
		if fs.Failed != 0 {
			t.Errorf("function %s failed %d of %d invocations", name, fs.Failed, fs.Invocations)
		}
	}
	// A launch costs the launch checks of its backoff, no more: one that
	// creates the NIC, one that begins the VM create, then one at 1, 3, 7,
	// 11, ... check intervals after the create began until it is done. A
	// loaded machine can finish the create just after a check, which costs
	// one more at the capped interval; checks every interval (no backoff)
	// or a second chain of checks per claim go over.
	checks := launchChecksLogged(t, env.LogPath)
	vmChecks := 0
	for at := time.Duration(0); at < vmCreate; vmChecks++ {
		at += launchCheckInterval << min(vmChecks, 2)
	}
	want := 2 + vmChecks + 1
	total := 0
	for _, nc := range claims {
		total += checks[nc.Name]
		if checks[nc.Name] == 0 || checks[nc.Name] > want {
			t.Errorf("NodeClaim %s: %d launch checks; want 1 to %d for a %s create with a %s check interval", nc.Name, checks[nc.Name], want, vmCreate, launchCheckInterval)
		}
	}
	lc := env.Host.Stats()[bus.QueueLifecycle]
	t.Logf("VM creates of %s (functionTimeout %s): %d NodeClaims, at most %d creating at once, first created to last Launched %s (1 s resolution), all pods running %s after the Deployment; launch checks %d (%v); provision deliveries %d, lifecycle deliveries %d (launch checks, nodes)",
		vmCreate, functionTimeout, len(claims), mostCreating, lastLaunched.Sub(firstCreated), converged.Round(100*time.Millisecond),
		total, checks, env.Host.Stats()[bus.QueueProvision].Delivered, lc.Delivered)
}

// launchChecksLogged counts the Lifecycle launch checks per NodeClaim in
// the process log.
func launchChecksLogged(t *testing.T, path string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		// Each check once: the handler's stderr line, not the host's copy
		// of a successful invocation's Logs (Function.Lifecycle.User).
		if !strings.HasPrefix(line, "handler: [") {
			continue
		}
		_, rest, ok := strings.Cut(line, "nodeclaim ")
		if !ok {
			continue
		}
		if name, tail, ok := strings.Cut(rest, " launch check: "); ok && strings.HasPrefix(tail, "launched=") {
			n[name]++
		}
	}
	return n
}
