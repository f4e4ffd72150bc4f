package armemulator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v8"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/pkg/azure"
)

func instanceViewStatus(t *testing.T, vms *armcompute.VirtualMachinesClient, name string) *armcompute.InstanceViewStatus {
	t.Helper()
	got, err := vms.Get(context.Background(), rg, name, &armcompute.VirtualMachinesClientGetOptions{Expand: ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties.InstanceView == nil || len(got.Properties.InstanceView.Statuses) == 0 {
		t.Fatalf("GET ?$expand=instanceView returned no instance view statuses")
	}
	return got.Properties.InstanceView.Statuses[0]
}

// TestVMCreateDelayAndNICReadiness: a VM referencing a NIC still being
// created is refused as ARM refuses it (429 RetryableError,
// ReferencedResourceNotProvisioned); VM creates take VMCreateDelay, NICs
// OpDelay; the instance view reports the provisioning state.
func TestVMCreateDelayAndNICReadiness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := start(t, Options{OpDelay: time.Second, VMCreateDelay: time.Minute, Clock: clk})
	vms, nics := clients(t, s)
	ctx := context.Background()
	if _, err := nics.BeginCreateOrUpdate(ctx, rg, "n", nicBody(), nil); err != nil {
		t.Fatal(err)
	}
	nicID := azure.NICResourceID(sub, rg, "n")
	_, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(nicID, ""), nil)
	var re *azcore.ResponseError
	if !strings.Contains(errString(err), "ReferencedResourceNotProvisioned") || !errors.As(err, &re) ||
		re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != "RetryableError" {
		t.Fatalf("VM PUT with its NIC still Updating: %v; want 429 RetryableError naming ReferencedResourceNotProvisioned", err)
	}
	clk.Step(time.Second)
	if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(nicID, ""), nil); err != nil {
		t.Fatalf("VM PUT once the NIC succeeded: %v", err)
	}
	if st := instanceViewStatus(t, vms, "vm-1"); *st.Code != "ProvisioningState/creating" {
		t.Errorf("instance view right after the PUT: %s", *st.Code)
	}
	clk.Step(59 * time.Second)
	if st := instanceViewStatus(t, vms, "vm-1"); *st.Code != "ProvisioningState/creating" {
		t.Errorf("instance view before VMCreateDelay: %s", *st.Code)
	}
	clk.Step(time.Second)
	if st := instanceViewStatus(t, vms, "vm-1"); *st.Code != "ProvisioningState/succeeded" {
		t.Errorf("instance view after VMCreateDelay: %s", *st.Code)
	}
	got, err := vms.Get(ctx, rg, "vm-1", nil)
	if err != nil || got.Properties.InstanceView != nil {
		t.Errorf("GET without $expand: instance view %v, %v; want none", got.Properties.InstanceView, err)
	}
}

// TestInstanceViewOfFailedCreate: the error of a create that ended Failed
// is in the instance view, as ProvisioningState/failed/<code>.
func TestInstanceViewOfFailedCreate(t *testing.T) {
	s := start(t, Options{OpDelay: 10 * time.Millisecond, Faults: []Rule{{Operation: OpPutVM, Code: "ZonalAllocationFailed",
		Message: "Allocation failed. We do not have sufficient capacity in this zone.", Async: true}}})
	vms, nics := clients(t, s)
	ctx := context.Background()
	np, _ := nics.BeginCreateOrUpdate(ctx, rg, "n", nicBody(), nil)
	if _, err := np.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := vms.BeginCreateOrUpdate(ctx, rg, "vm-1", vmBody(azure.NICResourceID(sub, rg, "n"), ""), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	st := instanceViewStatus(t, vms, "vm-1")
	if *st.Code != "ProvisioningState/failed/ZonalAllocationFailed" || *st.Level != armcompute.StatusLevelTypesError ||
		!strings.Contains(*st.Message, "sufficient capacity") {
		t.Errorf("instance view of the failed create: %s %s %q", *st.Code, *st.Level, *st.Message)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
