package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/events"
	"github.com/karpfunc/karpfunc/pkg/provisioning"
)

// BenchmarkPassNominations: one pass of a cold instance placing 300 new
// pods on new NodeClaims, through a client limited as the handler's (50
// requests a second, burst 100: functions/config.go). With Karpenter's
// nomination limiter the pass writes about ten Nominated events; without
// a limit (the same dedupe), one per pod, each a read and a create.
func BenchmarkPassNominations(b *testing.B) {
	const podsPerPass = 300
	w := newWorld(b, limitsCatalog)
	cfg := rest.CopyConfig(w.cp.RESTConfig())
	cfg.QPS, cfg.Burst = 50, 100
	handlerKube := testenv.Client(b, cfg)
	ctx := context.Background()
	pools := 0 // b.Run runs its function more than once; pool names stay unique
	for _, bc := range []struct {
		name    string
		limiter func() flowcontrol.PassiveRateLimiter // nil: the Provisioner's own (Karpenter's)
	}{
		{name: "karpenter-limiter"},
		{name: "unlimited", limiter: func() flowcontrol.PassiveRateLimiter { return flowcontrol.NewFakeAlwaysRateLimiter() }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			unwritten := 0
			for range b.N {
				b.StopTimer()
				pools++
				pool := fmt.Sprintf("bench-%s-%d", bc.name, pools)
				namesPool(b, ctx, w.kube, pool)
				for j := range podsPerPass {
					stuckPod(b, ctx, w.kube, pool, fmt.Sprintf("%s-%d", pool, j), time.Now())
				}
				opts := provisioning.Options{Kube: handlerKube, Catalog: w.cat, ClusterName: "test",
					Logger: slog.New(slog.DiscardHandler)}
				if bc.limiter != nil {
					opts.NominationLimiter = bc.limiter()
				}
				prov := provisioning.New(opts)
				// The handler's client starts each pass with a full burst.
				time.Sleep(2 * time.Second)
				b.StartTimer()
				res, err := prov.Provision(ctx)
				if err != nil {
					b.Fatal(err)
				}
				unwritten += refused(res, events.ReasonNominated)
			}
			b.ReportMetric(float64(podsPerPass)-float64(unwritten)/float64(b.N), "nominated/pass")
		})
	}
}
