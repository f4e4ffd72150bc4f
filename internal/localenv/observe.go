package localenv

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Progress counts what a person watching the loop cares about.
type Progress struct {
	Pods, Pending, Running                        int
	NodeClaims, Launched, Registered, Initialized int
	Nodes, NodesReady                             int
}

func (p Progress) String() string {
	return fmt.Sprintf("pods %d pending / %d running of %d | nodeclaims %d (launched %d, registered %d, initialized %d) | nodes %d ready of %d",
		p.Pending, p.Running, p.Pods, p.NodeClaims, p.Launched, p.Registered, p.Initialized, p.NodesReady, p.Nodes)
}

// Observe reads the current Progress of pods matching selector in namespace.
func (e *Env) Observe(ctx context.Context, namespace string, selector client.MatchingLabelsSelector) (Progress, error) {
	var progress Progress
	if err := e.observePods(ctx, &progress, namespace, selector); err != nil {
		return progress, err
	}
	if err := e.observeNodeClaims(ctx, &progress); err != nil {
		return progress, err
	}
	err := e.observeNodes(ctx, &progress)
	return progress, err
}

func (e *Env) observePods(ctx context.Context, progress *Progress, namespace string, selector client.MatchingLabelsSelector) error {
	var pods corev1.PodList
	opts := []client.ListOption{client.InNamespace(namespace)}
	if selector.Selector != nil {
		opts = append(opts, selector)
	}
	if err := e.Kube.List(ctx, &pods, opts...); err != nil {
		return err
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		progress.Pods++
		switch {
		case pod.Status.Phase == corev1.PodRunning:
			progress.Running++
		case pod.Spec.NodeName == "":
			progress.Pending++
		}
	}
	return nil
}

func (e *Env) observeNodeClaims(ctx context.Context, progress *Progress) error {
	var ncs karpv1.NodeClaimList
	if err := e.Kube.List(ctx, &ncs); err != nil {
		return err
	}
	for i := range ncs.Items {
		conditions := ncs.Items[i].StatusConditions()
		progress.NodeClaims++
		progress.Launched += countIf(conditions.Get(karpv1.ConditionTypeLaunched).IsTrue())
		progress.Registered += countIf(conditions.Get(karpv1.ConditionTypeRegistered).IsTrue())
		progress.Initialized += countIf(conditions.Get(karpv1.ConditionTypeInitialized).IsTrue())
	}
	return nil
}

func (e *Env) observeNodes(ctx context.Context, progress *Progress) error {
	var nodes corev1.NodeList
	if err := e.Kube.List(ctx, &nodes); err != nil {
		return err
	}
	for _, node := range nodes.Items {
		progress.Nodes++
		for _, cond := range node.Status.Conditions {
			progress.NodesReady += countIf(cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
	}
	return nil
}

func countIf(condition bool) int {
	if condition {
		return 1
	}
	return 0
}

// FleetLine is one group of nodes in a Fleet summary.
type FleetLine struct {
	SKU, Zone, CapacityType string
	Nodes                   int
	PricePerHour            float64 // for all nodes in the line
}

// Fleet groups the cluster's nodes by SKU, zone and capacity type and prices
// them from the catalog.
func (e *Env) Fleet(ctx context.Context) ([]FleetLine, float64, error) {
	var nodes corev1.NodeList
	if err := e.Kube.List(ctx, &nodes); err != nil {
		return nil, 0, err
	}
	lines := map[string]*FleetLine{}
	total := 0.0
	for _, node := range nodes.Items {
		sku := node.Labels[corev1.LabelInstanceTypeStable]
		zone := node.Labels[corev1.LabelTopologyZone]
		ct := node.Labels[karpv1.CapacityTypeLabelKey]
		key := sku + "|" + zone + "|" + ct
		line, ok := lines[key]
		if !ok {
			line = &FleetLine{SKU: sku, Zone: zone, CapacityType: ct}
			lines[key] = line
		}
		line.Nodes++
		if it, ok := e.Catalog.Get(sku); ok {
			for _, offering := range it.Offerings {
				if offering.Zone == zone && offering.CapacityType == ct {
					line.PricePerHour += offering.Price
					total += offering.Price
					break
				}
			}
		}
	}
	out := make([]FleetLine, 0, len(lines))
	for _, line := range lines {
		out = append(out, *line)
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join([]string{out[i].SKU, out[i].Zone, out[i].CapacityType}, "|") <
			strings.Join([]string{out[j].SKU, out[j].Zone, out[j].CapacityType}, "|")
	})
	return out, total, nil
}
