package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/bus"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
)

// testNotice is the spot notice in these tests: shorter than Azure's 30 s
// so the suite stays quick; one eviction runs with the full 30 s.
const testNotice = 12 * time.Second

// TestInterruption evicts spot VMs through the ARM emulator, which plays
// Azure's sequence (node condition, notice, VM and Node gone, Event Grid
// message), and checks that karpfunc replaces first and drains inside the
// notice, collapses duplicate signals, and cleans up at once when only
// Event Grid's after-the-fact signal arrives.
func TestInterruption(t *testing.T) {
	env := startEnvWithNodePool(t, localenv.Options{ClusterName: "intr", BootDelay: time.Second, EvictionNotice: testNotice,
		MaxDeliveryCount: 3, RetryDelay: 200 * time.Millisecond, BatchIdle: 300 * time.Millisecond, BatchMax: 2 * time.Second})
	ctx := context.Background()
	kube := env.Kube
	// Spot only, 2-vCPU sizes: two 800m pods fill a node, so a replacement
	// is always a new NodeClaim.
	pinGeneralPool(t, kube, karpv1.CapacityTypeSpot, "2")
	const replicas = 4
	web := deployment("web", replicas, "800m", "256Mi")
	web.Spec.Template.Spec.TerminationGracePeriodSeconds = ptrTo(int64(10))
	if err := kube.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "web running", func() (bool, string) { return allRunning(ctx, kube, "web", replicas) })

	var toReplacement, toRunning []time.Duration
	t.Run("notice: replacement first, every pod evicted inside the notice, all running on the replacement", func(t *testing.T) {
		for i := range 5 {
			notice := testNotice
			if i == 0 {
				notice = 30 * time.Second // Azure's notice, once
			}
			ev := evictOne(t, ctx, env, armemulator.EvictOptions{Notice: notice})
			toReplacement = append(toReplacement, ev.replacementAfter)
			toRunning = append(toRunning, ev.runningAfter)
			t.Logf("eviction %d (notice %s) of %s with %d pods: replacement NodeClaim %s after %s, last pod evicted after %s, all running after %s",
				i, notice, ev.victim, len(ev.pods), ev.replacement, ms(ev.replacementAfter), ms(ev.drainedAfter), ms(ev.runningAfter))
			if ev.drainedAfter >= notice {
				t.Errorf("the last pod of %s left %s after the notice; the VM dies at %s", ev.victim, ms(ev.drainedAfter), notice)
			}
			for pod, n := range ev.evictions {
				if n != 1 {
					t.Errorf("pod %s was evicted %d times; want exactly once (through the Eviction API)", pod, n)
				}
			}
		}
		t.Logf("INTERRUPTION notice -> replacement NodeClaim: p50 %s, p95 %s over %d evictions (%v)", ms(percentile(toReplacement, 50)),
			ms(percentile(toReplacement, 95)), len(toReplacement), toReplacement)
		t.Logf("INTERRUPTION notice -> all pods running on replacements: p50 %s, max %s (%v)", ms(percentile(toRunning, 50)),
			ms(percentile(toRunning, 100)), toRunning)
	})

	t.Run("duplicate signals: one replacement, one drain", func(t *testing.T) {
		before := map[string]bool{}
		for _, n := range nodeClaimNames(t, ctx, kube) {
			before[n] = true
		}
		victim, node, pods := victimWithPods(t, ctx, kube)
		vmID := azure.VMResourceID(localenv.SubscriptionID, localenv.ResourceGroup, victim)
		if err := env.ARM.Evict(victim); err != nil {
			t.Fatal(err)
		}
		// The relay's notice delivered again (a redelivery after the
		// duplicate-detection window), and Event Grid's annotation in both
		// schemas, twice each, once the VM is gone.
		eventually(t, 30*time.Second, "the node's preemption notice", func() (bool, string) {
			n := &corev1.Node{}
			if err := kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
				return client.IgnoreNotFound(err) == nil, err.Error()
			}
			for _, c := range n.Status.Conditions {
				if c.Type == "PreemptionScheduled" && c.Status == corev1.ConditionTrue {
					for i := range 2 {
						publishEvent(t, ctx, env, bus.QueueInterruption, fmt.Sprintf("dup-%s-%d", node, i), messages.TypeInterruption,
							messages.Interruption{Cluster: "intr", Node: node, ProviderID: n.Spec.ProviderID, Reason: c.Reason, Message: c.Message})
					}
					return true, ""
				}
			}
			return false, "no PreemptionScheduled condition yet"
		})
		eventually(t, time.Minute, "the VM gone", func() (bool, string) { return !vmExists(env, victim), "VM " + victim + " still exists" })
		for _, schema := range []string{armemulator.SchemaEventGrid, armemulator.SchemaCloudEvents} {
			for i := range 2 {
				m, err := armemulator.PreemptedMessage(armemulator.EventGrid{Schema: schema}, fmt.Sprintf("00000000-0000-0000-0000-%012d", i), vmID, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if err := env.Host.Publish(ctx, bus.QueueInterruption, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		eventually(t, time.Minute, "web running", func() (bool, string) { return allRunning(ctx, kube, "web", replicas) })
		waitIdle(t, env)
		var created []string
		for _, n := range nodeClaimNames(t, ctx, kube) {
			if !before[n] {
				created = append(created, n)
			}
		}
		if len(created) != 1 {
			t.Errorf("NodeClaims created after the duplicate signals: %v; want exactly one replacement", created)
		}
		if n := eventsFor(t, ctx, kube, "NodeClaim", victim, lifecycle.ReasonSpotInterrupted); n != 1 {
			t.Errorf("%d SpotInterrupted events on NodeClaim %s; want 1 (one interruption, however many signals)", n, victim)
		}
		for _, p := range pods {
			if n := eventsFor(t, ctx, kube, "Pod", p, "Evicted"); n != 1 {
				t.Errorf("pod %s evicted %d times; want one drain", p, n)
			}
		}
		if s := env.Host.FunctionStats()["Interruption"]; s.Succeeded < 7 {
			t.Errorf("Interruption succeeded %d times; want at least 7 (notice, 2 redeliveries, 4 Event Grid copies)", s.Succeeded)
		}
	})

	t.Run("reactive only: Event Grid after the fact replaces capacity and cleans up at once", func(t *testing.T) {
		before := map[string]bool{}
		for _, n := range nodeClaimNames(t, ctx, kube) {
			before[n] = true
		}
		victim, node, _ := victimWithPods(t, ctx, kube)
		if err := env.ARM.EvictWith(victim, armemulator.EvictOptions{Notice: -1, NoNodeCondition: true, Schema: armemulator.SchemaCloudEvents}); err != nil {
			t.Fatal(err)
		}
		// The emulator delivers the message right after the Node is gone.
		eventually(t, 30*time.Second, "the node gone", func() (bool, string) {
			err := kube.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
			return err != nil && client.IgnoreNotFound(err) == nil, "node " + node + " still exists"
		})
		gone := time.Now()
		var cleaned time.Duration
		eventually(t, 30*time.Second, "capacity replaced and objects cleaned", func() (bool, string) {
			var created []string
			for _, n := range nodeClaimNames(t, ctx, kube) {
				if !before[n] {
					created = append(created, n)
				}
			}
			if len(created) == 0 {
				return false, "no replacement NodeClaim yet"
			}
			if err := kube.Get(ctx, client.ObjectKey{Name: victim}, &karpv1.NodeClaim{}); client.IgnoreNotFound(err) == nil && err == nil {
				return false, "NodeClaim " + victim + " still exists"
			}
			var pods corev1.PodList
			if err := kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
				return false, err.Error()
			}
			if len(pods.Items) > 0 {
				return false, fmt.Sprintf("%d pods still bound to vanished node %s", len(pods.Items), node)
			}
			cleaned = time.Since(gone)
			return true, ""
		})
		t.Logf("INTERRUPTION reactive only (no node condition, Event Grid CloudEvent after the fact): replacement created, NodeClaim and pods of %s cleaned %s after the Node vanished", victim, ms(cleaned))
		eventually(t, time.Minute, "web running", func() (bool, string) { return allRunning(ctx, kube, "web", replicas) })
	})

	t.Run("bad input is logged and acknowledged or dead-lettered, never drains a node", func(t *testing.T) {
		// The earlier cases' victims finish draining first (CI run of
		// af7599b: the duplicate case's NodeClaim was still deleting when
		// this case listed the claims, and went away meanwhile).
		waitNoClaimDeleting(t, ctx, kube, time.Minute)
		claims := strings.Join(nodeClaimNames(t, ctx, kube), ",")
		notOurs, err := armemulator.PreemptedMessage(armemulator.EventGrid{}, "11111111-0000-0000-0000-000000000000",
			azure.VMResourceID(localenv.SubscriptionID, "someone-elses-rg", "their-vm"), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []bus.Message{notOurs,
			{ID: "malformed", Body: []byte(`{"eventType": "Microsoft.ResourceNotifications.HealthResources.ResourceAnnotated", "data": {`),
				ApplicationProperties: map[string]any{"aeg-event-type": "Notification"}},
		} {
			if err := env.Host.Publish(ctx, bus.QueueInterruption, m); err != nil {
				t.Fatal(err)
			}
		}
		waitIdle(t, env)
		dls, err := env.Host.DeadLetters(bus.QueueInterruption)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, dl := range dls {
			ids = append(ids, dl.ID)
			// Service Bus writes its own reason; the handler's is in the log.
			if dl.ID == "malformed" && dl.DeadLetterReason != "MaxDeliveryCountExceeded" {
				t.Errorf("dead-letter reason of the malformed message: %q / %q; want Service Bus's MaxDeliveryCountExceeded", dl.DeadLetterReason, dl.DeadLetterErrorDescription)
			}
		}
		if logData, err := os.ReadFile(env.LogPath); err != nil {
			t.Fatal(err)
		} else if !failedWithReason(logData, http.StatusBadRequest, regexp.MustCompile(`JSON`)) {
			t.Errorf("the log does not say why the malformed message failed (no Interruption invocation failed with 400 whose handler stderr names JSON)")
		}
		if strings.Join(ids, ",") != "malformed" {
			t.Errorf("interruption dead-letter queue holds %v; want only the malformed message", ids)
		}
		if got := strings.Join(nodeClaimNames(t, ctx, kube), ","); got != claims {
			t.Errorf("NodeClaims changed after bad input: %s -> %s", claims, got)
		}
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if nc.DeletionTimestamp != nil {
				t.Errorf("NodeClaim %s is being deleted after bad input", nc.Name)
			}
		}
	})
}

type evictionFigures struct {
	victim, replacement                          string
	pods                                         []string
	replacementAfter, drainedAfter, runningAfter time.Duration
	evictions                                    map[string]int
}

// evictOne evicts one spot VM that runs web pods and measures, from the
// eviction: the first new NodeClaim, the last original pod leaving (evicted
// or gone), and every web pod running again.
func evictOne(t *testing.T, ctx context.Context, env *localenv.Env, opts armemulator.EvictOptions) evictionFigures {
	t.Helper()
	kube := env.Kube
	before := map[string]bool{}
	for _, n := range nodeClaimNames(t, ctx, kube) {
		before[n] = true
	}
	victim, _, pods := victimWithPods(t, ctx, kube)
	f := evictionFigures{victim: victim, pods: pods}
	start := time.Now()
	if err := env.ARM.EvictWith(victim, opts); err != nil {
		t.Fatal(err)
	}
	for f.replacement == "" || f.drainedAfter == 0 {
		if time.Since(start) > time.Minute {
			t.Fatalf("eviction of %s: replacement %q, drained after %s; not done after a minute", victim, f.replacement, f.drainedAfter)
		}
		if f.replacement == "" {
			for _, n := range nodeClaimNames(t, ctx, kube) {
				if !before[n] {
					f.replacement, f.replacementAfter = n, time.Since(start)
				}
			}
		}
		if f.drainedAfter == 0 {
			left := 0
			for _, p := range pods {
				cur := &corev1.Pod{}
				if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: p}, cur); err == nil && cur.DeletionTimestamp == nil {
					left++
				}
			}
			if left == 0 {
				f.drainedAfter = time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	eventually(t, time.Minute, "web running", func() (bool, string) {
		return allRunning(ctx, kube, "web", int(*deploymentReplicas(t, ctx, kube, "web")))
	})
	f.runningAfter = time.Since(start)
	f.evictions = map[string]int{}
	for _, p := range pods {
		f.evictions[p] = eventsFor(t, ctx, kube, "Pod", p, "Evicted")
	}
	waitIdle(t, env)
	return f
}

// victimWithPods picks an initialized spot NodeClaim whose node runs web
// pods: its name, its node, and those pods' names.
func victimWithPods(t *testing.T, ctx context.Context, kube client.Client) (string, string, []string) {
	t.Helper()
	var victim, node string
	var names []string
	eventually(t, time.Minute, "a spot NodeClaim running web pods", func() (bool, string) {
		pods, err := podsWithLabel(ctx, kube, "app", "web")
		if err != nil {
			return false, err.Error()
		}
		byNode := map[string][]string{}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p.Name)
			}
		}
		for _, nc := range nodeClaimList(t, ctx, kube) {
			if nc.DeletionTimestamp == nil && nc.Labels[karpv1.CapacityTypeLabelKey] == karpv1.CapacityTypeSpot &&
				nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() && len(byNode[nc.Status.NodeName]) > 0 {
				victim, node, names = nc.Name, nc.Status.NodeName, byNode[nc.Status.NodeName]
				return true, ""
			}
		}
		return false, "none"
	})
	return victim, node, names
}

func vmExists(env *localenv.Env, name string) bool {
	for _, vm := range env.ARM.VMs() {
		if strings.EqualFold(*vm.Name, name) {
			return true
		}
	}
	return false
}

func deploymentReplicas(t *testing.T, ctx context.Context, kube client.Client, name string) *int32 {
	t.Helper()
	d := deployment(name, 0, "1", "1")
	if err := kube.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Replicas
}

// eventsFor counts the Kubernetes events with reason on the object of kind
// and name.
func eventsFor(t *testing.T, ctx context.Context, kube client.Client, kind, name, reason string) int {
	t.Helper()
	n, err := testfixtures.CountEvents(ctx, kube, testfixtures.EventFilter{Kind: kind, Name: name, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s) + 99) / 100 // nearest rank
	return s[min(max(i-1, 0), len(s)-1)]
}

func ms(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
