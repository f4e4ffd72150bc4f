package azure_test

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/cloudprovider"
)

// TestBeginNeverWaits: with creates that take an hour, BeginNIC, BeginVM
// and Status each answer at once; Status reports the VM Creating, and a
// throttled Status is an error that says nothing about the VM.
func TestBeginNeverWaits(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{OpDelay: time.Hour})
	l := newLauncher(t, emu, "c", func(o *azure.Options) { o.Retry = policy.RetryOptions{MaxRetries: -1} })
	c := ctx(t)
	req := request("node-b")
	start := time.Now()
	nic, err := l.BeginNIC(c, req)
	if err != nil || nic.State != azure.StateUpdating || nic.ID != azure.NICResourceID(testSub, testRG, azure.NICName("node-b")) {
		t.Fatalf("BeginNIC = %+v, %v; want the NIC Updating", nic, err)
	}
	if err := l.BeginVM(c, req, nic.ID); !azure.IsThrottled(err) {
		t.Fatalf("BeginVM before the NIC succeeded: %v; want ARM's retryable refusal", err)
	}
	// An emulator with a fast NIC and an hour-long VM create.
	emu = startEmulator(t, armemulator.Options{OpDelay: 10 * time.Millisecond, VMCreateDelay: time.Hour})
	l = newLauncher(t, emu, "c", func(o *azure.Options) { o.Retry = policy.RetryOptions{MaxRetries: -1} })
	for {
		if nic, err = l.BeginNIC(c, req); err != nil {
			t.Fatal(err)
		}
		if nic.State == azure.StateSucceeded {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.BeginVM(c, req, nic.ID); err != nil {
		t.Fatalf("BeginVM: %v", err)
	}
	inst, err := l.Status(c, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	if inst.State != azure.StateCreating || inst.Failure != nil {
		t.Fatalf("Status = %+v; want Creating", inst)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("begin and status took %s: something waited for the create", took)
	}
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpGetVM, Code: azure.CodeTooManyRequests, RetryAfter: 2 * time.Second})
	if _, err := l.Status(c, "node-b"); !azure.IsThrottled(err) || azure.RetryAfter(err) != 2*time.Second {
		t.Errorf("throttled Status: %v; want IsThrottled with Retry-After 2s", err)
	}
	if n := len(emu.VMs()); n != 1 || emu.Counters().VMDeletes != 0 {
		t.Errorf("%d VMs, %d deletes after a throttled Status; want the creating VM untouched", n, emu.Counters().VMDeletes)
	}
}

// TestStatusOfFailedCreate: Status carries the failed create's ARM error.
func TestStatusOfFailedCreate(t *testing.T) {
	emu := startEmulator(t, armemulator.Options{})
	emu.Faults().Add(armemulator.Rule{Operation: armemulator.OpPutVM, Code: azure.CodeAllocationFailed, Message: "Allocation failed.", Async: true})
	l := newLauncher(t, emu, "c")
	c := ctx(t)
	req := request("node-f")
	var nic azure.NICStatus
	for nic.State != azure.StateSucceeded {
		var err error
		if nic, err = l.BeginNIC(c, req); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.BeginVM(c, req, nic.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	inst, err := l.Status(c, "node-f")
	if err != nil {
		t.Fatal(err)
	}
	if ae, ok := azure.AsARMError(inst.Failure); inst.State != azure.StateFailed || !ok || !azure.IsCapacityError(inst.Failure) ||
		!cloudprovider.IsInsufficientCapacity(inst.Failure) || ae.Message != "Allocation failed." {
		t.Fatalf("Status = %+v (failure %v); want Failed with AllocationFailed and ARM's message", inst, inst.Failure)
	}
	if err := l.BeginDelete(c, "node-f"); err != nil {
		t.Fatal(err)
	}
	if inst, err := l.Status(c, "node-f"); err == nil && inst.State != azure.StateDeleting {
		t.Errorf("after BeginDelete: %s; want Deleting or gone", inst.State)
	}
}
