package scheduler

// The kube-scheduler model (Input.Spread). The kube-scheduler does not
// follow our plan: it binds pods one at a time, each to the feasible node
// its scores rank first, and its default profile favours the least
// allocated, most balanced node. A packing that only works in first-fit
// order can leave a pod with no room once the pods before it have been
// spread; the model shows whether it does.

// spreadVariant puts one pod of v on the existing node or in-flight claim
// the kube-scheduler's default scoring ranks first, ties to the first.
func (s *solver) spreadVariant(v *variant) bool {
	var best *bin
	bestScore := 0.0
	for _, bin := range s.active {
		if bin.closed || bin.claim {
			continue
		}
		if ok, _ := s.try(bin, v, false); !ok {
			continue
		}
		if score := spreadScore(bin, v.g.req); best == nil || score > bestScore {
			best, bestScore = bin, score
		}
	}
	if best == nil {
		return false
	}
	if ok, _ := s.try(best, v, true); !ok {
		return false
	}
	s.maybeClose(best)
	return true
}

// spreadScore is NodeResourcesFit's LeastAllocated score plus
// NodeResourcesBalancedAllocation's, both on CPU and memory with equal
// weights as in the default profile, for b after taking req (each in
// [0, 1]).
func spreadScore(b *bin, req resVec) float64 {
	var usedShare [2]float64
	for i, r := range [2]int{rCPU, rMemory} {
		if b.alloc[r] <= 0 {
			usedShare[i] = 1
			continue
		}
		left := b.maxRoom[r] - b.used[r] - req[r]
		usedShare[i] = 1 - float64(left)/float64(b.alloc[r])
	}
	leastAllocated := 1 - (usedShare[0]+usedShare[1])/2
	diff := usedShare[0] - usedShare[1]
	if diff < 0 {
		diff = -diff
	}
	balanced := 1 - diff/2 // one minus the standard deviation of two shares
	return leastAllocated + balanced
}

// unplacedReason says why a pod of g went nowhere.
func (s *solver) unplacedReason(g *group) string {
	if s.spread && g.volumeErr == "" {
		return "no node has room left for it once the pods before it are spread the way the kube-scheduler scores nodes (least allocated first)"
	}
	return s.explain(g)
}
