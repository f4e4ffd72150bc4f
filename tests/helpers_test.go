package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/pkg/snapshot"
)

// The tests' own clients log nothing through controller-runtime (whose
// unset logger would print a stack trace); the loop's logs are in env.LogPath.
func init() { ctrllog.SetLogger(logr.Discard()) }

// startEnv starts the local loop for one test and stops it at cleanup.
func startEnv(t *testing.T, opts localenv.Options) *localenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	if opts.Progress == nil {
		opts.Progress = testWriter{t}
	}
	env, err := localenv.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the local loop: %v", err)
	}
	t.Cleanup(func() {
		checkSharedWrites(t, env)
		if t.Failed() && env.LogPath != "" {
			if data, err := os.ReadFile(env.LogPath); err == nil {
				lines := strings.Split(string(data), "\n")
				if len(lines) > 150 {
					lines = lines[len(lines)-150:]
				}
				t.Logf("last process log lines (%s):\n%s", env.LogPath, strings.Join(lines, "\n"))
			}
		}
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the local loop: %v", err)
		}
	})
	return env
}

// checkSharedWrites fails the test when a pass wrote to an object its
// snapshot shared with the handler's warm cache (the loop runs the handler
// with KARPFUNC_SNAPSHOT_CHECK_SHARED).
func checkSharedWrites(t *testing.T, env *localenv.Env) {
	t.Helper()
	if env.LogPath == "" {
		return
	}
	data, err := os.ReadFile(env.LogPath)
	if err != nil {
		t.Errorf("reading the loop's log for shared writes: %v", err)
		return
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, snapshot.SharedWriteMessage) {
			t.Errorf("a pass wrote to an object of its snapshot that the warm cache shares:\n%s", line)
			return
		}
	}
}

// startEnvWithNodePool is startEnv with the sample NodePool and
// AKSNodeClass (examples/nodepool.yaml) applied: the setup most tests share.
func startEnvWithNodePool(t *testing.T, opts localenv.Options) *localenv.Env {
	t.Helper()
	env := startEnv(t, opts)
	if _, err := env.ApplyFile(context.Background(), filepath.Join(env.Options.RepoRoot, "examples", "nodepool.yaml")); err != nil {
		t.Fatalf("applying examples/nodepool.yaml: %v", err)
	}
	return env
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// eventually polls cond until it returns true or timeout passes, then fails
// with cond's last explanation.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %s: %s", what, timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func deployment(name string, replicas int32, cpu, memory string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: name, Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}},
				}}},
			},
		},
	}
}

func podsWithLabel(ctx context.Context, kube client.Client, key, value string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{key: value}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

func allRunning(ctx context.Context, kube client.Client, app string, want int) (bool, string) {
	pods, err := podsWithLabel(ctx, kube, "app", app)
	if err != nil {
		return false, err.Error()
	}
	running := 0
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
	}
	return running == want && len(pods) == want, fmt.Sprintf("%s: %d of %d pods running (%d exist)", app, running, want, len(pods))
}

// serverVersion is the local API server's version (1.37.2): the version
// nodes join at and their image is picked for.
func serverVersion(t *testing.T, env *localenv.Env) string {
	t.Helper()
	disco, err := discovery.NewDiscoveryClientForConfig(env.ControlPlane.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	v, err := disco.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(v.GitVersion, "v")
}

// pinGeneralPool narrows examples/nodepool.yaml's "general" NodePool to one
// capacity type and sizes of exactly cpus vCPUs.
func pinGeneralPool(t *testing.T, kube client.Client, capacityType, cpus string) {
	t.Helper()
	ctx := context.Background()
	np := &karpv1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
		t.Fatal(err)
	}
	for i, r := range np.Spec.Template.Spec.Requirements {
		switch r.Key {
		case karpv1.CapacityTypeLabelKey:
			np.Spec.Template.Spec.Requirements[i].Values = []string{capacityType}
		case "karpenter.azure.com/sku-cpu":
			np.Spec.Template.Spec.Requirements[i].Operator, np.Spec.Template.Spec.Requirements[i].Values = corev1.NodeSelectorOpIn, []string{cpus}
		}
	}
	if err := kube.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
}
