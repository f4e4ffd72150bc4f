package snapshot

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// budgetShare is the part of the memory limit the cached objects may take:
// the rest is the pass itself (the scheduler's compact form, the solve,
// the disruption engine), the Go runtime and the HTTP buffers.
const budgetShare = 0.5

// fallbackLimit is the memory assumed when neither GOMEMLIMIT nor a cgroup
// limit says: a Flex Consumption instance's smallest size, 2,048 MB
// (https://learn.microsoft.com/azure/azure-functions/flex-consumption-plan#instance-memory).
const fallbackLimit = 2048 << 20

// MemoryBudget is the heap the snapshot may take: half the memory limit,
// the limit being GOMEMLIMIT when set, else the cgroup's memory.max, else
// fallbackLimit.
func MemoryBudget() int64 {
	limit, _ := memoryLimit()
	return int64(float64(limit) * budgetShare)
}

// memoryLimit returns the limit and where it came from.
func memoryLimit() (int64, string) {
	return memoryLimitFrom(debug.SetMemoryLimit(-1), os.ReadFile)
}

// memoryLimitFrom: goLimit is the runtime's limit (math.MaxInt64 when
// GOMEMLIMIT is unset); readFile reads the cgroup v2 memory.max ("max"
// when unbounded).
func memoryLimitFrom(goLimit int64, readFile func(string) ([]byte, error)) (int64, string) {
	if goLimit > 0 && goLimit < math.MaxInt64 {
		return goLimit, "GOMEMLIMIT"
	}
	if raw, err := readFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64); err == nil && limit > 0 {
			return limit, "cgroup memory.max"
		}
	}
	return fallbackLimit, "the 2 GB instance size"
}

// TooLargeError says the cluster does not fit the memory at hand.
type TooLargeError struct {
	// Counts are the objects per kind that were counted.
	Counts map[string]int64
	// Need is the estimated heap for them; Budget what may be used.
	Need, Budget int64
	// Partial: counting stopped at the first page that went over.
	Partial bool
}

func (e *TooLargeError) Error() string {
	names := make([]string, 0, len(e.Counts))
	for name := range e.Counts {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%d %s", e.Counts[name], name))
	}
	more := ""
	if e.Partial {
		more = " (and more not yet read)"
	}
	limit, from := memoryLimit()
	return fmt.Sprintf("the cluster is too large for this instance's memory: %s%s need about %d MiB as a snapshot, over the budget of %d MiB (%.0f%% of %d MiB, from %s); run on a larger instance or raise GOMEMLIMIT",
		strings.Join(parts, ", "), more, e.Need>>20, e.Budget>>20, budgetShare*100, limit>>20, from)
}

// maxSizeHint bounds the map a list sizes up front from a count: a count
// the budget refuses never gets there, but a server may say anything.
const maxSizeHint = 1 << 20

// checkBudget counts every kind with a LIST of one object (the API server
// reports how many remain), all kinds at once, and refuses before anything
// is decoded when the estimate exceeds the budget. A server that does not
// report the count is checked as the list is read instead (listPages,
// every PageSize objects).
func (c *Cache) checkBudget(ctx context.Context) error {
	err := c.eachKind(ctx, func(ctx context.Context, k *kindCache) error {
		count, err := c.count(ctx, k.spec)
		k.counted = count
		return err
	})
	if err != nil {
		return err
	}
	counts := map[string]int64{}
	var need int64
	for _, k := range c.kinds {
		counts[k.spec.name] = k.counted
		need += k.counted * k.spec.bytesPerObject
	}
	if need > c.opts.Budget {
		return &TooLargeError{Counts: counts, Need: need, Budget: c.opts.Budget}
	}
	return nil
}

// count is how many objects of spec there are, by a LIST of one.
func (c *Cache) count(ctx context.Context, spec *kindSpec) (int64, error) {
	list := spec.newList()
	c.lists.Add(1)
	if err := c.kube.List(ctx, list, client.Limit(1)); err != nil {
		return 0, err
	}
	count := int64(meta.LenList(list))
	if remaining := list.GetRemainingItemCount(); remaining != nil {
		count += *remaining
	}
	return count, nil
}
