// Package bootstraptoken keeps the TLS bootstrap token new nodes join with.
//
// A node VM's kubelet authenticates once with a bootstrap token, asks for a
// client certificate (a CSR that kube-controller-manager approves and signs),
// and from then on uses that certificate. The token is a bearer credential
// stored as a Secret of type bootstrap.kubernetes.io/token in kube-system,
// named bootstrap-token-<id>, which the API server's bootstrap-token
// authenticator reads.
//
// Invariants:
//   - The Manager reads, creates and deletes only the Secrets of its Slots
//     (bootstrap-token-kfunc1, -kfunc2), by name; it never lists Secrets.
//     A slot's Secret it did not create (no LabelManagedBy=ManagedByValue)
//     is never touched. Tokens others made (AKS's own, kubeadm's) are never
//     read.
//   - A token handed out stays valid for at least MinValidity, so a VM
//     launched with it can still join when it boots; a token closer to its
//     expiry than that is replaced (rotated) by a fresh one.
//   - Expired tokens in the slots are deleted when the Manager next looks.
//   - The token secret is never logged, put in an error, an event or a
//     status: only the token ID (the public half) is.
package bootstraptoken

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys and values of a bootstrap token Secret, as the API server's
// bootstrap-token authenticator reads them.
const (
	Namespace       = metav1.NamespaceSystem
	SecretPrefix    = "bootstrap-token-"
	KeyTokenID      = "token-id"
	KeyTokenSecret  = "token-secret"
	KeyExpiration   = "expiration"
	KeyDescription  = "description"
	KeyUsageAuth    = "usage-bootstrap-authentication"
	KeyExtraGroups  = "auth-extra-groups"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedByValue  = "karpfunc"
	DefaultTTL      = 2 * time.Hour
	DefaultMinValid = time.Hour
)

// The extra groups a token authenticates into (besides
// system:bootstrappers) decide what it may do: the cluster binds CSR
// creation (ClusterRole system:node-bootstrapper) and auto-approval of node
// client certificates to some of them. Which groups AKS binds is AKS's
// business, so the Manager does not guess: unless Options.Group is set, its
// tokens carry the groups the cluster's ClusterRoleBindings bind to those
// two roles (extraGroups). The Azure Karpenter provider instead copies the
// cluster's own bootstrap token (Azure/karpenter-provider-azure
// hack/deploy/configure-values.sh); finding that token would take reading
// every Secret in kube-system, which karpfunc is not granted.

var (
	tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)
	groupRE = regexp.MustCompile(`^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`)
)

// Valid reports whether token has the bootstrap token form <id>.<secret>
// ([a-z0-9]{6}.[a-z0-9]{16}).
func Valid(token string) bool { return tokenRE.MatchString(token) }

// ID is the public half of a well-formed token ("" otherwise).
func ID(token string) string {
	match := tokenRE.FindStringSubmatch(token)
	if match == nil {
		return ""
	}
	return match[1]
}

// Options configure a Manager.
type Options struct {
	// Kube reads, creates and deletes Secrets in kube-system.
	Kube client.Client
	// TTL is a new token's lifetime (default DefaultTTL).
	TTL time.Duration
	// MinValidity is how long a token must still be valid to be handed out
	// (default DefaultMinValid); it should exceed the registration timeout,
	// so every VM launched with a token can join before it expires.
	MinValidity time.Duration
	// Group is the auth-extra-groups value, comma-separated groups each
	// starting with system:bootstrappers:. Empty (the default): those of
	// the cluster's own (AKS's) bootstrap token, read when a token is
	// created.
	Group string
	// Description is written into the Secret (default names karpfunc).
	Description string
	Clock       clock.PassiveClock
	Logger      *slog.Logger
}

// Manager hands out a valid bootstrap token, creating, rotating and
// cleaning up its own token Secrets. Safe for concurrent use.
type Manager struct {
	opts Options

	mu     sync.Mutex
	cached *token
}

type token struct {
	id, secret string
	expires    time.Time
}

// Error is a failure to read or write token Secrets. It never carries the
// token secret.
type Error struct{ error }

func (e *Error) Unwrap() error { return e.error }

// New returns a Manager, or an error naming the bad option.
func New(opts Options) (*Manager, error) {
	if opts.Kube == nil {
		return nil, fmt.Errorf("bootstraptoken: Options.Kube is required")
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MinValidity == 0 {
		opts.MinValidity = DefaultMinValid
	}
	if opts.TTL < 2*opts.MinValidity || opts.MinValidity <= 0 {
		return nil, fmt.Errorf("bootstraptoken: TTL %s must be at least twice MinValidity %s (a fresh token must be usable, and the other slot's token expired when the next is needed)", opts.TTL, opts.MinValidity)
	}
	if err := checkGroups(opts.Group); opts.Group != "" && err != nil {
		return nil, fmt.Errorf("bootstraptoken: Options.Group: %w", err)
	}
	if opts.Description == "" {
		opts.Description = "TLS bootstrap token for nodes launched by karpfunc"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Manager{opts: opts}, nil
}

// Slots are the token IDs the Manager uses, and so the only Secret names it
// reads, writes or deletes (bootstrap-token-<slot>): the chart grants get
// and delete on these names alone, and no list. Two slots are enough
// because a new token is needed only once the newest has less than
// MinValidity left, and New requires TTL >= 2*MinValidity: by then the
// other slot's token has expired (it was created at least TTL-MinValidity
// before the newest, and lived TTL).
var Slots = []string{"kfunc1", "kfunc2"}

// SecretNames are the Secret names of Slots.
func SecretNames() []string {
	out := make([]string, len(Slots))
	for i, slot := range Slots {
		out[i] = SecretPrefix + slot
	}
	return out
}

// Token returns a bootstrap token ("<id>.<secret>") valid for at least
// MinValidity: the cached one, else the longest-lived valid one of the
// slots, else a new one in a free slot. Expired tokens in the slots are
// deleted on the way.
func (m *Manager) Token(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opts.Clock.Now()
	if cached := m.cached; cached != nil && cached.expires.Sub(now) >= m.opts.MinValidity {
		// One GET: the Secret may have been deleted (revoked) meanwhile.
		err := m.opts.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: SecretPrefix + cached.id}, &corev1.Secret{})
		if err == nil {
			return cached.id + "." + cached.secret, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", &Error{fmt.Errorf("reading bootstrap token Secret %s/%s: %w", Namespace, SecretPrefix+cached.id, err)}
		}
		m.opts.Logger.Info("bootstrap token Secret was deleted; replacing it", "tokenID", cached.id)
	}
	m.cached = nil
	for attempt := 0; ; attempt++ {
		best, free, err := m.sweep(ctx, now)
		if err != nil {
			return "", err
		}
		if best == nil {
			if free == "" {
				return "", &Error{fmt.Errorf("every bootstrap token slot (%s in %s) holds an unexpired token with less than %s left: TTL %s must be at least twice MinValidity", strings.Join(SecretNames(), ", "), Namespace, m.opts.MinValidity, m.opts.TTL)}
			}
			best, err = m.create(ctx, now, free)
			if apierrors.IsAlreadyExists(err) && attempt < 2 {
				continue // another instance filled the slot: look again
			}
			if err != nil {
				return "", err
			}
		}
		m.cached = best
		return best.id + "." + best.secret, nil
	}
}

// sweep reads the slots by name, deletes the expired tokens in them, and
// returns the longest-lived token valid for at least MinValidity (nil:
// none) and a slot that is free (""; none).
func (m *Manager) sweep(ctx context.Context, now time.Time) (best *token, free string, err error) {
	for _, slot := range Slots {
		name := SecretPrefix + slot
		secret := &corev1.Secret{}
		err := m.opts.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, secret)
		if apierrors.IsNotFound(err) {
			free = cmp.Or(free, slot)
			continue
		}
		if err != nil {
			return nil, "", &Error{fmt.Errorf("reading bootstrap token Secret %s/%s: %w", Namespace, name, err)}
		}
		if secret.Labels[LabelManagedBy] != ManagedByValue {
			return nil, "", &Error{fmt.Errorf("Secret %s/%s exists but was not made by karpfunc (no %s=%s label): karpfunc never touches it and cannot use its slot; remove it if nothing else uses it", Namespace, name, LabelManagedBy, ManagedByValue)}
		}
		tok, ok := parse(secret)
		if !ok || !now.Before(tok.expires) {
			err := m.opts.Kube.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return nil, "", &Error{fmt.Errorf("deleting expired or malformed bootstrap token Secret %s/%s: %w", Namespace, name, err)}
			}
			m.opts.Logger.Info("deleted expired or malformed bootstrap token", "tokenID", slot)
			free = cmp.Or(free, slot)
			continue
		}
		if tok.expires.Sub(now) >= m.opts.MinValidity && (best == nil || tok.expires.After(best.expires)) {
			best = tok
		}
	}
	return best, free, nil
}

// create makes a token in slot (its ID); AlreadyExists is returned as is
// (another instance took the slot).
func (m *Manager) create(ctx context.Context, now time.Time, slot string) (*token, error) {
	groups, err := m.extraGroups(ctx)
	if err != nil {
		return nil, err
	}
	secret, err := randomString(16)
	if err != nil {
		return nil, err
	}
	// The authenticator compares against RFC 3339 in UTC; whole seconds
	// keep what we cache equal to what it reads.
	expires := now.Add(m.opts.TTL).UTC().Truncate(time.Second)
	tokenSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + slot, Namespace: Namespace,
			Labels: map[string]string{LabelManagedBy: ManagedByValue}},
		Type: corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			KeyTokenID:     slot,
			KeyTokenSecret: secret,
			KeyExpiration:  expires.Format(time.RFC3339),
			KeyUsageAuth:   "true",
			KeyExtraGroups: groups,
			KeyDescription: m.opts.Description,
		},
	}
	err = m.opts.Kube.Create(ctx, tokenSecret)
	if apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if err != nil {
		return nil, &Error{fmt.Errorf("creating bootstrap token Secret %s/%s: %w", Namespace, SecretPrefix+slot, err)}
	}
	m.opts.Logger.Info("created bootstrap token", "tokenID", slot, "expires", expires.Format(time.RFC3339), "groups", groups)
	return &token{id: slot, secret: secret, expires: expires}, nil
}

func parse(s *corev1.Secret) (*token, bool) {
	id := string(s.Data[KeyTokenID])
	secret := string(s.Data[KeyTokenSecret])
	if !Valid(id+"."+secret) || s.Name != SecretPrefix+id || string(s.Data[KeyUsageAuth]) != "true" {
		return nil, false
	}
	if len(s.Data[KeyExpiration]) == 0 {
		return &token{id: id, secret: secret, expires: neverExpires}, true // the authenticator: no expiration, no expiry
	}
	exp, err := time.Parse(time.RFC3339, string(s.Data[KeyExpiration]))
	if err != nil {
		return nil, false
	}
	return &token{id: id, secret: secret, expires: exp}, true
}

var neverExpires = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

const tokenChars = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomString(n int) (string, error) {
	out := make([]byte, n)
	alphabet := big.NewInt(int64(len(tokenChars)))
	for i := range out {
		index, err := rand.Int(rand.Reader, alphabet)
		if err != nil {
			return "", fmt.Errorf("bootstraptoken: reading randomness: %w", err)
		}
		out[i] = tokenChars[index.Int64()]
	}
	return string(out), nil
}

// checkGroups checks an auth-extra-groups value as the API server's
// bootstrap-token authenticator does: comma-separated groups, each
// system:bootstrappers:<name>.
func checkGroups(groups string) error {
	for _, group := range strings.Split(groups, ",") {
		if !groupRE.MatchString(group) {
			return fmt.Errorf("group %q is not of the form system:bootstrappers:<name>", group)
		}
	}
	return nil
}

// The ClusterRoles TLS bootstrapping needs a token's groups to be bound to
// (Kubernetes docs, "TLS bootstrapping": authorize kubelet to create CSR,
// and approve them automatically).
const (
	RoleCreateCSR  = "system:node-bootstrapper"
	RoleApproveCSR = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	// GroupBootstrappers is the group every bootstrap token authenticates
	// into.
	GroupBootstrappers = "system:bootstrappers"
)

// extraGroups is the auth-extra-groups of new tokens: Options.Group, else
// the groups the cluster binds to TLS bootstrapping, read from its
// ClusterRoleBindings: for each of RoleCreateCSR and RoleApproveCSR, none
// if system:bootstrappers itself is bound, else the first (by name)
// system:bootstrappers:<name> group bound to it. Reading bindings needs no
// access to any Secret.
func (m *Manager) extraGroups(ctx context.Context) (string, error) {
	if m.opts.Group != "" {
		return m.opts.Group, nil
	}
	var list rbacv1.ClusterRoleBindingList
	if err := m.opts.Kube.List(ctx, &list); err != nil {
		return "", &Error{fmt.Errorf("listing ClusterRoleBindings to find the groups the cluster binds to TLS bootstrapping: %w", err)}
	}
	bound := map[string][]string{}
	for _, binding := range list.Items {
		if binding.RoleRef.Kind != "ClusterRole" || (binding.RoleRef.Name != RoleCreateCSR && binding.RoleRef.Name != RoleApproveCSR) {
			continue
		}
		for _, subject := range binding.Subjects {
			if subject.Kind == rbacv1.GroupKind && (subject.Name == GroupBootstrappers || groupRE.MatchString(subject.Name)) {
				bound[binding.RoleRef.Name] = append(bound[binding.RoleRef.Name], subject.Name)
			}
		}
	}
	var groups []string
	for _, role := range []string{RoleCreateCSR, RoleApproveCSR} {
		names := bound[role]
		if len(names) == 0 {
			return "", &Error{fmt.Errorf("no ClusterRoleBinding binds ClusterRole %s to %s or a %s:<name> group: a node could not get its certificate; bind it, or name the groups (bootstraptoken Options.Group)", role, GroupBootstrappers, GroupBootstrappers)}
		}
		if slices.Contains(names, GroupBootstrappers) {
			continue
		}
		slices.Sort(names)
		if !slices.Contains(groups, names[0]) {
			groups = append(groups, names[0])
		}
	}
	return strings.Join(groups, ","), nil
}
