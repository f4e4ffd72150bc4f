package chart_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/localenv"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/apis"
)

const (
	releaseName = "karpfunc"
	namespace   = "karpfunc-system"
	clientID    = "11111111-2222-3333-4444-555555555555"
	principalID = "66666666-7777-8888-9999-000000000000"
)

// azdValues are the values the azd postdeploy hook passes (infra/hooks).
func azdValues() map[string]any {
	return map[string]any{
		"clusterName":    "prod-weu",
		"serviceBus":     map[string]any{"namespace": "sb-karpfunc-x.servicebus.windows.net", "clientId": clientID},
		"serviceAccount": map[string]any{"name": "karpfunc-relay"},
		"functions":      map[string]any{"principalId": principalID},
	}
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render runs `helm install --dry-run` client-side and returns the objects.
func render(t *testing.T, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	in := action.NewInstall(&action.Configuration{})
	in.DryRun, in.ClientOnly, in.ReleaseName, in.Namespace = true, true, releaseName, namespace
	in.KubeVersion = &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	rel, err := in.Run(loadChart(t), vals)
	if err != nil {
		return nil, err
	}
	return localenv.DecodeObjects([]byte(rel.Manifest), "rendered chart")
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind string, into runtime.Object) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s rendered", kind)
}

func TestLint(t *testing.T) {
	res := action.NewLint().Run([]string{"."}, azdValues())
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("lint: %s", m)
		}
	}
	if len(res.Errors) > 0 {
		t.Errorf("lint errors: %v", res.Errors)
	}
}

func TestRenderAzdValues(t *testing.T) {
	objs, err := render(t, azdValues())
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	find(t, objs, "Deployment", &dep)
	pod := dep.Spec.Template
	if pod.Labels["azure.workload.identity/use"] != "true" {
		t.Errorf("pod labels %v lack azure.workload.identity/use=true", pod.Labels)
	}
	if pod.Spec.ServiceAccountName != "karpfunc-relay" {
		t.Errorf("serviceAccountName = %q", pod.Spec.ServiceAccountName)
	}
	c := pod.Spec.Containers[0]
	if !contains(c.Args, "--cluster-name=prod-weu") {
		t.Errorf("args %v lack --cluster-name=prod-weu", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	want := map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "sb-karpfunc-x.servicebus.windows.net",
		"ServiceBusConnection__clientId": clientID}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
	if c.Image != "ghcr.io/karpfunc/relay:"+loadChart(t).Metadata.AppVersion {
		t.Errorf("image = %q, want the chart's appVersion", c.Image)
	}
	var sa corev1.ServiceAccount
	find(t, objs, "ServiceAccount", &sa)
	if sa.Name != "karpfunc-relay" || sa.Annotations["azure.workload.identity/client-id"] != clientID {
		t.Errorf("ServiceAccount %s annotations %v: want the relay identity's client ID", sa.Name, sa.Annotations)
	}
}

func TestRenderCustomValues(t *testing.T) {
	vals := map[string]any{
		"clusterName":       "dev",
		"localBusURL":       "http://127.0.0.1:7071",
		"image":             map[string]any{"repository": "myreg.azurecr.io/karpfunc/relay", "tag": "v9", "pullPolicy": "Always"},
		"batchIdleDuration": "500ms",
		"batchMaxDuration":  "1m30s",
		"logLevel":          "debug",
		"kubeAPI":           map[string]any{"qps": 5.5, "burst": 10},
		"podLabels":         map[string]any{"team": "platform"},
		"tolerations":       []any{},
		"functions":         map[string]any{"principalId": principalID},
		"otlpEndpoint":      "http://otel-collector.monitoring:4318",
	}
	objs, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	find(t, objs, "Deployment", &dep)
	pod := dep.Spec.Template
	c := pod.Spec.Containers[0]
	if c.Image != "myreg.azurecr.io/karpfunc/relay:v9" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
	}
	for _, a := range []string{"--batch-idle-duration=500ms", "--batch-max-duration=1m30s", "--log-level=debug", "--kube-api-qps=5.5", "--kube-api-burst=10"} {
		if !contains(c.Args, a) {
			t.Errorf("args %v lack %s", c.Args, a)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if want := map[string]string{"KARPFUNC_LOCAL_BUS_URL": "http://127.0.0.1:7071", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.monitoring:4318",
		"OTEL_SERVICE_NAME": "karpfunc-relay"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
	if _, ok := pod.Labels["azure.workload.identity/use"]; ok || pod.Labels["team"] != "platform" {
		t.Errorf("pod labels = %v: want team=platform and no workload identity on the local bus", pod.Labels)
	}
	if len(pod.Spec.Tolerations) != 0 {
		t.Errorf("tolerations = %v, want none", pod.Spec.Tolerations)
	}
}

// TestBadValues: a value of the wrong type or shape fails the install with
// a message that names the value.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(v map[string]any)
		want []string
	}{
		{"defaults only", func(v map[string]any) { clear(v) }, []string{"is required"}},
		{"qps a string", func(v map[string]any) { v["kubeAPI"] = map[string]any{"qps": "fast"} }, []string{"kubeAPI", "qps", "number"}},
		{"burst a fraction", func(v map[string]any) { v["kubeAPI"] = map[string]any{"burst": 1.5} }, []string{"kubeAPI", "burst", "integer"}},
		{"duration in words", func(v map[string]any) { v["batchIdleDuration"] = "1 second" }, []string{"batchIdleDuration"}},
		{"port out of range", func(v map[string]any) { v["healthProbePort"] = 70000 }, []string{"healthProbePort"}},
		{"client ID not a GUID", func(v map[string]any) {
			v["serviceBus"] = map[string]any{"namespace": "x.servicebus.windows.net", "clientId": "relay"}
		}, []string{"serviceBus", "clientId"}},
		{"unknown value", func(v map[string]any) { v["replicas"] = 2 }, []string{"replicas"}},
		{"misspelt nested value", func(v map[string]any) { v["serviceAccount"] = map[string]any{"nmae": "x"} }, []string{"serviceAccount", "nmae"}},
		{"OTLP endpoint not a URL", func(v map[string]any) { v["otlpEndpoint"] = "collector:4318" }, []string{"otlpEndpoint"}},
		{"cluster name too long", func(v map[string]any) { v["clusterName"] = strings.Repeat("c", 129) }, []string{"clusterName"}},
		{"no client ID", func(v map[string]any) {
			v["serviceBus"] = map[string]any{"namespace": "x.servicebus.windows.net"}
		}, []string{"serviceBus.clientId is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := azdValues()
			tc.edit(v)
			_, err := render(t, v)
			if err == nil {
				t.Fatal("rendered without error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// TestCRDsAreTheModules: crds/ holds exactly pkg/apis.CRDFiles, byte for
// byte (regenerate with make generate).
func TestCRDsAreTheModules(t *testing.T) {
	want := apis.CRDFiles()
	got, err := filepath.Glob("crds/*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range got {
		names = append(names, filepath.Base(f))
	}
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(wantNames)
	if !reflect.DeepEqual(names, wantNames) {
		t.Fatalf("crds/ holds %v, want %v: run make generate", names, wantNames)
	}
	for n, w := range want {
		b, err := os.ReadFile(filepath.Join("crds", n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, w) {
			t.Errorf("crds/%s differs from the module's copy: run make generate", n)
		}
	}
}

// TestValuesAreUsed: every value in values.yaml reaches a template, so no
// setting is silently ignored.
func TestValuesAreUsed(t *testing.T) {
	// Bound by the handler's RBAC templates (they name the Functions identity).
	pending := map[string]bool{"functions.principalId": true}
	c := loadChart(t)
	var templates strings.Builder
	for _, tpl := range c.Templates {
		templates.Write(tpl.Data)
	}
	for _, key := range leafKeys("", c.Values) {
		if pending[key] {
			continue
		}
		if !strings.Contains(templates.String(), ".Values."+key) && !usedByParent(templates.String(), key) {
			t.Errorf("value %s is used by no template", key)
		}
	}
}

// usedByParent: a value consumed whole (toYaml .Values.resources) counts.
func usedByParent(templates, key string) bool {
	for i := strings.LastIndex(key, "."); i > 0; i = strings.LastIndex(key[:i], ".") {
		if strings.Contains(templates, ".Values."+key[:i]+" ") || strings.Contains(templates, ".Values."+key[:i]+"\n") {
			return true
		}
	}
	return false
}

func leafKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		key := strings.TrimPrefix(prefix+"."+k, ".")
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && key != "nodeSelector" && key != "resources" {
			out = append(out, leafKeys(key, sub)...)
			continue
		}
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// TestApplyToControlPlane applies the chart's CRDs and rendered manifests
// server-side to a real kube-apiserver, checks that NodePool YAML written for
// NAP is accepted, and that the relay's ServiceAccount may read what it
// watches and write nothing.
func TestApplyToControlPlane(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()
	apply := func(obj *unstructured.Unstructured) {
		t.Helper()
		if err := kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}

	c := loadChart(t)
	for _, crd := range c.CRDObjects() {
		objs, err := localenv.DecodeObjects(crd.File.Data, crd.Filename)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			apply(o)
			name := o.GetName()
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				var got apiextensionsv1.CustomResourceDefinition
				if err := kube.Get(ctx, client.ObjectKey{Name: name}, &got); err != nil {
					return false, err
				}
				for _, cond := range got.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("CRD %s not established: %v", name, err)
			}
		}
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(namespace)
	apply(ns)
	objs, err := render(t, azdValues())
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		if o.GetNamespace() == "" && namespaced(o.GetKind()) {
			o.SetNamespace(namespace)
		}
		apply(o)
		kinds[o.GetKind()] = true
	}
	for _, k := range []string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		if !kinds[k] {
			t.Errorf("the chart rendered no %s", k)
		}
	}

	// Users' NodePool and AKSNodeClass YAML is served by the chart's CRDs.
	example, err := os.ReadFile("../../examples/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	exObjs, err := localenv.DecodeObjects(example, "examples/nodepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range exObjs {
		apply(o)
	}

	relay := "system:serviceaccount:" + namespace + ":karpfunc-relay"
	for _, tc := range []struct {
		group, resource, verb string
		allowed               bool
	}{
		{"", "pods", "list", true},
		{"", "pods", "watch", true},
		{"", "nodes", "watch", true},
		{"karpenter.sh", "nodeclaims", "watch", true},
		{"", "pods", "delete", false},
		{"", "nodes", "update", false},
		{"karpenter.sh", "nodeclaims", "create", false},
		{"karpenter.sh", "nodepools", "update", false},
		{"", "secrets", "get", false},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: relay,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: tc.group, Resource: tc.resource, Verb: tc.verb}}}
		if err := kube.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("relay %s %s.%s: allowed=%v, want %v (%s)", tc.verb, tc.resource, tc.group, sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}
	var dep appsv1.Deployment
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: releaseName + "-karpfunc-relay"}, &dep); err != nil {
		t.Fatalf("the relay Deployment is not in the cluster: %v", err)
	}
}

func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition":
		return false
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
