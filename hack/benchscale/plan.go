package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// benchPlan writes the cluster as `kubectl get nodepools,aksnodeclasses,
// nodeclaims,nodes,pods,pdb -A -o json` and `-o yaml` print it (a v1 List,
// items with their kind and apiVersion, managedFields left out as kubectl
// does by default; JSON indented by four spaces as kubectl's printer, YAML
// by sigs.k8s.io/yaml as kubectl's) and times `karpfunc plan` on each.
func benchPlan(ctx context.Context, kube client.Client, root, dir string) error {
	items := []any{}
	for _, l := range []client.ObjectList{&karpv1.NodePoolList{}, &v1beta1.AKSNodeClassList{}, &karpv1.NodeClaimList{},
		&corev1.NodeList{}, &corev1.PodList{}, &policyv1.PodDisruptionBudgetList{}} {
		if err := kube.List(ctx, l); err != nil {
			return err
		}
		err := meta.EachListItem(l, func(o runtime.Object) error {
			obj := o.(client.Object)
			gvk, err := apiutil.GVKForObject(obj, apis.Scheme)
			if err != nil {
				return err
			}
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			obj.SetManagedFields(nil)
			items = append(items, obj)
			return nil
		})
		if err != nil {
			return err
		}
	}
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]string{"resourceVersion": ""}}
	js, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return err
	}
	ym, err := yaml.Marshal(list)
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "karpfunc")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/karpfunc")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		data []byte
	}{{"cluster.json", js}, {"cluster.yaml", ym}} {
		path := filepath.Join(dir, d.name)
		if err := os.WriteFile(path, d.data, 0o600); err != nil {
			return err
		}
		if err := timePlan(ctx, bin, path, len(d.data)); err != nil {
			return err
		}
	}
	return nil
}

func timePlan(ctx context.Context, bin, path string, size int) error {
	cmd := exec.CommandContext(ctx, bin, "plan", "-f", path, "-o", "json")
	cmd.Stderr = os.Stderr
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("karpfunc plan -f %s: %w", path, err)
	}
	// The child's own high-water mark, read from /proc while it runs: the
	// rusage Maxrss wait4 returns is useless here, because the child is
	// forked from this process, which holds both dumps, and Linux carries
	// the pre-exec memory's high-water mark across exec into ru_maxrss.
	statusPath := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var rss int64
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-ticker.C:
			rss = max(rss, highWaterRSS(statusPath))
		}
	}
	wall := time.Since(start)
	if err != nil {
		return fmt.Errorf("karpfunc plan -f %s: %w", path, err)
	}
	out := stdout.Bytes()
	fmt.Printf("karpfunc plan %-12s (%4d MB) wall %8s  peak RSS %5d MB  (%d bytes of plan)\n", filepath.Base(path), size>>20, wall.Round(time.Millisecond), rss>>20, len(out))
	return nil
}
