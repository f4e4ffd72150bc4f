package azure

import (
	"context"
	"strings"

	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// ReadUsage reads the subscription's compute quota and use in the
// cluster's region through the usages API (armcompute UsageClient,
// GET /subscriptions/{sub}/providers/Microsoft.Compute/locations/{loc}/usages):
// the regional vCPUs ("cores"), the spot vCPUs ("lowPriorityCores") and
// every VM family's. It needs no role beyond what reading the
// subscription's compute resources needs. An error is an ARMError when ARM
// answered (403 without the permission, 429 throttled).
func (l *Launcher) ReadUsage(ctx context.Context) (offerings.Usage, error) {
	usage := offerings.Usage{Region: l.opts.Location, Families: map[string]offerings.QuotaCounter{}}
	pager := l.usages.NewListPager(l.opts.Location, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return offerings.Usage{}, wrapARM(err, "reading compute usages in %s", l.opts.Location)
		}
		for _, u := range page.Value {
			if u == nil || u.Name == nil || u.Name.Value == nil || u.Limit == nil || u.CurrentValue == nil {
				continue
			}
			counter := offerings.QuotaCounter{Name: *u.Name.Value, Used: int64(*u.CurrentValue), Limit: *u.Limit}
			switch {
			case strings.EqualFold(counter.Name, offerings.UsageRegional):
				usage.Regional = counter
			case strings.EqualFold(counter.Name, offerings.UsageSpot):
				usage.Spot = counter
			case strings.HasSuffix(strings.ToLower(counter.Name), "family"):
				usage.Families[strings.ToLower(counter.Name)] = counter
			}
		}
	}
	return usage, nil
}
