package controlplane

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
)

// nodeBootstrapBindings are the ClusterRoleBindings AKS (like kubeadm)
// creates for kubelet TLS bootstrapping: bootstrap-token holders may create
// CSRs, their node client CSRs are approved automatically, and a node may
// renew its own client certificate. The ClusterRoles are the API server's
// built-in ones.
func nodeBootstrapBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(name, role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", bootstraptoken.DefaultGroup),
		bind("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", bootstraptoken.DefaultGroup),
		bind("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
	}
}

func (c *ControlPlane) createNodeBootstrapBindings(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	for _, b := range nodeBootstrapBindings() {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: creating ClusterRoleBinding %s: %w", b.Name, err)
		}
	}
	return nil
}
