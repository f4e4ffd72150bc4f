package chart

import (
	"slices"
	"strings"
	"testing"

	"github.com/karpfunc/karpfunc/pkg/offerings"
)

const principal = "99999999-8888-7777-6666-555555555555"

func localValues() map[string]any {
	return map[string]any{"clusterName": "local", "localBusURL": "http://127.0.0.1:1", "functions": map[string]any{"principalId": principal}}
}

func TestRenderRBAC(t *testing.T) {
	objs, err := Render("karpfunc", "karpfunc", localValues())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{
		"ClusterRole /karpfunc-functions", "ClusterRole /karpfunc-karpfunc-relay",
		"ClusterRoleBinding /karpfunc-functions", "ClusterRoleBinding /karpfunc-karpfunc-relay",
		"Deployment karpfunc/karpfunc-karpfunc-relay",
		"Role karpfunc/karpfunc-functions", "Role kube-system/karpfunc-functions-bootstrap-tokens",
		"RoleBinding karpfunc/karpfunc-functions", "RoleBinding kube-system/karpfunc-functions-bootstrap-tokens",
		"ServiceAccount karpfunc/karpfunc-karpfunc-relay",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rendered\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" || !strings.Contains(o.GetName(), "functions") {
			continue
		}
		subjects, _, _ := unstructuredSlice(o.Object, "subjects")
		if len(subjects) != 1 || subjects[0]["kind"] != "User" || subjects[0]["name"] != principal {
			t.Errorf("%s %s binds %v; want the Functions' principal as a User", o.GetKind(), o.GetName(), subjects)
		}
	}
}

func unstructuredSlice(obj map[string]any, key string) ([]map[string]any, bool, error) {
	raw, ok := obj[key].([]any)
	var out []map[string]any
	for _, r := range raw {
		if m, ok := r.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out, ok, nil
}

func TestRenderRefusesMissingOrMalformedPrincipal(t *testing.T) {
	for _, tc := range []struct {
		name, principal, want string
	}{
		{"missing", "", "functions.principalId is required"},
		{"a name, not an object ID", "karpfunc-functions", `functions.principalId "karpfunc-functions" is not an object ID`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := localValues()
			v["functions"] = map[string]any{"principalId": tc.principal}
			_, err := Render("karpfunc", "karpfunc", v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestFunctionsRoleNamesTheHandlersConfigMap: the namespaced Role grants the
// ConfigMap the handler really uses, in the release namespace, which is the
// handler's default KARPFUNC_NAMESPACE for a release installed there.
func TestFunctionsRoleNamesTheHandlersConfigMap(t *testing.T) {
	objs, err := Render("karpfunc", offerings.DefaultNamespace, localValues())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() != "Role" || o.GetNamespace() != offerings.DefaultNamespace {
			continue
		}
		rules, _, _ := unstructuredSlice(o.Object, "rules")
		for _, r := range rules {
			names, _ := r["resourceNames"].([]any)
			if slices.Contains(names, any(offerings.DefaultName)) {
				return
			}
		}
	}
	t.Fatalf("no Role in %s names ConfigMap %s", offerings.DefaultNamespace, offerings.DefaultName)
}
