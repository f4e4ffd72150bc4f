package provisioning_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/messages"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// launchChecks does what the scheduled Lifecycle launch checks of NodeClaim
// name do: the lifecycle controller, launching through w's launcher, moves
// its launch on at each time the previous look asked for, until nothing is
// left to look at. It returns the NodeClaim as stored then (nil once
// deleted) and how many looks it took.
func launchChecks(t *testing.T, w world, name string) (*karpv1.NodeClaim, int) {
	t.Helper()
	ctx := context.Background()
	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, ClusterName: "test", Logger: slog.New(slog.DiscardHandler),
		Launch: &lifecycle.LaunchOptions{Creator: w.launcher, Catalog: w.cat, CheckInterval: 100 * time.Millisecond}})
	deadline := time.Now().Add(time.Minute)
	for looks := 1; time.Now().Before(deadline); looks++ {
		nc := &karpv1.NodeClaim{}
		if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				return nil, looks - 1
			}
			t.Fatal(err)
		}
		res, err := lc.Check(ctx, name, string(nc.UID))
		if err != nil {
			t.Fatalf("launch check %d of NodeClaim %s: %v", looks, name, err)
		}
		if res.RequeueAt.IsZero() {
			if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
				if client.IgnoreNotFound(err) == nil {
					return nil, looks
				}
				t.Fatal(err)
			}
			return nc, looks
		}
		time.Sleep(time.Until(res.RequeueAt))
	}
	t.Fatalf("NodeClaim %s: launch still running after a minute of launch checks", name)
	return nil, 0
}

// asksLaunchOf reports whether a pass's outcome holds a launch check of
// nc, due now: the continuation that has lifecycle launch it.
func asksLaunchOf(res provisioning.Result, nc *karpv1.NodeClaim) bool {
	for _, cont := range res.Outcome.Continuations {
		if cont.Type() == messages.TypeNodeClaimLaunch && strings.HasPrefix(cont.ID(), "nodeclaim/"+string(nc.UID)+"/launch/") {
			return true
		}
	}
	return false
}
