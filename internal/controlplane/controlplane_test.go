package controlplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpfunc/karpfunc/internal/tools"
	"github.com/karpfunc/karpfunc/pkg/apis"
	"github.com/karpfunc/karpfunc/pkg/apis/v1beta1"
)

// binDir builds the control plane binaries if needed (first run only). It
// skips the test under -short (`make unit`): every caller starts processes.
func binDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	root, err := tools.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := tools.EnsureBinaries(t.Context(), root, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// processLog is where process output goes: set KARPFUNC_CONTROLPLANE_LOG=1 to
// see it; errors quote the last lines either way.
func processLog() io.Writer {
	if os.Getenv("KARPFUNC_CONTROLPLANE_LOG") != "" {
		return os.Stderr
	}
	return nil
}

// eventually polls f until it returns nil or timeout passes.
func eventually(t *testing.T, c *ControlPlane, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var last error
	for {
		if last = f(ctx); last == nil {
			return
		}
		if err := c.Err(); err != nil {
			t.Fatalf("%s: control plane process died: %v", what, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func TestControlPlane(t *testing.T) {
	bins := binDir(t)
	began := time.Now()
	cp, err := Start(t.Context(), Options{
		BinDir: bins, Log: processLog(),
		Kwok: true, ControllerManager: true, Scheduler: true, InstallCRDs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane (etcd, apiserver, controller-manager, scheduler, kwok, CRDs, default SA) ready in %s", time.Since(began).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})

	kc, err := client.New(cp.RESTConfig(), client.Options{Scheme: apis.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("kubeconfig file reaches the API server", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: apis.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: "kube-system"}, ns); err != nil {
			t.Fatalf("reading namespace kube-system through %s: %v", cp.KubeconfigPath(), err)
		}
	})

	t.Run("AKSNodeClass validation", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			spec    v1beta1.AKSNodeClassSpec
			wantErr string // "" = accepted
		}{
			{name: "defaults", spec: v1beta1.AKSNodeClassSpec{}},
			{name: "disk 30GB", spec: v1beta1.AKSNodeClassSpec{OSDiskSizeGB: ptr.To[int32](30)}},
			{name: "fipsMode", spec: v1beta1.AKSNodeClassSpec{FIPSMode: ptr.To(v1beta1.FIPSModeFIPS)},
				wantErr: "spec.fipsMode: FIPS is not supported by karpfunc"},
			{name: "disk too small", spec: v1beta1.AKSNodeClassSpec{OSDiskSizeGB: ptr.To[int32](29)},
				wantErr: "spec.osDiskSizeGB: Invalid value: 29: spec.osDiskSizeGB in body should be greater than or equal to 30"},
			{name: "disk too big", spec: v1beta1.AKSNodeClassSpec{OSDiskSizeGB: ptr.To[int32](4096)},
				wantErr: "spec.osDiskSizeGB in body should be less than or equal to 2048"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				nc := &v1beta1.AKSNodeClass{
					ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))},
					Spec:       tc.spec,
				}
				err := kc.Create(t.Context(), nc)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("create rejected: %v", err)
					}
					if nc.Spec.OSDiskSizeGB == nil {
						t.Fatalf("created AKSNodeClass has no osDiskSizeGB: the CRD default did not apply")
					}
					return
				}
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("create error = %v; want Invalid containing %q", err, tc.wantErr)
				}
			})
		}
	})

	t.Run("NodePool", func(t *testing.T) {
		np := &karpv1.NodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "general"},
			Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "defaults"},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
				},
			}}},
		}
		if err := kc.Create(t.Context(), np); err != nil {
			t.Fatalf("creating NodePool: %v", err)
		}
		// The CRD defaults prove karpenter's schema (not a pruned stand-in)
		// is installed.
		if np.Spec.Disruption.ConsolidationPolicy == "" {
			t.Fatalf("NodePool came back without the CRD's consolidationPolicy default: %+v", np.Spec.Disruption)
		}
		bad := np.DeepCopy()
		bad.ObjectMeta = metav1.ObjectMeta{Name: "bad"}
		bad.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
			{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}},
		}
		if err := kc.Create(t.Context(), bad); !apierrors.IsInvalid(err) {
			t.Fatalf("NodePool requiring the restricted label %s: err = %v; want Invalid", karpv1.NodePoolLabelKey, err)
		}
	})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "kwok-node-0",
		Annotations: map[string]string{KwokNodeAnnotation: KwokNodeAnnotationValue},
		Labels:      map[string]string{corev1.LabelHostname: "kwok-node-0", "type": "kwok"},
	}}
	// Not annotated, so kwok must leave it alone.
	unmanaged := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged-node"}}
	t.Run("kwok makes annotated nodes Ready", func(t *testing.T) {
		for _, n := range []*corev1.Node{node, unmanaged} {
			if err := kc.Create(t.Context(), n); err != nil {
				t.Fatalf("creating node %s: %v", n.Name, err)
			}
		}
		eventually(t, cp, time.Minute, "node Ready", func(ctx context.Context) error {
			n := &corev1.Node{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
				return err
			}
			if !nodeReady(n) {
				return fmt.Errorf("node %s not Ready: %+v", n.Name, n.Status.Conditions)
			}
			// The node lifecycle controller lifts the not-ready taint once
			// Ready, which the scheduler needs.
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeNotReady {
					return fmt.Errorf("node %s still has taint %s", n.Name, taint.Key)
				}
			}
			return nil
		})
		n := &corev1.Node{}
		if err := kc.Get(t.Context(), client.ObjectKeyFromObject(unmanaged), n); err != nil {
			t.Fatal(err)
		}
		if nodeReady(n) {
			t.Fatalf("kwok made node %s Ready without the %s annotation", n.Name, KwokNodeAnnotation)
		}
	})

	// A kubelet renews its node's Lease every 10 s; the node lifecycle
	// controller marks a node Unknown (and its pods NotReady, which PDBs
	// then count as unhealthy) once neither Lease nor status moved for
	// its 50 s grace period. kwok must keep up the same heartbeat.
	t.Run("kwok renews the node's Lease like a kubelet", func(t *testing.T) {
		var first *metav1.MicroTime
		eventually(t, cp, 30*time.Second, "node Lease renewed", func(ctx context.Context) error {
			lease := &coordinationv1.Lease{}
			if err := kc.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: node.Name}, lease); err != nil {
				return fmt.Errorf("node %s has no Lease in %s: %w", node.Name, corev1.NamespaceNodeLease, err)
			}
			if lease.Spec.RenewTime == nil || lease.Spec.HolderIdentity == nil {
				return fmt.Errorf("node Lease %s has no holder or renew time: %+v", lease.Name, lease.Spec)
			}
			if first == nil {
				first = lease.Spec.RenewTime
				return fmt.Errorf("node Lease %s renewed at %s; waiting for the next renewal", lease.Name, first.Format(time.RFC3339))
			}
			if !lease.Spec.RenewTime.After(first.Time) {
				return fmt.Errorf("node Lease %s not renewed since %s", lease.Name, first.Format(time.RFC3339))
			}
			return nil
		})
	})

	labels := map[string]string{"app": "web"}
	t.Run("Deployment pods are scheduled and Running", func(t *testing.T) {
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: corev1.NamespaceDefault},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}
		if err := kc.Create(t.Context(), dep); err != nil {
			t.Fatalf("creating Deployment: %v", err)
		}
		eventually(t, cp, 2*time.Minute, "3 pods Running on the kwok node", func(ctx context.Context) error {
			pods := &corev1.PodList{}
			if err := kc.List(ctx, pods, client.InNamespace(corev1.NamespaceDefault), client.MatchingLabels(labels)); err != nil {
				return err
			}
			running := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName == node.Name && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					running++
				}
			}
			if running != 3 {
				return fmt.Errorf("%d of %d pods Running on %s", running, len(pods.Items), node.Name)
			}
			return nil
		})
		eventually(t, cp, time.Minute, "Deployment available", func(ctx context.Context) error {
			d := &appsv1.Deployment{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(dep), d); err != nil {
				return err
			}
			if d.Status.AvailableReplicas != 3 {
				return fmt.Errorf("deployment has %d available replicas", d.Status.AvailableReplicas)
			}
			return nil
		})
	})

	t.Run("disruption controller maintains PDB status", func(t *testing.T) {
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: corev1.NamespaceDefault},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(2)),
				Selector:     &metav1.LabelSelector{MatchLabels: labels},
			},
		}
		if err := kc.Create(t.Context(), pdb); err != nil {
			t.Fatalf("creating PDB: %v", err)
		}
		eventually(t, cp, time.Minute, "PDB status", func(ctx context.Context) error {
			got := &policyv1.PodDisruptionBudget{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
				return err
			}
			s := got.Status
			if s.ObservedGeneration != got.Generation || s.ExpectedPods != 3 || s.CurrentHealthy != 3 || s.DesiredHealthy != 2 || s.DisruptionsAllowed != 1 {
				return fmt.Errorf("PDB status %+v; want 3 expected/healthy, 2 desired, 1 disruption allowed", s)
			}
			return nil
		})
	})

	t.Run("evictions honour the PDB and kwok completes pod deletion", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(cp.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		pods := &corev1.PodList{}
		if err := kc.List(t.Context(), pods, client.InNamespace(corev1.NamespaceDefault), client.MatchingLabels(labels)); err != nil || len(pods.Items) == 0 {
			t.Fatalf("listing pods: %d, %v", len(pods.Items), err)
		}
		victim := pods.Items[0]
		setMinAvailable := func(n int32, wantAllowed int32) {
			t.Helper()
			pdb := &policyv1.PodDisruptionBudget{}
			if err := kc.Get(t.Context(), client.ObjectKey{Namespace: corev1.NamespaceDefault, Name: "web"}, pdb); err != nil {
				t.Fatal(err)
			}
			pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(n))
			if err := kc.Update(t.Context(), pdb); err != nil {
				t.Fatal(err)
			}
			eventually(t, cp, time.Minute, "PDB disruptionsAllowed", func(ctx context.Context) error {
				got := &policyv1.PodDisruptionBudget{}
				if err := kc.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
					return err
				}
				if got.Status.ObservedGeneration != got.Generation || got.Status.DisruptionsAllowed != wantAllowed {
					return fmt.Errorf("PDB status %+v; want %d disruptions allowed", got.Status, wantAllowed)
				}
				return nil
			})
		}
		evict := func() error {
			return cs.PolicyV1().Evictions(victim.Namespace).Evict(t.Context(), &policyv1.Eviction{
				ObjectMeta: metav1.ObjectMeta{Name: victim.Name, Namespace: victim.Namespace},
			})
		}

		setMinAvailable(3, 0)
		if err := evict(); !apierrors.IsTooManyRequests(err) {
			t.Fatalf("evicting %s with no disruptions allowed: err = %v; want 429 TooManyRequests", victim.Name, err)
		}
		setMinAvailable(2, 1)
		if err := evict(); err != nil {
			t.Fatalf("evicting %s with a disruption allowed: %v", victim.Name, err)
		}
		eventually(t, cp, time.Minute, "evicted pod gone and replaced", func(ctx context.Context) error {
			p := &corev1.Pod{}
			if err := kc.Get(ctx, client.ObjectKeyFromObject(&victim), p); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s still exists (err %v, deletionTimestamp %v)", victim.Name, err, p.DeletionTimestamp)
			}
			d := &appsv1.Deployment{}
			if err := kc.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceDefault, Name: "web"}, d); err != nil {
				return err
			}
			if d.Status.AvailableReplicas != 3 {
				return fmt.Errorf("deployment has %d available replicas", d.Status.AvailableReplicas)
			}
			return nil
		})
	})

	// White-box: the processes Start launched, to prove Stop ends them all.
	var pids []int
	for _, p := range cp.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	dir := cp.Dir()
	t.Run("Stop ends every process and removes the temp dir", func(t *testing.T) {
		if len(pids) != 5 {
			t.Fatalf("started %d processes; want 5", len(pids))
		}
		began := time.Now()
		stopped = true
		if err := cp.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("stopped in %s", time.Since(began).Round(time.Millisecond))
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d still exists after Stop (kill 0: %v)", pid, err)
			}
		}
		if kids := children(t); len(kids) > 0 {
			t.Errorf("child processes remain after Stop: %v", kids)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("temp dir %s still there after Stop: %v", dir, err)
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
		if err := cp.Err(); err != nil {
			t.Errorf("Err() after Stop = %v; a stopped process is not a failure", err)
		}
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// children lists processes whose parent is this test binary.
func children(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to list child processes: %v", err)
	}
	me := os.Getpid()
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited while we looked
		}
		// pid (comm) state ppid ...; comm may contain spaces, so split after ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(me) {
			out = append(out, e.Name()+" "+s[strings.IndexByte(s, '(')+1:strings.LastIndexByte(s, ')')])
		}
	}
	return out
}

// A process that dies during Start fails Start with its own last words, and
// nothing is left behind.
func TestStartReportsEarlyExit(t *testing.T) {
	bins := binDir(t)
	// A temp dir of its own: other packages' tests start control planes
	// in parallel (go test runs packages side by side), and their dirs
	// must not count as left behind by this Start.
	t.Setenv("TMPDIR", t.TempDir())
	before := tempDirs(t)
	_, err := Start(t.Context(), Options{BinDir: bins, ExtraAPIServerFlags: []string{"--no-such-flag=1"}})
	if err == nil {
		t.Fatal("Start succeeded with an unknown kube-apiserver flag")
	}
	for _, want := range []string{"waiting for kube-apiserver /readyz", "kube-apiserver exit status", "unknown flag: --no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes remain after failed Start: %v", kids)
	}
	if after := tempDirs(t); len(after) > len(before) {
		t.Errorf("failed Start left temp dirs: before %v, after %v", before, after)
	}
}

// helperEnv makes the test binary, run by TestChildrenDieWithParent, start a
// control plane, report it, and wait to be killed.
const helperEnv = "KARPFUNC_CONTROLPLANE_HELPER"

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper for TestChildrenDieWithParent")
	}
	cp, err := Start(t.Context(), Options{BinDir: os.Getenv("BIN_DIR"), Scheduler: true})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	var pids []string
	for _, p := range cp.procs {
		pids = append(pids, strconv.Itoa(p.cmd.Process.Pid))
	}
	fmt.Printf("READY %s %s\n", cp.Dir(), strings.Join(pids, ","))
	select {} // until SIGKILL
}

// A test binary that is SIGKILLed (a timeout, a crash, Ctrl-\) cannot run
// Stop; the parent-death signal must take its children down anyway.
func TestChildrenDieWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signals are Linux-only")
	}
	bins := binDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"=1", "BIN_DIR="+bins)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) != 3 || fields[0] != "READY" {
		t.Fatalf("helper did not start a control plane: %q, %v", line, err)
	}
	dir, pidList := fields[1], strings.Split(fields[2], ",")
	// Nobody ran Stop, so the temp dir is ours to remove.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if len(pidList) != 3 {
		t.Fatalf("helper started %d processes; want 3 (etcd, apiserver, scheduler)", len(pidList))
	}
	// Should the parent-death signal fail, do not leave the orphans running.
	t.Cleanup(func() {
		for _, s := range pidList {
			if pid, err := strconv.Atoi(s); err == nil && alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range pidList {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived its SIGKILLed parent by 10s", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs; a zombie (dead, waiting for a reaper that a
// container's PID 1 may never be) counts as dead.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func tempDirs(t *testing.T) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "karpfunc-controlplane-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestStartValidatesOptions(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{name: "no BinDir", opts: Options{}, wantErr: "Options.BinDir is required"},
		{name: "no etcd", opts: Options{BinDir: empty}, wantErr: filepath.Join(empty, "etcd") + " is not an executable file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, err := Start(t.Context(), tc.opts)
			if err == nil {
				_ = cp.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}
