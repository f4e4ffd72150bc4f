package provisioning_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/armemulator"
	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/azure"
	"github.com/karpfunc/karpfunc/pkg/catalog"
)

// world is what the provisioning integration tests stand on: a control
// plane with the CRDs, the ARM emulator behind the real launcher, the
// catalog parsed from catalogJSON, and the AKSNodeClass "default".
type world struct {
	cp       *controlplane.ControlPlane
	kube     client.Client
	launcher *azure.Launcher
	arm      *armemulator.Server
	cat      *catalog.Catalog
}

func newWorld(t testing.TB, catalogJSON string) world {
	t.Helper()
	cp := testenv.ControlPlane(t, controlplane.Options{InstallCRDs: true})
	kube := testenv.Client(t, cp.RESTConfig())
	testenv.DefaultServiceAccounts(t, kube, "default")
	arm, launcher := testenv.ARM(t)
	cat, err := catalog.Parse([]byte(catalogJSON))
	if err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(context.Background(), &v1beta1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	return world{cp: cp, kube: kube, launcher: launcher, arm: arm, cat: cat}
}
