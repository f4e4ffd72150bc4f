// Package differential holds the differential test of karpfunc's scheduling
// engine against Karpenter's own scheduler (sigs.k8s.io/karpenter, the
// version in go.mod): a seeded generator of small scenarios (NodePools,
// DaemonSets, existing nodes, pending pods), both schedulers on each, and
// checks of kube-scheduler's rules written in the test itself, applied to
// both plans.
//
// Invariants the test holds karpfunc to, scenario by scenario:
//   - its plan breaks no rule (resources incl. DaemonSet pods, node
//     selector and required node affinity, taints, topology spread,
//     pod affinity and anti-affinity, NodePool limits, minValues);
//   - it leaves no pod pending that Karpenter placed by a plan that breaks
//     no rule;
//   - over the scenarios where both placed the same pods by valid plans,
//     the median and the 90th percentile of karpfunc's price over
//     Karpenter's are at most 1.
//
// A plan of Karpenter's that breaks a rule is logged and the scenario is
// not compared. The package has only tests; see docs/differential.md.
package differential
