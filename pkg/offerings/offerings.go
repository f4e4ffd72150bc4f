// Package offerings keeps the offerings (instance type × zone × capacity
// type) that Azure recently refused, so that the next launch attempt and the
// next provisioning pass go elsewhere.
//
// Function instances share no memory, so the state lives in the API server:
// one ConfigMap, one key per entry, written with its resourceVersion
// (optimistic concurrency) so two instances marking at once both land.
// Entries carry their own expiry; expired ones are ignored on read and
// pruned on the next write.
//
// The TTLs and the breadth of what one error marks follow the Azure Karpenter
// provider: a zonal allocation failure marks the size in that zone, a
// regional one (and SkuNotAvailable) the size in every zone, a family quota
// the whole family, low-priority quota every spot offering, regional quota
// every on-demand offering.
package offerings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/pkg/catalog"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
)

// Defaults for where the state lives.
const (
	DefaultNamespace = "karpfunc"
	DefaultName      = "karpfunc-unavailable-offerings"
)

// TTLs, as the Azure Karpenter provider uses them.
const (
	// DefaultTTL is Karpenter's UnavailableOfferingsTTL (zonal allocation
	// failures and anything not more specific).
	DefaultTTL                 = 3 * time.Minute
	AllocationFailureTTL       = time.Hour
	SKUNotAvailableSpotTTL     = time.Hour
	SKUNotAvailableOnDemandTTL = 23 * time.Hour
	SubscriptionQuotaTTL       = time.Hour
	// SubscriptionQuotaWithRoomTTL is for a family quota whose limit is
	// not 0: usage falls as nodes go, so it is looked at again sooner.
	SubscriptionQuotaWithRoomTTL = 10 * time.Minute
	RegionalQuotaTTL             = 30 * time.Minute
)

// Entry marks a set of offerings unavailable until Until. Empty InstanceType,
// Family or Zone match anything; CapacityType is required. Family is the
// Azure quota family (standardDSv5Family; see QuotaFamily).
type Entry struct {
	CapacityType string    `json:"capacityType"`
	InstanceType string    `json:"instanceType,omitempty"`
	Family       string    `json:"family,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	Reason       string    `json:"reason"`
	Until        time.Time `json:"until"`
}

// Key is the entry's ConfigMap key: [-._a-zA-Z0-9]+, unique per scope.
func (e Entry) Key() string {
	part := func(prefix, v string) string {
		if v == "" {
			return prefix + "any"
		}
		return prefix + v
	}
	key := e.CapacityType + "." + part("sku-", e.InstanceType) + "." + part("family-", e.Family) + "." + part("zone-", e.Zone)
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, key)
}

func (e Entry) matches(it *catalog.InstanceType, o catalog.Offering) bool {
	if e.CapacityType != o.CapacityType {
		return false
	}
	if e.InstanceType != "" && !strings.EqualFold(e.InstanceType, it.Name) {
		return false
	}
	if e.Family != "" && !strings.EqualFold(e.Family, QuotaFamily(it.Name)) {
		return false
	}
	return e.Zone == "" || e.Zone == o.Zone
}

func (e Entry) String() string {
	var scope []string
	if e.InstanceType != "" {
		scope = append(scope, e.InstanceType)
	}
	if e.Family != "" {
		scope = append(scope, "family "+e.Family)
	}
	if e.Zone != "" {
		scope = append(scope, e.Zone)
	} else {
		scope = append(scope, "all zones")
	}
	return fmt.Sprintf("%s %s (%s) until %s", e.CapacityType, strings.Join(scope, " "), e.Reason, e.Until.UTC().Format(time.RFC3339))
}

// EntriesFor are the entries for what a provider error said to exclude
// (cloudprovider.InsufficientCapacityError), from now on.
func EntriesFor(unavailable []cloudprovider.Unavailable, now time.Time) []Entry {
	entries := make([]Entry, 0, len(unavailable))
	for _, entry := range unavailable {
		entries = append(entries, Entry{CapacityType: entry.CapacityType, InstanceType: entry.InstanceType, Family: entry.Family,
			Zone: entry.Zone, Reason: entry.Reason, Until: now.Add(entry.TTL)})
	}
	return entries
}

// Set is the unexpired entries at one point in time.
type Set struct{ entries []Entry }

// Entries returns the entries, sorted by key.
func (s *Set) Entries() []Entry {
	if s == nil {
		return nil
	}
	return append([]Entry(nil), s.entries...)
}

// Unavailable returns the entry that rules out offering o of it, if any.
func (s *Set) Unavailable(it *catalog.InstanceType, o catalog.Offering) (Entry, bool) {
	if s == nil {
		return Entry{}, false
	}
	for _, entry := range s.entries {
		if entry.matches(it, o) {
			return entry, true
		}
	}
	return Entry{}, false
}

// Apply returns a copy of cat whose offerings covered by the set have
// Available=false. cat itself is not changed (it is shared by invocations).
// With an empty set it returns cat.
func (s *Set) Apply(cat *catalog.Catalog) *catalog.Catalog {
	if s == nil || len(s.entries) == 0 || cat == nil {
		return cat
	}
	out := &catalog.Catalog{Region: cat.Region, Zones: cat.Zones, InstanceTypes: make([]*catalog.InstanceType, len(cat.InstanceTypes))}
	for i, it := range cat.InstanceTypes {
		changed := false
		for _, offering := range it.Offerings {
			if _, ok := s.Unavailable(it, offering); ok && offering.Available {
				changed = true
				break
			}
		}
		if !changed {
			out.InstanceTypes[i] = it
			continue
		}
		cp := *it // shallow: only Offerings is replaced
		cp.Offerings = append([]catalog.Offering(nil), it.Offerings...)
		for j := range cp.Offerings {
			if _, ok := s.Unavailable(it, cp.Offerings[j]); ok {
				cp.Offerings[j].Available = false
			}
		}
		out.InstanceTypes[i] = &cp
	}
	return out
}

// Store reads and writes the shared state.
type Store struct {
	kube      client.Client
	namespace string
	name      string
	clock     clock.PassiveClock
}

// NewStore returns a Store on ConfigMap namespace/name (defaults when empty).
func NewStore(kube client.Client, namespace, name string, clk clock.PassiveClock) *Store {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	if name == "" {
		name = DefaultName
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Store{kube: kube, namespace: namespace, name: name, clock: clk}
}

// ConflictError means the state kept changing under us; the caller retries.
type ConflictError struct{ Attempts int }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("unavailable offerings: gave up after %d conflicting writes", e.Attempts)
}

// NewConflictError returns a ConflictError.
func NewConflictError(attempts int) error { return &ConflictError{Attempts: attempts} }

// IsConflict reports whether err is, or wraps, a ConflictError.
func IsConflict(err error) bool {
	var conflict *ConflictError
	return errors.As(err, &conflict)
}

// Load returns the unexpired entries (an empty set when the ConfigMap does
// not exist yet). Entries that do not parse are skipped: one bad value must
// not stop provisioning; the next write drops them.
func (s *Store) Load(ctx context.Context) (*Set, error) {
	cm := &corev1.ConfigMap{}
	if err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return &Set{}, nil
		}
		return nil, fmt.Errorf("reading unavailable offerings %s/%s: %w", s.namespace, s.name, err)
	}
	return s.parse(cm), nil
}

func (s *Store) parse(cm *corev1.ConfigMap) *Set {
	now := s.clock.Now()
	set := &Set{}
	for _, key := range sortedKeys(cm.Data) {
		var entry Entry
		if json.Unmarshal([]byte(cm.Data[key]), &entry) != nil || entry.CapacityType == "" || !entry.Until.After(now) {
			continue
		}
		set.entries = append(set.entries, entry)
	}
	return set
}

// Mark records entries (keeping the later expiry where one exists) and
// prunes expired and unreadable ones, retrying on write conflicts.
func (s *Store) Mark(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for _, entry := range entries {
		if entry.CapacityType == "" || entry.Until.IsZero() {
			return fmt.Errorf("unavailable offerings: entry %+v needs a capacity type and an expiry", entry)
		}
	}
	const attempts = 8
	for range attempts {
		cm := &corev1.ConfigMap{}
		err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, cm)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("reading unavailable offerings %s/%s: %w", s.namespace, s.name, err)
		}
		data, err := merged(cm.Data, entries, s.clock.Now())
		if err != nil {
			return err
		}
		written, err := s.write(ctx, cm, create, data)
		if written || err != nil {
			return err
		}
	}
	return NewConflictError(attempts)
}

// merged is stored (unexpired, readable entries at now) with entries
// added, each keeping the later expiry.
func merged(stored map[string]string, entries []Entry, now time.Time) (map[string]string, error) {
	data := map[string]string{}
	for key, value := range stored {
		var entry Entry
		if json.Unmarshal([]byte(value), &entry) == nil && entry.Until.After(now) {
			data[key] = value
		}
	}
	for _, entry := range entries {
		if old, ok := data[entry.Key()]; ok {
			var prev Entry
			if json.Unmarshal([]byte(old), &prev) == nil && prev.Until.After(entry.Until) {
				continue
			}
		}
		raw, err := json.Marshal(entry)
		if err != nil {
			return nil, err
		}
		data[entry.Key()] = string(raw)
	}
	return data, nil
}

// write stores data in cm (creating it when create), guarded by its
// resourceVersion; false, nil when a concurrent write won and the caller
// reads again.
func (s *Store) write(ctx context.Context, cm *corev1.ConfigMap, create bool, data map[string]string) (bool, error) {
	var err error
	if create {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "karpfunc"}}, Data: data}
		err = s.kube.Create(ctx, cm)
	} else {
		cm.Data = data // Update sends cm's resourceVersion: a concurrent write makes this a conflict
		err = s.kube.Update(ctx, cm)
	}
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return false, nil
	default:
		return false, fmt.Errorf("writing unavailable offerings %s/%s: %w", s.namespace, s.name, err)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// With returns a set that also holds entries (the receiver is unchanged).
func (s *Set) With(entries ...Entry) *Set {
	out := &Set{}
	if s != nil {
		out.entries = append(out.entries, s.entries...)
	}
	out.entries = append(out.entries, entries...)
	return out
}
