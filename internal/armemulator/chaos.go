package armemulator

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand"
	"strings"
	"sync"
)

// ChaosRule injects Fault into a fraction Rate of the requests matching
// Operation (and SKU, Zone when set). Kind names the fault in Counts.
type ChaosRule struct {
	Kind      string
	Operation Operation
	SKU       string
	Zone      string
	Rate      float64
	Fault     Fault
}

// Chaos is a seeded, probabilistic Injector whose schedule does not depend
// on timing: whether a request gets a fault is a function of the seed and
// the request's identity — its operation, which resource it is (the k-th
// distinct resource that operation has seen, by first appearance) and
// which attempt on that resource (the n-th request) — not of how many
// other requests happened to arrive first. Two runs with the same seed
// fault the same attempts on the same resources wherever the goroutines
// interleave; Schedule lists what was injected, in that vocabulary.
//
// Hook, when set, runs for every request before the rules (a test uses it
// to kill the handler in the middle of a launch) with a rand.Rand seeded
// the same way; it returns the Kind to count, or "".
type Chaos struct {
	mu       sync.Mutex
	seed     int64
	rules    []ChaosRule
	counts   map[string]int
	ordinals map[Operation]map[string]int
	attempts map[string]int
	schedule []Injection
	off      bool
	Hook     func(req Request, rng *rand.Rand) string
}

// Injection is one fault Chaos injected: on attempt Attempt of the
// Resource-th distinct resource Operation saw.
type Injection struct {
	Operation Operation
	Resource  int
	Attempt   int
	Name      string
	Kind      string
}

func (i Injection) String() string {
	return fmt.Sprintf("%s #%d (%s) attempt %d: %s", i.Operation, i.Resource, i.Name, i.Attempt, i.Kind)
}

// NewChaos returns a Chaos injector seeded with seed.
func NewChaos(seed int64, rules ...ChaosRule) *Chaos {
	return &Chaos{seed: seed, rules: rules, counts: map[string]int{}, ordinals: map[Operation]map[string]int{}, attempts: map[string]int{}}
}

// Inject implements Injector.
func (c *Chaos) Inject(req Request) *Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return nil
	}
	byName := c.ordinals[req.Operation]
	if byName == nil {
		byName = map[string]int{}
		c.ordinals[req.Operation] = byName
	}
	resource, ok := byName[strings.ToLower(req.Name)]
	if !ok {
		resource = len(byName) + 1
		byName[strings.ToLower(req.Name)] = resource
	}
	key := fmt.Sprintf("%s/%d", req.Operation, resource)
	c.attempts[key]++
	attempt := c.attempts[key]
	record := func(kind string) {
		c.counts[kind]++
		c.schedule = append(c.schedule, Injection{Operation: req.Operation, Resource: resource, Attempt: attempt, Name: req.Name, Kind: kind})
	}
	if c.Hook != nil {
		if kind := c.Hook(req, rand.New(rand.NewSource(c.draw(req.Operation, resource, attempt, -1)))); kind != "" {
			record(kind)
		}
	}
	for i, rule := range c.rules {
		if rule.Operation != req.Operation || (rule.SKU != "" && !strings.EqualFold(rule.SKU, req.SKU)) ||
			(rule.Zone != "" && rule.Zone != req.Zone && !strings.HasSuffix(req.Zone, "-"+rule.Zone)) {
			continue
		}
		if float64(uint64(c.draw(req.Operation, resource, attempt, i))>>11)/(1<<52) >= rule.Rate {
			continue
		}
		record(rule.Kind)
		fault := rule.Fault
		return &fault
	}
	return nil
}

// draw is the seed's number for one rule on one attempt on one resource.
func (c *Chaos) draw(op Operation, resource, attempt, rule int) int64 {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s/%d/%d/%d", c.seed, op, resource, attempt, rule))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 1)
}

// Stop turns every fault off (the run converges from here).
func (c *Chaos) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
}

// Counts returns how many faults of each Kind were injected.
func (c *Chaos) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for kind, count := range c.counts {
		out[kind] = count
	}
	return out
}

// Schedule returns every fault injected so far, in order.
func (c *Chaos) Schedule() []Injection {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Injection(nil), c.schedule...)
}
