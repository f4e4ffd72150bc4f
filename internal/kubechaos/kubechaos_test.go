package kubechaos_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/kubechaos"
	"github.com/karpfunc/karpfunc/internal/testenv"
)

// TestAPIServerAnswersWithTheInjectedFailure: through the real API server,
// a matching write fails with the code the rule asks for (the client sees
// a Conflict or TooManyRequests StatusError), other writes pass, and after
// Stop nothing fails.
func TestAPIServerAnswersWithTheInjectedFailure(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := context.Background()
	in, err := kubechaos.Start(ctx, kube, kubechaos.Options{Seed: 1, Rules: []kubechaos.Rule{
		{Kind: "Conflict(409)", Resource: "configmaps", Operation: "UPDATE", Rate: 1, Code: 409},
		{Kind: "APFRejected(429)", Resource: "configmaps", Operation: "CREATE", Rate: 1, Code: 429},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background(), kube) })

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}
	// client-go retries a 429 that carries Retry-After; this one carries
	// none, so the first answer is what the caller sees.
	if err := kube.Create(ctx, cm); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("create: %v; want TooManyRequests", err)
	}
	in.Stop()
	if err := kube.Create(ctx, cm); err != nil {
		t.Fatalf("create after Stop: %v", err)
	}
	got := in.Counts()
	if got["APFRejected(429)"] != 1 || len(in.Schedule()) != 1 {
		t.Errorf("counts %v, schedule %v; want one 429", got, in.Schedule())
	}
}

// TestConflictReachesTheClient: an UPDATE matching a 409 rule is refused
// as a write conflict.
func TestConflictReachesTheClient(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y", Namespace: "default"}}
	if err := kube.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	in, err := kubechaos.Start(ctx, kube, kubechaos.Options{Seed: 1, Rules: []kubechaos.Rule{
		{Kind: "Conflict(409)", Resource: "configmaps", Operation: "UPDATE", Rate: 1, Code: 409},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background(), kube) })
	cm.Data = map[string]string{"a": "b"}
	if err := kube.Update(ctx, cm); !apierrors.IsConflict(err) {
		t.Fatalf("update: %v; want Conflict", err)
	}
}
