package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
	"github.com/karpfunc/karpfunc/pkg/scheduler/scaletest"
)

// benchPlan writes the cluster as `kubectl get nodepools,aksnodeclasses,
// nodeclaims,nodes,pods,pdb -A -o json` and `-o yaml` print it (a v1 List,
// items with their kind and apiVersion, managedFields left out as kubectl
// does by default; JSON indented by four spaces as kubectl's printer, YAML
// by sigs.k8s.io/yaml as kubectl's) and times `karpfunc plan` on each. The
// dumps are written a LIST page at a time: the cluster is never whole in
// this process's memory (at full size the dumps would take many times
// the memory a pass does).
func benchPlan(ctx context.Context, kube client.Client, root, dir string) error {
	paths := []string{filepath.Join(dir, "cluster.json"), filepath.Join(dir, "cluster.yaml")}
	if err := writeDumps(ctx, kube, paths[0], paths[1]); err != nil {
		return err
	}
	bin := filepath.Join(dir, "karpfunc")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/karpfunc")
	build.Dir, build.Stderr = root, os.Stderr
	if err := build.Run(); err != nil {
		return err
	}
	for _, path := range paths {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if err := timePlan(ctx, bin, path, int(info.Size())); err != nil {
			return err
		}
	}
	return nil
}

// writeDumps lists every kind the plan reads, in pages, into a JSON and a
// YAML List file.
func writeDumps(ctx context.Context, kube client.Client, jsonPath, yamlPath string) error {
	jsonFile, err := os.Create(jsonPath)
	if err != nil {
		return err
	}
	defer jsonFile.Close()
	yamlFile, err := os.Create(yamlPath)
	if err != nil {
		return err
	}
	defer yamlFile.Close()
	writers := []*scaletest.ListWriter{scaletest.NewJSONListWriter(jsonFile), scaletest.NewYAMLListWriter(yamlFile)}
	for _, list := range []client.ObjectList{&karpv1.NodePoolList{}, &v1beta1.AKSNodeClassList{}, &karpv1.NodeClaimList{},
		&corev1.NodeList{}, &corev1.PodList{}, &policyv1.PodDisruptionBudgetList{}} {
		if err := dumpKind(ctx, kube, list, writers); err != nil {
			return err
		}
	}
	for _, lw := range writers {
		if err := lw.Close(); err != nil {
			return err
		}
	}
	if err := jsonFile.Close(); err != nil {
		return err
	}
	return yamlFile.Close()
}

// dumpKind lists one kind in pages and adds each item to every writer.
func dumpKind(ctx context.Context, kube client.Client, list client.ObjectList, writers []*scaletest.ListWriter) error {
	for page := (&client.ListOptions{Limit: 5000}); ; {
		if err := kube.List(ctx, list, page); err != nil {
			return err
		}
		err := meta.EachListItem(list, func(o runtime.Object) error {
			return addItem(o.(client.Object), writers)
		})
		if err != nil {
			return err
		}
		if page.Continue = list.GetContinue(); page.Continue == "" {
			return nil
		}
	}
}

func addItem(obj client.Object, writers []*scaletest.ListWriter) error {
	gvk, err := apiutil.GVKForObject(obj, apis.Scheme)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	for _, lw := range writers {
		if err := lw.Add(obj); err != nil {
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
