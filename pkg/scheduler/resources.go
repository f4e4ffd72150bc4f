package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// resVec is a resource list as integers, indexed by a resIndex: cpu in
// millicores, everything else in whole units (bytes, pods, GPUs). The hot
// paths compare these instead of resource.Quantity maps.
type resVec []int64

const (
	rCPU = iota
	rMemory
	rPods
)

// resIndex numbers the resources that matter in one solve: cpu, memory,
// pods, then every other resource a pending pod requests.
type resIndex struct {
	names []corev1.ResourceName
	index map[corev1.ResourceName]int
}

func newResIndex() *resIndex {
	ri := &resIndex{index: map[corev1.ResourceName]int{}}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		ri.add(name)
	}
	return ri
}

func (ri *resIndex) add(n corev1.ResourceName) {
	if _, ok := ri.index[n]; !ok {
		ri.index[n] = len(ri.names)
		ri.names = append(ri.names, n)
	}
}

func quantityValue(n corev1.ResourceName, q resource.Quantity) int64 {
	if n == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// vec converts rl; resources outside the index are dropped.
func (ri *resIndex) vec(rl corev1.ResourceList) resVec {
	vec := make(resVec, len(ri.names))
	for name, quantity := range rl {
		if i, ok := ri.index[name]; ok {
			vec[i] = quantityValue(name, quantity)
		}
	}
	return vec
}

// list converts v back, leaving out zeros except cpu and memory.
func (ri *resIndex) list(v resVec) corev1.ResourceList {
	rl := corev1.ResourceList{}
	for i, name := range ri.names {
		if v[i] == 0 && i > rMemory {
			continue
		}
		if name == corev1.ResourceCPU {
			rl[name] = *resource.NewMilliQuantity(v[i], resource.DecimalSI)
		} else if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
			rl[name] = *resource.NewQuantity(v[i], resource.BinarySI)
		} else {
			rl[name] = *resource.NewQuantity(v[i], resource.DecimalSI)
		}
	}
	return rl
}

// fitsSum reports whether used+add fits in room.
func fitsSum(used, add, room resVec) bool {
	for i, value := range add {
		if used[i]+value > room[i] {
			return false
		}
	}
	return true
}

func (v resVec) fitsIn(room resVec) bool {
	for i, value := range v {
		if value > room[i] {
			return false
		}
	}
	return true
}

func (v resVec) addInPlace(a resVec) {
	for i := range a {
		v[i] += a[i]
	}
}

func (v resVec) clone() resVec { return append(resVec(nil), v...) }

// maxInPlace raises v to a component-wise.
func (v resVec) maxInPlace(a resVec) {
	for i := range a {
		if a[i] > v[i] {
			v[i] = a[i]
		}
	}
}

// bitset is a set of small integers (instance-type indexes in a pool).
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// subsetOf reports whether every member of b is in o.
func (b bitset) subsetOf(o bitset) bool {
	for i := range b {
		if b[i]&^o[i] != 0 {
			return false
		}
	}
	return true
}

func (b bitset) and(o bitset) bitset {
	out := make(bitset, len(b))
	for i := range b {
		out[i] = b[i] & o[i]
	}
	return out
}

// times is v scaled by n, as a new vector.
func (v resVec) times(n int64) resVec {
	out := make(resVec, len(v))
	for i, value := range v {
		out[i] = value * n
	}
	return out
}
