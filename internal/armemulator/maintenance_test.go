package armemulator

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestMaintenanceConfigurations drives the routes with the real SDK
// client: a PUT is listed and read back with the service's read-only
// fields and startDate defaulted; what is missing is 404; a name AKS does
// not accept is InvalidParameter.
func TestMaintenanceConfigurations(t *testing.T) {
	clusterRG, cluster := "rg-aks", "aks1"
	clusterID := "/subscriptions/" + sub + "/resourceGroups/" + clusterRG + "/providers/Microsoft.ContainerService/managedClusters/" + cluster
	s := start(t, Options{ManagedClusters: []string{clusterID}, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 4, 23, 0, 0, 0, time.UTC))})
	client, err := armcontainerservice.NewMaintenanceConfigurationsClient(sub, token(s.Token()), armOptions(t, s))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	status := func(err error) (int, string) {
		var re *azcore.ResponseError
		if !errors.As(err, &re) {
			t.Fatalf("error %v is not an ARM response error", err)
		}
		return re.StatusCode, re.ErrorCode
	}
	list := func() []*armcontainerservice.MaintenanceConfiguration {
		var out []*armcontainerservice.MaintenanceConfiguration
		pager := client.NewListByManagedClusterPager(clusterRG, cluster, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Value...)
		}
		return out
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("a new cluster lists %d configurations", len(got))
	}
	if _, err := client.Get(ctx, clusterRG, cluster, "aksManagedNodeOSUpgradeSchedule", nil); err == nil {
		t.Fatal("a missing configuration was found")
	} else if code, _ := status(err); code != http.StatusNotFound {
		t.Fatalf("a missing configuration: HTTP %d, want 404", code)
	}
	window := armcontainerservice.MaintenanceConfiguration{Properties: &armcontainerservice.MaintenanceConfigurationProperties{
		MaintenanceWindow: &armcontainerservice.MaintenanceWindow{
			Schedule:      &armcontainerservice.Schedule{Weekly: &armcontainerservice.WeeklySchedule{IntervalWeeks: ptr[int32](1), DayOfWeek: ptr(armcontainerservice.WeekDayMonday)}},
			DurationHours: ptr[int32](4), StartTime: ptr("02:00")}}}
	put, err := client.CreateOrUpdate(ctx, clusterRG, cluster, "aksManagedNodeOSUpgradeSchedule", window, nil)
	if err != nil {
		t.Fatal(err)
	}
	if deref(put.ID) != clusterID+"/maintenanceConfigurations/aksManagedNodeOSUpgradeSchedule" || deref(put.Type) != maintenanceConfigType {
		t.Errorf("PUT answered id %q type %q", deref(put.ID), deref(put.Type))
	}
	got := list()
	if len(got) != 1 || deref(got[0].Name) != "aksManagedNodeOSUpgradeSchedule" {
		t.Fatalf("list after PUT: %d configurations", len(got))
	}
	if sd := got[0].Properties.MaintenanceWindow.StartDate; sd == nil || sd.Format(time.DateOnly) != "2026-12-04" {
		t.Errorf("startDate %v, want the creation date 2026-12-04", sd)
	}
	if _, err := client.CreateOrUpdate(ctx, clusterRG, cluster, "nodeOS", window, nil); err == nil {
		t.Error("a configuration name AKS does not accept was stored")
	} else if code, errCode := status(err); code != http.StatusBadRequest || errCode != "InvalidParameter" {
		t.Errorf("a bad name: HTTP %d %s, want 400 InvalidParameter", code, errCode)
	}
	pager := client.NewListByManagedClusterPager(clusterRG, "other", nil)
	if _, err := pager.NextPage(ctx); err == nil {
		t.Error("another cluster's configurations were listed")
	} else if code, errCode := status(err); code != http.StatusNotFound || errCode != "ResourceNotFound" {
		t.Errorf("another cluster: HTTP %d %s, want 404 ResourceNotFound", code, errCode)
	}
	if _, err := client.Delete(ctx, clusterRG, cluster, "aksManagedNodeOSUpgradeSchedule", nil); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Errorf("%d configurations after DELETE", len(got))
	}
}
