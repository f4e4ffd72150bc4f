package scheduler

import "math"

// binIndex finds the open bins with room for a request, in bin order,
// without looking at the others: at 5,000 existing nodes most of them are
// too full for a pending pod, and first fit would otherwise try each one
// for every pod.
//
// It is a segment tree over bin ids. A leaf holds its bin's free room
// (maxRoom less used, per resource; a closed bin holds nothing); an inner
// node holds the component-wise largest free room below it. A leaf admits
// a request exactly when fitsSum(used, req, maxRoom) holds, the first test
// of try, so walking the admitted leaves in order visits the bins the
// linear scan over s.active would try and skips only those try rejects
// before doing anything else: the placements are the same.
type binIndex struct {
	dims int
	// leaves is a power of two, at least the number of bins.
	leaves int
	// free holds node k's vector at free[k*dims : (k+1)*dims]; node 1 is
	// the root, node k's children are 2k and 2k+1, leaf i is node
	// leaves+i.
	free []int64
}

// noRoom marks a closed bin or an unused leaf: no request fits it.
const noRoom = math.MinInt64

func newBinIndex(dims int) *binIndex {
	index := &binIndex{dims: dims}
	index.grow(64)
	return index
}

// grow makes room for at least n leaves, keeping what is there.
func (x *binIndex) grow(n int) {
	if n <= x.leaves {
		return
	}
	leaves := max(x.leaves, 1)
	for leaves < n {
		leaves *= 2
	}
	free := make([]int64, 2*leaves*x.dims)
	for i := range free {
		free[i] = noRoom
	}
	for i := range x.leaves {
		copy(free[(leaves+i)*x.dims:(leaves+i+1)*x.dims], x.leafFree(i))
	}
	x.leaves, x.free = leaves, free
	for node := leaves - 1; node >= 1; node-- {
		x.pull(node)
	}
}

func (x *binIndex) node(k int) []int64 { return x.free[k*x.dims : (k+1)*x.dims] }

func (x *binIndex) leafFree(i int) []int64 { return x.node(x.leaves + i) }

// pull sets inner node k to the component-wise largest of its children.
func (x *binIndex) pull(k int) {
	parent, left, right := x.node(k), x.node(2*k), x.node(2*k+1)
	for dim := range parent {
		parent[dim] = max(left[dim], right[dim])
	}
}

// set records bin b's free room (none if it is closed).
func (x *binIndex) set(b *bin) {
	x.grow(b.id + 1)
	leaf := x.leafFree(b.id)
	for dim := range leaf {
		if b.closed {
			leaf[dim] = noRoom
		} else {
			leaf[dim] = b.maxRoom[dim] - b.used[dim]
		}
	}
	for node := (x.leaves + b.id) / 2; node >= 1; node /= 2 {
		x.pull(node)
	}
}

// next returns the first bin id at or after from whose free room holds
// req, or -1.
func (x *binIndex) next(from int, req resVec) int {
	return x.search(1, 0, x.leaves, from, req)
}

func (x *binIndex) search(k, lo, hi, from int, req resVec) int {
	if hi <= from || !x.holds(k, req) {
		return -1
	}
	if hi-lo == 1 {
		return lo
	}
	mid := (lo + hi) / 2
	if found := x.search(2*k, lo, mid, from, req); found >= 0 {
		return found
	}
	return x.search(2*k+1, mid, hi, from, req)
}

// holds reports whether node k's free room is at least req in every
// resource.
func (x *binIndex) holds(k int, req resVec) bool {
	free := x.node(k)
	for dim, want := range req {
		if free[dim] < want {
			return false
		}
	}
	return true
}
