package maintenance

import (
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"github.com/karpfunc/karpfunc/pkg/disruption"
)

func TestHoldFor(t *testing.T) {
	now := at("2026-12-04T12:00:00Z") // a Friday
	compile := func(name string, day armcontainerservice.WeekDay, start string) *Schedule {
		s, err := Compile(windowConfig(name, armcontainerservice.MaintenanceWindow{Schedule: weekly(1, day),
			DurationHours: to.Ptr[int32](4), StartDate: date("2026-11-01"), StartTime: to.Ptr(start)}))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	nodeOSMonday := compile(ConfigNodeOS, armcontainerservice.WeekDayMonday, "02:00")
	autoUpgradeNow := compile(ConfigAutoUpgrade, armcontainerservice.WeekDayFriday, "11:00")
	defaultSunday := compile(ConfigDefault, armcontainerservice.WeekDaySunday, "03:00")
	for _, tc := range []struct {
		name    string
		configs Configs
		readErr error
		reason  string
		// want is a substring of the hold's reason; "" means not held.
		want  string
		until string
	}{
		{name: "no configuration: drift any time", reason: disruption.DriftImage},
		{name: "image drift waits for the node-OS window", configs: Configs{Schedules: map[string]*Schedule{ConfigNodeOS: nodeOSMonday, ConfigAutoUpgrade: autoUpgradeNow}},
			reason: disruption.DriftImage, want: "outside the maintenance window aksManagedNodeOSUpgradeSchedule: the next one opens at 2026-12-07T02:00:00Z", until: "2026-12-07T02:00:00Z"},
		{name: "NodePool drift follows the node-OS window", configs: Configs{Schedules: map[string]*Schedule{ConfigNodeOS: nodeOSMonday, ConfigAutoUpgrade: autoUpgradeNow}},
			reason: disruption.DriftNodePool, want: "aksManagedNodeOSUpgradeSchedule", until: "2026-12-07T02:00:00Z"},
		{name: "Kubernetes version drift follows the auto-upgrade window, open now", configs: Configs{Schedules: map[string]*Schedule{ConfigNodeOS: nodeOSMonday, ConfigAutoUpgrade: autoUpgradeNow}},
			reason: disruption.DriftK8sVersion},
		{name: "default stands in for a missing node-OS window", configs: Configs{Schedules: map[string]*Schedule{ConfigAutoUpgrade: autoUpgradeNow, ConfigDefault: defaultSunday}},
			reason: disruption.DriftNodeClass, want: "outside the maintenance window default: the next one opens at 2026-12-06T03:00:00Z", until: "2026-12-06T03:00:00Z"},
		{name: "the specific window wins over default", configs: Configs{Schedules: map[string]*Schedule{ConfigAutoUpgrade: autoUpgradeNow, ConfigDefault: defaultSunday}},
			reason: disruption.DriftK8sVersion},
		{name: "an unreadable configuration holds what it governs", configs: Configs{Invalid: map[string]error{ConfigNodeOS: errors.New("maintenance configuration aksManagedNodeOSUpgradeSchedule: maintenanceWindow.startTime: bad")}},
			reason: disruption.DriftImage, want: "startTime: bad; drift waits until it is fixed"},
		{name: "an unreadable configuration does not hold what it does not govern", configs: Configs{Invalid: map[string]error{ConfigNodeOS: errors.New("bad")}},
			reason: disruption.DriftK8sVersion},
		{name: "a failed read holds every drift and looks again", readErr: errors.New("403 AuthorizationFailed"),
			reason: disruption.DriftK8sVersion, want: "could not be read (403 AuthorizationFailed)", until: "2026-12-04T12:05:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold, held := HoldFor(tc.configs, tc.readErr, tc.reason, now)
			if held != (tc.want != "") || !strings.Contains(hold.Reason, tc.want) {
				t.Fatalf("HoldFor = %+v (held %t), want held %t with %q", hold, held, tc.want != "", tc.want)
			}
			if tc.until != "" && !hold.Until.Equal(at(tc.until)) {
				t.Errorf("until %s, want %s", hold.Until, tc.until)
			}
		})
	}
}

func TestParseClusterID(t *testing.T) {
	sub, rg, name, err := ParseClusterID("/subscriptions/s/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c")
	if err != nil || sub != "s" || rg != "rg" || name != "c" {
		t.Fatalf("ParseClusterID = %q %q %q %v", sub, rg, name, err)
	}
	for _, bad := range []string{"", "c", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/c"} {
		if _, _, _, err := ParseClusterID(bad); err == nil || !strings.Contains(err.Error(), "az aks show --query id") {
			t.Errorf("ParseClusterID(%q) = %v, want a refusal saying where to find the ID", bad, err)
		}
	}
}
