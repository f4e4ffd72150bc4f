package tests

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/testfixtures"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// pdbWatch records, every 100 ms, how many pods of app are Running and not
// terminating, from the moment all want of them first were; the minimum is
// what the drains left standing.
type pdbWatch struct {
	mu      sync.Mutex
	armed   bool
	min     int
	samples int
	stop    chan struct{}
	done    chan struct{}
}

func watchAvailable(ctx context.Context, kube client.Client, app string, want int) *pdbWatch {
	w := &pdbWatch{min: want, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			pods, err := podsWithLabel(ctx, kube, "app", app)
			if err != nil {
				continue
			}
			up := 0
			for _, p := range pods {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					up++
				}
			}
			w.mu.Lock()
			if up >= want {
				w.armed = true
			}
			if w.armed {
				w.samples++
				w.min = min(w.min, up)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *pdbWatch) result() (armed bool, minimum, samples int) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.armed, w.min, w.samples
}

// neverJoins picks about one VM in ten, by name and seed, whose kubelet
// never registers.
func neverJoins(seed int64) func(string) bool {
	// Each VM name fails to join at most once. NodeClaim names are derived
	// from their pods, so the replacement for a NodeClaim that never joined
	// reuses its name; failing every launch of a name would strand that
	// pod for as long as the faults last, which models no real fault (a
	// bootstrap failure does not follow a name around).
	var mu sync.Mutex
	failed := map[string]bool{}
	return func(name string) bool {
		h := fnv.New32a()
		fmt.Fprintf(h, "%d/%s", seed, name)
		if h.Sum32()%10 != 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if failed[name] {
			return false
		}
		failed[name] = true
		return true
	}
}

// fleetReport compares VMs, NICs and NodeClaims; an empty slice means
// consistent: every VM belongs to a live NodeClaim and every launched
// NodeClaim has exactly one VM, every NIC is attached to one of those VMs,
// no NodeClaim is stuck deleting.
func fleetReport(ctx context.Context, env *localenv.Env) []string {
	var problems []string
	var ncs karpv1.NodeClaimList
	if err := env.Kube.List(ctx, &ncs); err != nil {
		return []string{err.Error()}
	}
	live := map[string]bool{}
	for _, nc := range ncs.Items {
		if nc.DeletionTimestamp != nil {
			problems = append(problems, fmt.Sprintf("NodeClaim %s still deleting", nc.Name))
			continue
		}
		live[nc.Name] = true
	}
	perClaim := map[string]int{}
	vmNames := map[string]bool{}
	for _, vm := range env.ARM.VMs() {
		name := *vm.Name
		vmNames[name] = true
		owner := name
		if tag := vm.Tags[azure.TagNodeClaim]; tag != nil {
			owner = *tag
		}
		perClaim[owner]++
		if !live[owner] {
			problems = append(problems, fmt.Sprintf("VM %s has no live NodeClaim (leaked)", name))
		}
	}
	for owner, n := range perClaim {
		if n > 1 {
			problems = append(problems, fmt.Sprintf("NodeClaim %s has %d VMs", owner, n))
		}
	}
	for _, nc := range ncs.Items {
		if live[nc.Name] && !vmNames[nc.Name] {
			problems = append(problems, fmt.Sprintf("NodeClaim %s has no VM", nc.Name))
		}
		if live[nc.Name] && !nc.StatusConditions().Get(karpv1.ConditionTypeInitialized).IsTrue() {
			problems = append(problems, fmt.Sprintf("NodeClaim %s is not initialized", nc.Name))
		}
	}
	for _, nic := range env.ARM.NICs() {
		vm := azure.VMNameForNIC(*nic.Name)
		if !vmNames[vm] || nic.Properties == nil || nic.Properties.VirtualMachine == nil {
			problems = append(problems, fmt.Sprintf("NIC %s is not attached to a live VM (leaked)", *nic.Name))
		}
	}
	sort.Strings(problems)
	return problems
}

// unavailableEntries reads the shared unavailable-offerings state.
func unavailableEntries(ctx context.Context, kube client.Client) []offerings.Entry {
	set, err := offerings.NewStore(kube, "", "", nil).Load(ctx)
	if err != nil {
		return nil
	}
	return set.Entries()
}

// eventCounts counts karpfunc's events by reason.
func eventCounts(ctx context.Context, t *testing.T, kube client.Client) map[string]int {
	t.Helper()
	counts, err := testfixtures.CountEventsByReason(ctx, kube, testfixtures.EventFilter{Component: "karpfunc"})
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// reportFailure prints what a failed chaos run needs to be replayed and
// understood: the fault schedule (which attempt on which resource got which
// fault) and, for every pod still not running, its history — its events,
// every Provision pass that saw it (the handler logs each pod's outcome
// per pass) and the NodeClaims it was nominated to.
func reportFailure(t *testing.T, env *localenv.Env, schedule []string) {
	ctx := context.Background()
	var lines []string
	for _, in := range schedule {
		lines = append(lines, "  "+in)
	}
	t.Logf("fault schedule (%d injections):\n%s", len(schedule), strings.Join(lines, "\n"))

	var pods corev1.PodList
	if err := env.Kube.List(ctx, &pods); err != nil {
		t.Logf("listing pods for the report: %v", err)
		return
	}
	logData, _ := os.ReadFile(env.LogPath)
	logLines := strings.Split(string(logData), "\n")
	var evs corev1.EventList
	_ = env.Kube.List(ctx, &evs)
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		var h []string
		h = append(h, fmt.Sprintf("pod %s/%s (uid %s, created %s, phase %s, node %q):", p.Namespace, p.Name, p.UID,
			p.CreationTimestamp.UTC().Format(time.RFC3339), p.Status.Phase, p.Spec.NodeName))
		for _, e := range evs.Items {
			if e.InvolvedObject.UID == p.UID || (e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == p.Name && e.InvolvedObject.Namespace == p.Namespace) {
				h = append(h, fmt.Sprintf("  event %s %s x%d (%s, last %s): %s", e.Type, e.Reason, e.Count, e.Source.Component,
					e.LastTimestamp.UTC().Format(time.RFC3339), e.Message))
			}
		}
		key := p.Namespace + "/" + p.Name + "="
		for _, l := range logLines {
			if i := strings.Index(l, key); i >= 0 && strings.Contains(l, " outcomes:") {
				outcome := l[i+len(key):]
				if j := strings.IndexByte(outcome, ' '); j >= 0 {
					outcome = outcome[:j]
				}
				prefix := l
				if j := strings.Index(l, " outcomes:"); j >= 0 {
					prefix = l[:j]
				}
				h = append(h, fmt.Sprintf("  pass %s: %s", strings.TrimSpace(prefix), outcome))
			}
		}
		t.Log(strings.Join(h, "\n"))
	}
	reportDisruptionBudgets(t, env, pods.Items)
}

// reportDisruptionBudgets prints each PDB's status and the pods it counts
// as unhealthy (Running but not Ready, and why): a drain that waits on a
// budget says which pod holds it.
func reportDisruptionBudgets(t *testing.T, env *localenv.Env, pods []corev1.Pod) {
	var pdbs policyv1.PodDisruptionBudgetList
	if err := env.Kube.List(context.Background(), &pdbs); err != nil {
		t.Logf("listing PodDisruptionBudgets for the report: %v", err)
		return
	}
	for _, pdb := range pdbs.Items {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		lines := []string{fmt.Sprintf("PDB %s/%s: %d of %d pods healthy (want %d), %d disruptions allowed, observed generation %d of %d, disrupted pods %v",
			pdb.Namespace, pdb.Name, pdb.Status.CurrentHealthy, pdb.Status.ExpectedPods, pdb.Status.DesiredHealthy,
			pdb.Status.DisruptionsAllowed, pdb.Status.ObservedGeneration, pdb.Generation, pdb.Status.DisruptedPods)}
		for _, p := range pods {
			if p.Namespace != pdb.Namespace || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			ready := "no Ready condition"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = fmt.Sprintf("Ready=%s since %s (%s %s)", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339), c.Reason, c.Message)
				}
			}
			lines = append(lines, fmt.Sprintf("  pod %s on %q: %s, %s, deleting=%t", p.Name, p.Spec.NodeName, p.Status.Phase, ready, p.DeletionTimestamp != nil))
		}
		t.Log(strings.Join(lines, "\n"))
	}
}

// failureReasons groups the failed invocations of fn in the process log by
// the reason the handler gave on stderr (numbers and names blurred), so a
// run says why messages were redelivered, not only how many. The host's
// own line carries only the status: it drops a failed answer's Logs.
func failureReasons(logPath, fn string) map[string]int {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, m := range handlerErrorRE.FindAllStringSubmatch(string(data), -1) {
		if m[1] == fn {
			out[blur(m[3])]++
		}
	}
	return out
}

// blur keeps a failure reason's words and drops what differs between
// occurrences: object names, numbers, quoted values.
func blur(s string) string {
	var words []string
	for _, w := range strings.Fields(s) {
		if strings.ContainsAny(w, "0123456789\"") {
			w = "…"
		}
		if len(words) > 0 && w == "…" && words[len(words)-1] == "…" {
			continue
		}
		words = append(words, w)
		if len(words) == 18 {
			break
		}
	}
	return strings.Join(words, " ")
}
