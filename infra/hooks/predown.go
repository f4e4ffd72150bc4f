package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

var nodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}

// predown removes karpfunc from the cluster before azd down deletes its
// Azure resources. It refuses while NodeClaims exist: their VMs would be left
// running with nothing to delete them.
func predown(ctx context.Context, getenv func(string) string) error {
	env, err := required(getenv, postdeployOutputs...)
	if err != nil {
		return err
	}
	arm, err := newARM()
	if err != nil {
		return err
	}
	getter, cleanup, err := clusterAccess(ctx, arm, env)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg, err := getter.ToRESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := dyn.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil && !isNoCRD(err) {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	if err == nil && len(list.Items) > 0 {
		return fmt.Errorf("%d NodeClaims still exist (first: %s): delete your NodePools (kubectl delete nodepools --all) and wait until kubectl get nodeclaims is empty, so karpfunc deletes their VMs before it is removed",
			len(list.Items), list.Items[0].GetName())
	}
	hc := new(action.Configuration)
	logf := func(format string, v ...any) { fmt.Fprintf(os.Stderr, "helm: "+format+"\n", v...) }
	if err := hc.Init(getter, env[envNamespace], "secret", logf); err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	un := action.NewUninstall(hc)
	un.Wait = true
	un.Timeout = 5 * time.Minute
	if _, err := un.Run(releaseName); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("helm uninstall %s: %w", releaseName, err)
	}
	fmt.Fprintf(os.Stderr, "karpfunc: relay removed from %s; the CRDs stay (kubectl delete crd nodepools.karpenter.sh nodeclaims.karpenter.sh aksnodeclasses.karpenter.azure.com)\n", env[envClusterName])
	return nil
}

// isNoCRD: the NodeClaim CRD is not installed (nothing to wait for).
func isNoCRD(err error) bool {
	var se interface{ Status() metav1.Status }
	return errors.As(err, &se) && se.Status().Code == 404
}
