package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"k8s.io/utils/clock"

	"github.com/karpfunc/karpfunc/pkg/disruption"
)

// DefaultTTL is how long a warm instance keeps the configurations it
// read. AKS itself takes up to 15 minutes to honor a changed window
// (Learn, planned maintenance FAQ), so a minute is well inside what users
// already expect.
const DefaultTTL = time.Minute

// RetryAfterError is when a pass is asked for again after the
// configurations could not be read: drift waits, and looks again then.
const RetryAfterError = 5 * time.Minute

// Governing names the configurations that govern drift of reason (a
// disruption.Drift* constant), the first present wins:
//   - Kubernetes version drift: aksManagedAutoUpgradeSchedule, the window
//     AKS upgrades the cluster's version in.
//   - image drift: aksManagedNodeOSUpgradeSchedule, the window AKS applies
//     node images in.
//   - NodePool and AKSNodeClass drift: aksManagedNodeOSUpgradeSchedule.
//     Such a change replaces every node of the pool just as a new image
//     does (same disruption, same workloads affected), and the node-OS
//     window is the one users set for "when may my nodes be recreated".
//
// `default` stands in when the specific one is missing: it is the only
// window a cluster has told AKS about.
func Governing(reason string) []string {
	if reason == disruption.DriftK8sVersion {
		return []string{ConfigAutoUpgrade, ConfigDefault}
	}
	return []string{ConfigNodeOS, ConfigDefault}
}

// Configs are a cluster's configurations as karpfunc read them.
type Configs struct {
	// Schedules by configuration name.
	Schedules map[string]*Schedule
	// Invalid are the configurations that could not be read, by name.
	Invalid map[string]error
}

// HoldFor says whether drift of reason may not start at now under c (read
// with readErr): held outside the governing configuration's window,
// until the next one opens. A configuration that cannot be read, or
// configurations that could not be listed, hold the drift they govern:
// replacing nodes at any hour is what the user set a window against.
func HoldFor(c Configs, readErr error, reason string, now time.Time) (disruption.Hold, bool) {
	if readErr != nil {
		return disruption.Hold{Reason: "the cluster's maintenance configurations could not be read (" + readErr.Error() + "); drift waits until they can", Until: now.Add(RetryAfterError)}, true
	}
	for _, name := range Governing(reason) {
		if err, bad := c.Invalid[name]; bad {
			return disruption.Hold{Reason: err.Error() + "; drift waits until it is fixed"}, true
		}
		s, ok := c.Schedules[name]
		if !ok {
			continue
		}
		w, open, found := s.Next(now)
		switch {
		case open:
			return disruption.Hold{}, false
		case !found:
			return disruption.Hold{Reason: "maintenance configuration " + name + " opens no window in the next three years"}, true
		}
		return disruption.Hold{Reason: "outside the maintenance window " + name + ": the next one opens at " + w.Start.UTC().Format(time.RFC3339), Until: w.Start}, true
	}
	return disruption.Hold{}, false
}

// Lister lists a managed cluster's maintenance configurations;
// *armcontainerservice.MaintenanceConfigurationsClient through ARMLister.
type Lister interface {
	List(ctx context.Context) ([]*armcontainerservice.MaintenanceConfiguration, error)
}

// ARMLister lists through the ARM SDK (MaintenanceConfigurations_ListByManagedCluster).
type ARMLister struct {
	Client        *armcontainerservice.MaintenanceConfigurationsClient
	ResourceGroup string
	Cluster       string
}

// List reads every page.
func (l ARMLister) List(ctx context.Context) ([]*armcontainerservice.MaintenanceConfiguration, error) {
	var out []*armcontainerservice.MaintenanceConfiguration
	pager := l.Client.NewListByManagedClusterPager(l.ResourceGroup, l.Cluster, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the maintenance configurations of managed cluster %s in resource group %s: %w", l.Cluster, l.ResourceGroup, err)
		}
		out = append(out, page.Value...)
	}
	return out, nil
}

// ParseClusterID splits a managed cluster's resource ID
// (/subscriptions/<sub>/resourceGroups/<rg>/providers/Microsoft.ContainerService/managedClusters/<name>).
func ParseClusterID(id string) (subscription, resourceGroup, name string, err error) {
	seg := strings.Split(strings.Trim(id, "/"), "/")
	if len(seg) != 8 || !strings.EqualFold(seg[0], "subscriptions") || !strings.EqualFold(seg[2], "resourceGroups") ||
		!strings.EqualFold(seg[4], "providers") || !strings.EqualFold(seg[5], "Microsoft.ContainerService") ||
		!strings.EqualFold(seg[6], "managedClusters") || seg[1] == "" || seg[3] == "" || seg[7] == "" {
		return "", "", "", fmt.Errorf("%q is not a managed cluster's resource ID (/subscriptions/<subscription>/resourceGroups/<resource group>/providers/Microsoft.ContainerService/managedClusters/<name>; az aks show --query id)", id)
	}
	return seg[1], seg[3], seg[7], nil
}

// Options configure a Reader.
type Options struct {
	Lister Lister
	// TTL (default DefaultTTL).
	TTL    time.Duration
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Reader reads and compiles a cluster's configurations, kept for TTL.
type Reader struct {
	opts Options

	mu      sync.Mutex
	configs Configs
	until   time.Time
}

// NewReader returns a Reader.
func NewReader(opts Options) *Reader {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reader{opts: opts}
}

// Read returns the configurations, listed again once TTL has passed. A
// failed list is not kept: the next Read lists again.
func (r *Reader) Read(ctx context.Context) (Configs, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := r.opts.Clock.Now(); now.Before(r.until) {
		return r.configs, nil
	}
	list, err := r.opts.Lister.List(ctx)
	if err != nil {
		return Configs{}, err
	}
	configs := Configs{Schedules: map[string]*Schedule{}, Invalid: map[string]error{}}
	for _, cfg := range list {
		s, err := Compile(cfg)
		var ce *ConfigError
		switch {
		case err == nil:
			configs.Schedules[s.Name] = s
		case errors.As(err, &ce):
			configs.Invalid[ce.Config] = err
		default:
			return Configs{}, err
		}
	}
	r.configs, r.until = configs, r.opts.Clock.Now().Add(r.opts.TTL)
	return configs, nil
}

// DriftHold is disruption.State.DriftHold for one pass at now: the
// configurations are read on its first question, and not at all when no
// drifted node is judged (an idle cluster makes no ARM call).
func (r *Reader) DriftHold(ctx context.Context, now time.Time) func(reason string) (disruption.Hold, bool) {
	var once sync.Once
	var configs Configs
	var readErr error
	return func(reason string) (disruption.Hold, bool) {
		once.Do(func() {
			configs, readErr = r.Read(ctx)
			if readErr != nil {
				r.opts.Logger.Warn("maintenance configurations not read; drift waits", "error", readErr)
			}
		})
		return HoldFor(configs, readErr, reason, now)
	}
}
