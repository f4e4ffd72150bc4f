package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/otlpreceiver"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/nodeimage"
)

// TestLoop runs the whole serverless loop: pending pods -> relay -> bus ->
// Provision function -> ARM -> kwok Node -> relay -> Lifecycle function ->
// Registered/Initialized -> kube-scheduler binds -> pods Running; then
// checks redelivery, bad input and termination on the same environment.
func TestLoop(t *testing.T) {
	// The handler and the relay export their telemetry to a receiver in
	// the test, as they would to an OpenTelemetry Collector.
	otlp := otlpreceiver.Start()
	t.Cleanup(otlp.Close)
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "e2e", BootDelay: 3 * time.Second,
		MaxDeliveryCount: 3, RetryDelay: 200 * time.Millisecond, OTLPEndpoint: otlp.URL()})
	ctx := context.Background()
	kube := env.Kube
	workload := []struct {
		app         string
		replicas    int32
		cpu, memory string
	}{{"small", 12, "250m", "256Mi"}, {"medium", 6, "1", "2Gi"}, {"large", 3, "3", "6Gi"}}
	for _, w := range workload {
		if err := kube.Create(ctx, deployment(w.app, w.replicas, w.cpu, w.memory)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range workload {
		eventually(t, 3*time.Minute, w.app+" running", func() (bool, string) { return allRunning(ctx, kube, w.app, int(w.replicas)) })
	}

	t.Run("every pod runs on a node karpfunc created, and NodeClaim status matches VM and Node", func(t *testing.T) {
		checkFleetConsistent(t, ctx, env)
	})

	t.Run("telemetry: one trace from the relay's publish to the ARM VM create, the metric series and the decisions", func(t *testing.T) {
		checkTelemetry(t, ctx, env, otlp)
	})

	t.Run("the handler and the relay act under the chart's roles, not as cluster admins", func(t *testing.T) {
		checkIdentities(t, ctx, env)
	})

	t.Run("a re-delivered provision message creates no second NodeClaim or VM", func(t *testing.T) {
		before := nodeClaimNames(t, ctx, kube)
		vmPuts := env.ARM.Counters().VMCreates
		var refs []messages.ObjectRef
		for _, w := range workload {
			pods, err := podsWithLabel(ctx, kube, "app", w.app)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				refs = append(refs, messages.ObjectRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)})
			}
		}
		// The same event delivered twice more under new MessageIds (as after
		// the duplicate-detection window), plus once under a repeated id.
		for _, id := range []string{"redelivery-1", "redelivery-2", "redelivery-2"} {
			publishEvent(t, ctx, env, bus.QueueProvision, id, messages.TypeProvision, messages.Provision{Cluster: "e2e", Pods: refs})
		}
		invocations := env.Host.FunctionStats()["Provision"].Succeeded
		waitIdle(t, env)
		if got := env.Host.FunctionStats()["Provision"].Succeeded; got < invocations+2 {
			t.Fatalf("Provision succeeded %d times after the redeliveries, want at least %d: the copies were not processed", got, invocations+2)
		}
		if after := nodeClaimNames(t, ctx, kube); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("NodeClaims changed after redelivery: before %v, after %v", before, after)
		}
		if got := env.ARM.Counters().VMCreates; got != vmPuts {
			t.Errorf("VM creates went from %d to %d after redelivery", vmPuts, got)
		}
	})

	t.Run("pods added while a NodeClaim is in flight use its capacity, not a second claim", func(t *testing.T) {
		// Two 7-vCPU pods get a NodeClaim; while its VM boots, two more
		// arrive and provision events race with the relay's batch. The pass
		// must count the in-flight NodeClaim as capacity for the first two,
		// so the NodeClaims created for these pods never request more than
		// the pods do (a pass that ignored in-flight claims would request
		// the first two pods twice).
		before := map[string]bool{}
		for _, n := range nodeClaimNames(t, ctx, kube) {
			before[n] = true
		}
		newClaims := func() []karpv1.NodeClaim {
			var out []karpv1.NodeClaim
			for _, nc := range nodeClaimList(t, ctx, kube) {
				if !before[nc.Name] {
					out = append(out, nc)
				}
			}
			return out
		}
		vmCreates := env.ARM.Counters().VMCreates
		if err := kube.Create(ctx, deployment("xl", 2, "7", "14Gi")); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "a NodeClaim for the first xl pods", func() (bool, string) {
			return len(newClaims()) > 0, "none yet"
		})
		scale(t, ctx, kube, "xl", 4)
		for i := 0; i < 3; i++ {
			time.Sleep(300 * time.Millisecond)
			publishEvent(t, ctx, env, bus.QueueProvision, fmt.Sprintf("xl-race-%d", i), messages.TypeProvision, messages.Provision{Cluster: "e2e"})
		}
		eventually(t, 3*time.Minute, "xl running", func() (bool, string) { return allRunning(ctx, kube, "xl", 4) })
		waitIdle(t, env)
		requested := resource.Quantity{}
		claims := newClaims()
		for _, nc := range claims {
			requested.Add(nc.Spec.Resources.Requests[corev1.ResourceCPU])
			cpu := nc.Spec.Resources.Requests[corev1.ResourceCPU]
			t.Logf("new NodeClaim %s (%s) requests %s vCPU", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], cpu.String())
		}
		// Only the xl pods that landed on new capacity needed provisioning
		// (kube-scheduler may fit some on existing nodes first).
		newNodes := map[string]bool{}
		for _, nc := range claims {
			newNodes[nc.Status.NodeName] = true
		}
		pods, err := podsWithLabel(ctx, kube, "app", "xl")
		if err != nil {
			t.Fatal(err)
		}
		needed := resource.Quantity{}
		for _, p := range pods {
			if newNodes[p.Spec.NodeName] {
				needed.Add(p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
			}
		}
		if requested.Cmp(needed) > 0 {
			t.Errorf("the %d new NodeClaims request %s vCPU in total for pods on them requesting %s: pods were provisioned twice", len(claims), requested.String(), needed.String())
		}
		if got := env.ARM.Counters().VMCreates - vmCreates; got != len(claims) {
			t.Errorf("%d VMs created for %d new NodeClaims", got, len(claims))
		}
		checkFleetConsistent(t, ctx, env)
	})

	t.Run("a scale-up racing extra provision events leaves a consistent fleet", func(t *testing.T) {
		// Three more provision events race with the relay's own batch for
		// the same pods; every NodeClaim must end up with pods on it.
		scale(t, ctx, kube, "medium", 14)
		for i := 0; i < 3; i++ {
			publishEvent(t, ctx, env, bus.QueueProvision, fmt.Sprintf("race-%d", i), messages.TypeProvision, messages.Provision{Cluster: "e2e"})
		}
		eventually(t, 3*time.Minute, "medium running", func() (bool, string) { return allRunning(ctx, kube, "medium", 14) })
		waitIdle(t, env)
		checkFleetConsistent(t, ctx, env)
	})

	t.Run("malformed and unknown messages are dead-lettered, their reason in the handler's log", func(t *testing.T) {
		cases := []struct {
			queue, id, session string
			body               string
			wantReason         string
		}{
			{bus.QueueProvision, "garbage", "e2e", "this is not json", "not a JSON CloudEvent"},
			{bus.QueueProvision, "wrong-type", "e2e", mustEvent(t, "wrong-type", messages.TypeNode, messages.Node{Cluster: "e2e", Name: "x"}), "handles only " + messages.TypeProvision},
			{bus.QueueLifecycle, "unknown-type", "", mustEvent(t, "unknown-type", "com.example.unknown", map[string]string{"a": "b"}), "unknown type"},
			{bus.QueueLifecycle, "bad-data", "", mustEvent(t, "bad-data", messages.TypeNode, map[string]any{"cluster": "e2e", "nodeName": 3}), `required field "name"`},
		}
		for _, c := range cases {
			if err := env.Host.Publish(ctx, c.queue, bus.Message{ID: c.id, SessionID: c.session, ContentType: messages.ContentType, Body: []byte(c.body)}); err != nil {
				t.Fatal(err)
			}
		}
		waitIdle(t, env)
		for _, c := range cases {
			dls, err := env.Host.DeadLetters(c.queue)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, dl := range dls {
				if dl.ID != c.id {
					continue
				}
				found = true
				// What Service Bus writes, not the handler's error.
				want := fmt.Sprintf("Message could not be consumed after %d delivery attempts.", dl.DeliveryCount)
				if dl.DeadLetterReason != "MaxDeliveryCountExceeded" || dl.DeadLetterErrorDescription != want {
					t.Errorf("%s: dead-lettered with %q / %q; want MaxDeliveryCountExceeded / %q", c.id, dl.DeadLetterReason, dl.DeadLetterErrorDescription, want)
				}
			}
			if !found {
				t.Errorf("%s: not in the %s dead-letter queue", c.id, c.queue)
			}
		}
		// The reason is where Azure users look: the handler's stderr
		// (traces in Application Insights), next to the host's failed
		// invocation with its 400; the host drops the answer's Logs.
		logged, err := os.ReadFile(env.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			if !failedWithReason(logged, http.StatusBadRequest, regexp.MustCompile(regexp.QuoteMeta(c.wantReason))) {
				t.Errorf("%s: the log has no invocation failed with 400 whose handler stderr mentions %q", c.id, c.wantReason)
			}
		}
	})

	t.Run("a NodePool with a missing AKSNodeClass leaves its pods pending with an event that says so", func(t *testing.T) {
		np := &karpv1.NodePool{}
		np.Name = "orphan"
		np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1beta1.Group, Kind: "AKSNodeClass", Name: "missing"}
		np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
		if err := kube.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
		d := deployment("orphaned", 1, "100m", "64Mi")
		d.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "orphan"}
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "FailedScheduling event naming the missing AKSNodeClass", func() (bool, string) {
			pods, err := podsWithLabel(ctx, kube, "app", "orphaned")
			if err != nil || len(pods) != 1 {
				return false, fmt.Sprintf("pods: %d, %v", len(pods), err)
			}
			var evs corev1.EventList
			if err := kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.UID == pods[0].UID && e.Reason == "FailedScheduling" && e.Source.Component == "karpfunc" &&
					strings.Contains(e.Message, "NodePool orphan is not ready") && strings.Contains(e.Message, "AKSNodeClass missing not found") {
					return pods[0].Spec.NodeName == "", "pod was bound"
				}
			}
			return false, "no karpfunc FailedScheduling event on the pod yet"
		})
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if nc.Labels[karpv1.NodePoolLabelKey] == "orphan" {
				t.Errorf("NodeClaim %s created for the orphan NodePool", nc.Name)
			}
		}
	})

	t.Run("deleting NodeClaims drains, deletes VMs, NICs and Nodes, and releases the finalizer", func(t *testing.T) {
		for _, app := range []string{"small", "medium", "large", "xl", "orphaned"} {
			scale(t, ctx, kube, app, 0)
		}
		ncs := nodeClaimList(t, ctx, kube)
		if len(ncs) == 0 {
			t.Fatal("no NodeClaims to delete")
		}
		// The first VM delete ARM refuses once: the Lifecycle invocation
		// fails, and its reason is an event on the NodeClaim (the dead
		// letter would not carry it); the redelivery then succeeds.
		failing := ncs[0].Name
		env.ARM.Faults().Add(armemulator.Rule{Operation: armemulator.OpDeleteVM, Name: failing, Code: "AuthorizationFailed", StatusCode: 403,
			Message: "The client does not have authorization to perform action 'Microsoft.Compute/virtualMachines/delete'.", Count: 1})
		for _, nc := range ncs {
			if err := kube.Delete(ctx, &nc); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, time.Minute, "a HandlerFailed event on NodeClaim "+failing, func() (bool, string) {
			var evs corev1.EventList
			if err := kube.List(ctx, &evs); err != nil {
				return false, err.Error()
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Kind == "NodeClaim" && e.InvolvedObject.Name == failing && e.Reason == "HandlerFailed" &&
					e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "karpfunc Lifecycle failed") && strings.Contains(e.Message, "AuthorizationFailed") {
					return true, ""
				}
			}
			return false, "no HandlerFailed event yet"
		})
		eventually(t, 2*time.Minute, "everything collected", func() (bool, string) {
			ncs, nodes := nodeClaimList(t, ctx, kube), &corev1.NodeList{}
			if err := kube.List(ctx, nodes); err != nil {
				return false, err.Error()
			}
			vms, nics := env.ARM.VMs(), env.ARM.NICs()
			return len(ncs) == 0 && len(nodes.Items) == 0 && len(vms) == 0 && len(nics) == 0,
				fmt.Sprintf("%d NodeClaims, %d Nodes, %d VMs, %d NICs left", len(ncs), len(nodes.Items), len(vms), len(nics))
		})
	})
}

// checkFleetConsistent asserts the invariants between pods, Nodes,
// NodeClaims and VMs.
func checkFleetConsistent(t *testing.T, ctx context.Context, env *localenv.Env) {
	t.Helper()
	kube := env.Kube
	ncs := nodeClaimList(t, ctx, kube)
	byProvider := map[string]karpv1.NodeClaim{}
	for _, nc := range ncs {
		byProvider[strings.ToLower(nc.Status.ProviderID)] = nc
	}
	vms := map[string]*armcompute.VirtualMachine{}
	for _, vm := range env.ARM.VMs() {
		vms[*vm.Name] = vm
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	nodeByName := map[string]corev1.Node{}
	for _, n := range nodes.Items {
		nodeByName[n.Name] = n
	}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	podsPerNode := map[string]int{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			continue
		}
		podsPerNode[p.Spec.NodeName]++
		node, ok := nodeByName[p.Spec.NodeName]
		if !ok {
			t.Errorf("pod %s is bound to node %s, which does not exist", p.Name, p.Spec.NodeName)
			continue
		}
		if _, ok := byProvider[strings.ToLower(node.Spec.ProviderID)]; !ok {
			t.Errorf("pod %s runs on node %s (providerID %q), which no NodeClaim launched", p.Name, node.Name, node.Spec.ProviderID)
		}
	}
	if len(vms) != len(ncs) || len(nodes.Items) != len(ncs) {
		t.Errorf("%d NodeClaims, %d VMs, %d Nodes; want equal counts", len(ncs), len(vms), len(nodes.Items))
	}
	for _, nc := range ncs {
		for _, cond := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
			if !nc.StatusConditions().Get(cond).IsTrue() {
				t.Errorf("NodeClaim %s: condition %s is not True", nc.Name, cond)
			}
		}
		vm, ok := vms[nc.Name]
		if !ok {
			t.Errorf("NodeClaim %s has no VM", nc.Name)
			continue
		}
		if got, want := string(*vm.Properties.HardwareProfile.VMSize), nc.Labels[corev1.LabelInstanceTypeStable]; got != want {
			t.Errorf("NodeClaim %s: VM size %s, NodeClaim instance-type label %s", nc.Name, got, want)
		}
		if len(vm.Zones) != 1 || env.Options.Region+"-"+*vm.Zones[0] != nc.Labels[corev1.LabelTopologyZone] {
			t.Errorf("NodeClaim %s: VM zones %v, NodeClaim zone %s", nc.Name, vm.Zones, nc.Labels[corev1.LabelTopologyZone])
		}
		// The node image is the one for the size's architecture and
		// generation, and status.imageID says which VM image booted.
		if it, ok := env.Catalog.Get(*(*string)(vm.Properties.HardwareProfile.VMSize)); ok {
			want, err := nodeimage.Select(nodeimage.Want{Family: nodeimage.FamilyUbuntu, Architecture: it.Architecture,
				Generations: it.HyperVGenerations, KubernetesVersion: serverVersion(t, env)}, nodeimage.ExampleVersion)
			if got := *vm.Properties.StorageProfile.ImageReference.CommunityGalleryImageID; err != nil || got != want.ID() || nc.Status.ImageID != got {
				t.Errorf("NodeClaim %s (%s, %s, %v): VM image %s, status.imageID %s; want %s (%v)", nc.Name, it.Name, it.Architecture, it.HyperVGenerations, got, nc.Status.ImageID, want.ID(), err)
			}
		}
		if lc := vm.Properties.OSProfile.LinuxConfiguration; lc == nil || !*lc.DisablePasswordAuthentication || lc.SSH == nil || len(lc.SSH.PublicKeys) != 1 {
			t.Errorf("NodeClaim %s: VM allows password login or has no SSH key", nc.Name)
		}
		if !strings.EqualFold(*vm.ID, strings.TrimPrefix(nc.Status.ProviderID, "azure://")) {
			t.Errorf("NodeClaim %s: providerID %s does not name VM %s", nc.Name, nc.Status.ProviderID, *vm.ID)
		}
		node, ok := nodeByName[nc.Status.NodeName]
		if !ok {
			t.Errorf("NodeClaim %s: status.nodeName %q is not a node", nc.Name, nc.Status.NodeName)
			continue
		}
		if node.Spec.ProviderID != nc.Status.ProviderID {
			t.Errorf("NodeClaim %s: node %s providerID %s, NodeClaim %s", nc.Name, node.Name, node.Spec.ProviderID, nc.Status.ProviderID)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			nq, cq := node.Status.Capacity[r], nc.Status.Capacity[r]
			if nq.Cmp(cq) != 0 {
				t.Errorf("NodeClaim %s: capacity %s is %s on the NodeClaim and %s on node %s", nc.Name, r, cq.String(), nq.String(), node.Name)
			}
			na, ca := node.Status.Allocatable[r], nc.Status.Allocatable[r]
			if na.Cmp(ca) != 0 {
				t.Errorf("NodeClaim %s: allocatable %s is %s on the NodeClaim and %s on node %s", nc.Name, r, ca.String(), na.String(), node.Name)
			}
		}
		for _, key := range []string{karpv1.NodePoolLabelKey, karpv1.NodeRegisteredLabelKey, karpv1.NodeInitializedLabelKey, corev1.LabelInstanceTypeStable, karpv1.CapacityTypeLabelKey} {
			if node.Labels[key] == "" {
				t.Errorf("node %s lacks label %s", node.Name, key)
			}
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == karpv1.UnregisteredTaintKey {
				t.Errorf("node %s still has the unregistered taint", node.Name)
			}
		}
		if podsPerNode[node.Name] == 0 {
			t.Errorf("NodeClaim %s (node %s) runs no pods: a claim was created for nothing", nc.Name, node.Name)
		}
	}
}

func nodeClaimList(t *testing.T, ctx context.Context, kube client.Client) []karpv1.NodeClaim {
	t.Helper()
	var list karpv1.NodeClaimList
	if err := kube.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitNoClaimDeleting waits until no NodeClaim is being deleted: what an
// earlier step started (a drain, a finalizer) is over.
func waitNoClaimDeleting(t *testing.T, ctx context.Context, kube client.Client, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "no NodeClaim deleting", func() (bool, string) {
		deleting := deletingClaims(t, ctx, kube, "")
		return len(deleting) == 0, strings.Join(deleting, ", ") + " deleting"
	})
}

func nodeClaimNames(t *testing.T, ctx context.Context, kube client.Client) []string {
	var names []string
	for _, nc := range nodeClaimList(t, ctx, kube) {
		names = append(names, nc.Name)
	}
	return names
}

func scale(t *testing.T, ctx context.Context, kube client.Client, name string, replicas int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	obj := deployment(name, 0, "1", "1")
	if err := kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}

func mustEvent(t *testing.T, id, typ string, data any) string {
	t.Helper()
	ev, err := messages.New(id, "/tests", typ, "", time.Now(), data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func publishEvent(t *testing.T, ctx context.Context, env *localenv.Env, queue, id, typ string, data any) {
	t.Helper()
	session := ""
	if queue == bus.QueueProvision {
		session = "e2e"
	}
	if err := env.Host.Publish(ctx, queue, bus.Message{ID: id, SessionID: session, ContentType: messages.ContentType,
		Body: []byte(mustEvent(t, id, typ, data))}); err != nil {
		t.Fatal(err)
	}
}

func waitIdle(t *testing.T, env *localenv.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Host.WaitIdle(ctx); err != nil {
		t.Fatalf("waiting for the Functions host to go idle: %v (stats %v)", err, env.Host.Stats())
	}
}
