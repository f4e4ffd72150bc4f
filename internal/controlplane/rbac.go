package controlplane

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/karpfunc/karpfunc/pkg/bootstraptoken"
)

// AKSBootstrapTokenGroups is the auth-extra-groups of the cluster's own
// bootstrap token the local control plane creates, standing in for the
// bootstrap-token-<id> Secret AKS keeps in kube-system (which the Azure
// Karpenter provider reuses: hack/deploy/configure-values.sh). Only this
// group is bound to TLS bootstrapping, as on AKS: a token carrying another
// group may authenticate but not get a node certificate. The value is
// kubeadm's default node-token group; no public AKS source states the group
// of AKS's own token, which is why karpfunc reads it from the cluster
// rather than assuming it (pkg/bootstraptoken).
const AKSBootstrapTokenGroups = "system:bootstrappers:kubeadm:default-node-token"

// nodeBootstrapBindings are the ClusterRoleBindings for kubelet TLS
// bootstrapping: holders of the cluster's bootstrap token (its extra group,
// not all of system:bootstrappers) may create CSRs and have their node
// client CSRs approved automatically, and a node may renew its own client
// certificate. The ClusterRoles are the API server's built-in ones.
func nodeBootstrapBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(name, role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", AKSBootstrapTokenGroups),
		bind("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", AKSBootstrapTokenGroups),
		bind("kubeadm:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
	}
}

// aksBootstrapToken is the cluster's own bootstrap token Secret, as AKS
// keeps one: no expiry, authentication only, AKSBootstrapTokenGroups.
func aksBootstrapToken() (*corev1.Secret, error) {
	id, err := randomToken(6)
	if err != nil {
		return nil, err
	}
	secret, err := randomToken(16)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraptoken.SecretPrefix + id, Namespace: bootstraptoken.Namespace},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			bootstraptoken.KeyTokenID:     id,
			bootstraptoken.KeyTokenSecret: secret,
			bootstraptoken.KeyUsageAuth:   "true",
			bootstraptoken.KeyExtraGroups: AKSBootstrapTokenGroups,
			bootstraptoken.KeyDescription: "the cluster's bootstrap token (local stand-in for AKS's)",
		},
	}, nil
}

func randomToken(n int) (string, error) {
	const chars = "0123456789abcdefghijklmnopqrstuvwxyz"
	token := make([]byte, n)
	for i := range token {
		index, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			return "", fmt.Errorf("controlplane: reading randomness: %w", err)
		}
		token[i] = chars[index.Int64()]
	}
	return string(token), nil
}

func (c *ControlPlane) createNodeBootstrapBindings(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	for _, binding := range nodeBootstrapBindings() {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("controlplane: creating ClusterRoleBinding %s: %w", binding.Name, err)
		}
	}
	token, err := aksBootstrapToken()
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Secrets(token.Namespace).Create(ctx, token, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("controlplane: creating the cluster's bootstrap token Secret: %w", err)
	}
	return nil
}
