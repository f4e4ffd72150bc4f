package lifecycle_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/claimnames"
	"github.com/karpfunc/karpfunc/pkg/lifecycle"
	"github.com/karpfunc/karpfunc/pkg/offerings"
)

// TestTerminateRetiresTheName: the pass that created a NodeClaim died
// before it raised the name counter past the claim's generation. Termination
// must raise it before it releases the finalizer (the moment the name is
// free at the API server), or the next pass for the same pods would derive
// the same name again.
func TestTerminateRetiresTheName(t *testing.T) {
	w := start(t)
	ctx := context.Background()
	name := fmt.Sprintf("retire-%d", time.Now().UnixNano()%1e9)
	w.deletingClaim(t, ctx, name, nil)

	counter := claimnames.NewCounter(w.kube, offerings.DefaultNamespace, clock.RealClock{})
	generation, err := counter.Read(ctx) // the counter as the crashed pass left it
	if err != nil {
		t.Fatal(err)
	}
	nc := &karpv1.NodeClaim{}
	if err := w.kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	claimnames.SetGeneration(nc, generation)
	if err := w.kube.Update(ctx, nc); err != nil {
		t.Fatal(err)
	}

	lc := lifecycle.New(lifecycle.Options{Kube: w.kube, Deleter: w.launcher, Evictor: w.evictor, Logger: slog.New(slog.DiscardHandler)})
	if res, err := w.terminateAcrossDelete(t, ctx, lc, name); err != nil || !res.Finished {
		t.Fatalf("Terminate = %+v, %v; want finished", res, err)
	}
	after, err := counter.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after <= generation {
		t.Fatalf("name counter %d after terminating a claim of generation %d; want it past the generation", after, generation)
	}
}
