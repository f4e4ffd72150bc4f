package chart_test

import (
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/karpfunc/karpfunc/internal/controlplane"
	"github.com/karpfunc/karpfunc/internal/testenv"
	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
)

// TestSecretsLeastPrivilege: no Role or ClusterRole of the chart lets
// anyone list or watch every Secret, and the Secrets the handler may read
// or delete are exactly pkg/bootstraptoken's slots.
func TestSecretsLeastPrivilege(t *testing.T) {
	objs, err := render(t, azdValues())
	if err != nil {
		t.Fatal(err)
	}
	roles := 0
	for _, o := range objs {
		if o.GetKind() != "Role" && o.GetKind() != "ClusterRole" {
			continue
		}
		roles++
		var role rbacv1.ClusterRole // a Role's rules have the same shape
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			if !covers(rule.APIGroups, "") || !(covers(rule.Resources, "secrets")) {
				continue
			}
			for _, verb := range rule.Verbs {
				if (verb == "list" || verb == "watch" || verb == "*") && len(rule.ResourceNames) == 0 {
					t.Errorf("%s %s grants %s on every Secret of its scope", o.GetKind(), o.GetName(), verb)
				}
				if (verb == "get" || verb == "delete" || verb == "update" || verb == "patch") && len(rule.ResourceNames) == 0 {
					t.Errorf("%s %s grants %s on every Secret of its scope, not only the bootstrap token slots", o.GetKind(), o.GetName(), verb)
				}
			}
			if len(rule.ResourceNames) > 0 && !slices.Equal(slices.Sorted(slices.Values(rule.ResourceNames)), slices.Sorted(slices.Values(bootstraptoken.SecretNames()))) {
				t.Errorf("%s %s names Secrets %v, want pkg/bootstraptoken's slots %v", o.GetKind(), o.GetName(), rule.ResourceNames, bootstraptoken.SecretNames())
			}
		}
	}
	if roles == 0 {
		t.Fatal("the chart rendered no Role or ClusterRole")
	}
}

// TestHandlerSecretAccess applies the chart's RBAC to a real API server and
// asks it what the Functions' principal may do with Secrets in
// kube-system: its own token slots, nothing else.
func TestHandlerSecretAccess(t *testing.T) {
	cp := testenv.ControlPlane(t, controlplane.Options{})
	kube := testenv.Client(t, cp.RESTConfig())
	ctx := t.Context()
	objs, err := render(t, azdValues())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
		case "Role", "RoleBinding":
			if o.GetNamespace() != "kube-system" {
				continue // the release namespace is not created here
			}
		default:
			continue
		}
		if err := kube.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	slot := bootstraptoken.SecretNames()[0]
	for _, tc := range []struct {
		group, resource, verb, name string
		allowed                     bool
	}{
		{"", "secrets", "list", "", false},
		{"", "secrets", "watch", "", false},
		{"", "secrets", "get", "cluster-admin-credentials", false},
		{"", "secrets", "get", "bootstrap-token-abcdef", false}, // AKS's own token
		{"", "secrets", "get", slot, true},
		{"", "secrets", "delete", slot, true},
		{"", "secrets", "update", slot, false},
		{"", "secrets", "create", "", true},
		{"rbac.authorization.k8s.io", "clusterrolebindings", "list", "", true},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: principalID,
			Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "kube-system", Group: tc.group, Resource: tc.resource,
				Verb: tc.verb, Name: tc.name}}}
		if err := kube.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != tc.allowed {
			t.Errorf("functions %s %s.%s %q in kube-system: allowed=%v, want %v (%s)", tc.verb, tc.resource, tc.group, tc.name,
				sar.Status.Allowed, tc.allowed, sar.Status.Reason)
		}
	}
}

// covers: list holds want or "*".
func covers(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, "*")
}
