package provisioning_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// launchChecks does what the scheduled Lifecycle launch checks of NodeClaim
// name do: it reads the stored NodeClaim and moves its launch on at each
// time the previous look asked for, until nothing is left to look at. It
// returns the NodeClaim as stored then (nil once deleted) and how many
// looks it took.
func launchChecks(t *testing.T, p *provisioning.Provisioner, kube client.Client, name string) (*karpv1.NodeClaim, int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for looks := 1; time.Now().Before(deadline); looks++ {
		nc := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return nil, looks - 1
			}
			t.Fatal(err)
		}
		at, err := p.ReconcileLaunch(ctx, nc, false)
		if err != nil {
			t.Fatalf("launch check %d of NodeClaim %s: %v", looks, name, err)
		}
		if at.IsZero() {
			if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
				if client.IgnoreNotFound(err) == nil {
					return nil, looks
				}
				t.Fatal(err)
			}
			return nc, looks
		}
		time.Sleep(time.Until(at))
	}
	t.Fatalf("NodeClaim %s: launch still running after a minute of launch checks", name)
	return nil, 0
}
