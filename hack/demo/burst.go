package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/localenv"
)

// The burst workload (`-pods N`): one Deployment of N replicas in the
// default namespace, each pod asking what a small web or API replica asks;
// with -bare-pods, the same N pods created by the demo itself.
const (
	burstName    = "burst"
	burstImage   = "registry.k8s.io/pause:3.10"
	burstCPU     = "500m"
	burstMemory  = "1Gi"
	burstPodsMax = 5000
	// burstCreators create the bare pods at once: enough that 1,000
	// exist within a few seconds, well under the API server's default
	// 200 mutating requests in flight.
	burstCreators = 32
)

// What a burst's timeline starts at.
const (
	startDeployment = "the Deployment's creation"
	startFirstPod   = "the first pod's creation"
)

// burstManifest is the burst Deployment as YAML, applied like the
// examples.
func burstManifest(replicas int) []byte {
	return fmt.Appendf(nil, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
spec:
  replicas: %[2]d
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[5]s
          resources:
            requests: {cpu: %[3]s, memory: %[4]s}
`, burstName, replicas, burstCPU, burstMemory, burstImage)
}

// applyBurst creates the burst Deployment and returns its creation time as
// the API server recorded it.
func applyBurst(ctx context.Context, env *localenv.Env, replicas int) (time.Time, error) {
	objs, err := env.Apply(ctx, burstManifest(replicas), "burst deployment")
	if err != nil {
		return time.Time{}, err
	}
	for _, obj := range objs {
		fmt.Printf("  · applied %s/%s with %d replicas (%s CPU, %s memory each)\n", obj.GetKind(), obj.GetName(), replicas, burstCPU, burstMemory)
	}
	var created metav1.PartialObjectMetadata
	created.SetGroupVersionKind(objs[0].GroupVersionKind())
	if err := env.Kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: burstName}, &created); err != nil {
		return time.Time{}, fmt.Errorf("reading the burst deployment back: %w", err)
	}
	return created.CreationTimestamp.Time, nil
}

// burstPod is the burst Deployment's pod template as a pod of its own,
// burst-00000 onwards.
func burstPod(index int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", burstName, index), Namespace: "default",
			Labels: map[string]string{"app": burstName}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: burstImage,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(burstCPU),
				corev1.ResourceMemory: resource.MustParse(burstMemory),
			}},
		}}},
	}
}

// createBurst creates the burst's pods itself (-bare-pods) and returns
// the first pod's creation time as the API server recorded it.
func createBurst(ctx context.Context, env *localenv.Env, count int) (time.Time, error) {
	began := time.Now()
	first, err := createBurstPods(ctx, env.ControlPlane.RESTConfig(), count)
	if err != nil {
		return time.Time{}, err
	}
	fmt.Printf("  · created %d pods %s-%05d to %s-%05d in %s, %d at a time (%s CPU, %s memory each)\n",
		count, burstName, 0, burstName, count-1, time.Since(began).Round(10*time.Millisecond), burstCreators, burstCPU, burstMemory)
	return first, nil
}

// createBurstPods creates count burst pods with burstCreators creators
// through a client of cfg with no client-side rate limit (the admin
// config's 50 a second would take 20 s for 1,000), and returns the first
// pod's creation time as the API server recorded it. The first failure
// stops the other creators and is returned.
func createBurstPods(ctx context.Context, cfg *rest.Config, count int) (time.Time, error) {
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		return time.Time{}, fmt.Errorf("burst pods' client: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	creators := make([]podCreator, burstCreators)
	var running sync.WaitGroup
	for i := range creators {
		creators[i] = podCreator{kube: kube, next: &next, count: count}
		running.Go(func() { creators[i].run(ctx, cancel) })
	}
	running.Wait()
	if err := context.Cause(ctx); err != nil {
		return time.Time{}, err
	}
	first := time.Time{}
	for i := range creators {
		first = earliest(first, creators[i].first)
	}
	return first, nil
}

// podCreator creates burst pods, taking the next index until count, and
// keeps the earliest creation time it saw.
type podCreator struct {
	kube  client.Client
	next  *atomic.Int64
	count int
	first time.Time
}

func (creator *podCreator) run(ctx context.Context, fail context.CancelCauseFunc) {
	for ctx.Err() == nil {
		index := int(creator.next.Add(1) - 1)
		if index >= creator.count {
			return
		}
		pod := burstPod(index)
		if err := creator.kube.Create(ctx, pod); err != nil {
			fail(fmt.Errorf("creating pod %s: %w", pod.Name, err))
			return
		}
		creator.first = earliest(creator.first, pod.CreationTimestamp.Time)
	}
}

// burstTimeline is when each phase of the burst ended, from the objects'
// own timestamps (creation times and condition transitions, which the API
// server keeps to the second). Each field is the last object to reach that
// phase, except firstClaim and firstPod.
type burstTimeline struct {
	start          time.Time // the Deployment's or the first pod's creation
	startEvent     string    // which: startDeployment or startFirstPod
	firstPod       time.Time // the first pod created
	lastPod        time.Time // the last pod created
	firstClaim     time.Time // the first NodeClaim created
	lastClaim      time.Time // the last NodeClaim created
	lastLaunched   time.Time // the last NodeClaim Launched
	lastRegistered time.Time // the last NodeClaim Registered (its Node joined)
	lastNodeReady  time.Time // the last Node Ready
	lastMarked     time.Time // the last pod kube-scheduler first found unschedulable
	lastNominated  time.Time // the last pod nominated to a NodeClaim (karpfunc's pass)
	lastBound      time.Time // the last pod bound (PodScheduled)
	lastRunning    time.Time // the last pod Running (Ready)

	pods, claims, nodes int
	// nominatedPods carry a Nominated event: a sample in a burst, since
	// the events go through Karpenter's rate limit (5 a second, burst 10).
	nominatedPods int
	// launchTimes are the NodeClaims' creation-to-Launched durations,
	// registerTimes their Launched-to-Registered ones, podTimes the pods'
	// creation-to-Ready ones, markTimes their creation-to-first-
	// FailedScheduling ones, nominateTimes their FailedScheduling-to-
	// Nominated ones (the relay's window and the Provision pass), sorted.
	launchTimes, registerTimes, podTimes, markTimes, nominateTimes []time.Duration
}

// readTimeline reads the burst's pods, the NodeClaims and the Nodes.
func readTimeline(ctx context.Context, kube client.Client, start time.Time, startEvent string) (burstTimeline, error) {
	line := burstTimeline{start: start, startEvent: startEvent}
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": burstName}); err != nil {
		return line, err
	}
	created := make(map[types.UID]time.Time, len(pods.Items))
	for i := range pods.Items {
		line.addPod(&pods.Items[i])
		created[pods.Items[i].UID] = pods.Items[i].CreationTimestamp.Time
	}
	var events corev1.EventList
	if err := kube.List(ctx, &events, client.InNamespace("default")); err != nil {
		return line, err
	}
	line.addPodEvents(events.Items, created)
	var claims karpv1.NodeClaimList
	if err := kube.List(ctx, &claims); err != nil {
		return line, err
	}
	for i := range claims.Items {
		line.addClaim(&claims.Items[i])
	}
	var nodes corev1.NodeList
	if err := kube.List(ctx, &nodes); err != nil {
		return line, err
	}
	for i := range nodes.Items {
		line.nodes++
		line.lastNodeReady = latest(line.lastNodeReady, nodeReadySince(&nodes.Items[i]))
	}
	slices.Sort(line.launchTimes)
	slices.Sort(line.registerTimes)
	slices.Sort(line.podTimes)
	slices.Sort(line.markTimes)
	slices.Sort(line.nominateTimes)
	return line, nil
}

func (line *burstTimeline) addPod(pod *corev1.Pod) {
	line.pods++
	created := pod.CreationTimestamp.Time
	line.firstPod = earliest(line.firstPod, created)
	line.lastPod = latest(line.lastPod, created)
	for _, cond := range pod.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case corev1.PodScheduled:
			line.lastBound = latest(line.lastBound, cond.LastTransitionTime.Time)
		case corev1.PodReady:
			line.lastRunning = latest(line.lastRunning, cond.LastTransitionTime.Time)
			line.podTimes = append(line.podTimes, cond.LastTransitionTime.Sub(created))
		}
	}
}

// addPodEvents reads, for each pod in created, when kube-scheduler first
// reported it unschedulable (FailedScheduling) and when a Provision pass
// nominated it to a NodeClaim (Nominated): the first of each.
func (line *burstTimeline) addPodEvents(events []corev1.Event, created map[types.UID]time.Time) {
	marked := map[types.UID]time.Time{}
	nominated := map[types.UID]time.Time{}
	for i := range events {
		event := &events[i]
		uid := event.InvolvedObject.UID
		if _, ours := created[uid]; !ours {
			continue
		}
		switch event.Reason {
		case "FailedScheduling":
			if event.Source.Component == "default-scheduler" || event.ReportingController == "default-scheduler" {
				marked[uid] = earliest(marked[uid], eventTime(event))
			}
		case "Nominated":
			nominated[uid] = earliest(nominated[uid], eventTime(event))
		}
	}
	for uid, at := range marked {
		line.lastMarked = latest(line.lastMarked, at)
		line.markTimes = append(line.markTimes, at.Sub(created[uid]))
		if nominatedAt, ok := nominated[uid]; ok {
			line.nominateTimes = append(line.nominateTimes, nominatedAt.Sub(at))
		}
	}
	for _, at := range nominated {
		line.lastNominated = latest(line.lastNominated, at)
	}
	line.nominatedPods = len(nominated)
}

// eventTime is when an event first happened: kube-scheduler writes
// events.k8s.io events (eventTime, to the microsecond), karpfunc core ones
// (firstTimestamp).
func eventTime(event *corev1.Event) time.Time {
	if !event.EventTime.IsZero() {
		return event.EventTime.Time
	}
	return event.FirstTimestamp.Time
}

func (line *burstTimeline) addClaim(claim *karpv1.NodeClaim) {
	line.claims++
	created := claim.CreationTimestamp.Time
	line.firstClaim = earliest(line.firstClaim, created)
	line.lastClaim = latest(line.lastClaim, created)
	launched := claim.StatusConditions().Get(karpv1.ConditionTypeLaunched)
	if launched == nil || !launched.IsTrue() {
		return
	}
	line.lastLaunched = latest(line.lastLaunched, launched.LastTransitionTime.Time)
	line.launchTimes = append(line.launchTimes, launched.LastTransitionTime.Sub(created))
	registered := claim.StatusConditions().Get(karpv1.ConditionTypeRegistered)
	if registered == nil || !registered.IsTrue() {
		return
	}
	line.lastRegistered = latest(line.lastRegistered, registered.LastTransitionTime.Time)
	line.registerTimes = append(line.registerTimes, registered.LastTransitionTime.Sub(launched.LastTransitionTime.Time))
}

// nodeReadySince is when the node turned Ready; zero while it is not.
func nodeReadySince(node *corev1.Node) time.Time {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			return cond.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func earliest(current, candidate time.Time) time.Time {
	if current.IsZero() || candidate.Before(current) {
		return candidate
	}
	return current
}

func latest(current, candidate time.Time) time.Time {
	if candidate.After(current) {
		return candidate
	}
	return current
}

// print writes the breakdown: each phase's end as seconds after the
// start (the Deployment's or the first pod's creation), and the launch and
// registration spreads.
func (line burstTimeline) print(out io.Writer) {
	fmt.Fprintf(out, "\nburst breakdown: %d pods, %d NodeClaims, %d Nodes (object timestamps, to the second, after %s)\n",
		line.pods, line.claims, line.nodes, line.startEvent)
	for _, phase := range []struct {
		what string
		at   time.Time
	}{
		{"first pod created", line.firstPod},
		{"all pods created", line.lastPod},
		{"all pods unschedulable", line.lastMarked},
		{"first NodeClaim created", line.firstClaim},
		{"last Nominated event", line.lastNominated},
		{"all NodeClaims created", line.lastClaim},
		{"all NodeClaims launched", line.lastLaunched},
		{"all NodeClaims registered", line.lastRegistered},
		{"all Nodes Ready", line.lastNodeReady},
		{"all pods bound", line.lastBound},
		{"all pods Running", line.lastRunning},
	} {
		fmt.Fprintf(out, "  %-27s %s\n", phase.what, line.since(phase.at))
	}
	if !line.lastPod.IsZero() && !line.lastRunning.IsZero() {
		fmt.Fprintf(out, "  %-27s %5.0fs\n", "all pods created -> Running", line.lastRunning.Sub(line.lastPod).Seconds())
	}
	fmt.Fprintf(out, "  pod created -> Running:           %s\n", spread(line.podTimes))
	fmt.Fprintf(out, "  pod created -> unschedulable:     %s\n", spread(line.markTimes))
	fmt.Fprintf(out, "  unschedulable -> nominated:       %s (the %d pods with a Nominated event; they are rate limited)\n",
		spread(line.nominateTimes), line.nominatedPods)
	fmt.Fprintf(out, "  NodeClaim created -> Launched:    %s\n", spread(line.launchTimes))
	fmt.Fprintf(out, "  NodeClaim Launched -> Registered: %s\n", spread(line.registerTimes))
}

// since is at as seconds after the start, or "-" when it never happened.
func (line burstTimeline) since(at time.Time) string {
	if at.IsZero() {
		return "     -"
	}
	return fmt.Sprintf("%5.0fs", at.Sub(line.start).Seconds())
}

// spread is the minimum, median and maximum of sorted durations.
func spread(sorted []time.Duration) string {
	if len(sorted) == 0 {
		return "none"
	}
	tenth := func(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
	return fmt.Sprintf("min %s, median %s, max %s (%d)",
		tenth(sorted[0]), tenth(sorted[len(sorted)/2]), tenth(sorted[len(sorted)-1]), len(sorted))
}
