package armemulator

import (
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

// Chaos is a seeded, probabilistic Injector: the same seed and the same
// sequence of requests inject the same faults. Hook, when set, runs for
// every request before the rules (a test uses it to kill the handler in the
// middle of a launch); it returns the Kind to count, or "".
type Chaos struct {
	mu     sync.Mutex
	rng    *rand.Rand
	rules  []ChaosRule
	counts map[string]int
	off    bool
	Hook   func(req Request, rng *rand.Rand) string
}

// NewChaos returns a Chaos injector seeded with seed.
func NewChaos(seed int64, rules ...ChaosRule) *Chaos {
	return &Chaos{rng: rand.New(rand.NewSource(seed)), rules: rules, counts: map[string]int{}}
}

// Inject implements Injector.
func (c *Chaos) Inject(req Request) *Fault {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return nil
	}
	if c.Hook != nil {
		if kind := c.Hook(req, c.rng); kind != "" {
			c.counts[kind]++
		}
	}
	for _, r := range c.rules {
		if r.Operation != req.Operation || (r.SKU != "" && !strings.EqualFold(r.SKU, req.SKU)) ||
			(r.Zone != "" && r.Zone != req.Zone && !strings.HasSuffix(req.Zone, "-"+r.Zone)) {
			continue
		}
		if c.rng.Float64() >= r.Rate {
			continue
		}
		c.counts[r.Kind]++
		f := r.Fault
		return &f
	}
	return nil
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
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}
