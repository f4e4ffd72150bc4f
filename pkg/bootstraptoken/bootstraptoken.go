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
//   - The Manager only ever reuses, or deletes, Secrets it created: they carry
//     LabelManagedBy=ManagedByValue. Tokens others made (AKS's own, kubeadm's)
//     are never touched.
//   - A token handed out stays valid for at least MinValidity, so a VM
//     launched with it can still join when it boots; a token closer to its
//     expiry than that is replaced (rotated) by a fresh one.
//   - Expired tokens the Manager created are deleted when it next looks.
//   - The token secret is never logged, put in an error, an event or a
//     status: only the token ID (the public half) is.
package bootstraptoken

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
// tokens carry the auth-extra-groups of the cluster's own bootstrap token
// (a bootstrap.kubernetes.io/token Secret in kube-system karpfunc did not
// create), the Secret the Azure Karpenter provider reuses for its nodes
// (Azure/karpenter-provider-azure hack/deploy/configure-values.sh).

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
	if opts.TTL <= opts.MinValidity || opts.MinValidity < 0 {
		return nil, fmt.Errorf("bootstraptoken: TTL %s must exceed MinValidity %s (a fresh token must be usable)", opts.TTL, opts.MinValidity)
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

// Token returns a bootstrap token ("<id>.<secret>") valid for at least
// MinValidity: the cached one, else the longest-lived valid one this
// Manager's Secrets hold, else a new one. Expired Secrets of ours are
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
	best, err := m.sweep(ctx, now)
	if err != nil {
		return "", err
	}
	if best == nil {
		if best, err = m.create(ctx, now); err != nil {
			return "", err
		}
	}
	m.cached = best
	return best.id + "." + best.secret, nil
}

// sweep lists our token Secrets, deletes the expired ones and returns the
// longest-lived one that is valid for at least MinValidity (nil: none).
func (m *Manager) sweep(ctx context.Context, now time.Time) (*token, error) {
	var list corev1.SecretList
	if err := m.opts.Kube.List(ctx, &list, client.InNamespace(Namespace), client.MatchingLabels{LabelManagedBy: ManagedByValue}); err != nil {
		return nil, &Error{fmt.Errorf("listing bootstrap token Secrets in %s: %w", Namespace, err)}
	}
	var usable []*token
	for i := range list.Items {
		secret := &list.Items[i]
		if secret.Type != corev1.SecretTypeBootstrapToken {
			continue
		}
		tok, ok := parse(secret)
		if !ok {
			m.opts.Logger.Warn("ignoring malformed bootstrap token Secret", "secret", secret.Name)
			continue
		}
		if !now.Before(tok.expires) {
			err := m.opts.Kube.Delete(ctx, secret, client.Preconditions{UID: &secret.UID})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return nil, &Error{fmt.Errorf("deleting expired bootstrap token Secret %s: %w", secret.Name, err)}
			}
			m.opts.Logger.Info("deleted expired bootstrap token", "tokenID", tok.id, "expired", tok.expires.Format(time.RFC3339))
			continue
		}
		if tok.expires.Sub(now) >= m.opts.MinValidity {
			usable = append(usable, tok)
		}
	}
	if len(usable) == 0 {
		return nil, nil
	}
	sort.Slice(usable, func(i, j int) bool { return usable[i].expires.After(usable[j].expires) })
	return usable[0], nil
}

func (m *Manager) create(ctx context.Context, now time.Time) (*token, error) {
	groups, err := m.extraGroups(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		id, err := randomString(6)
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
			ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + id, Namespace: Namespace,
				Labels: map[string]string{LabelManagedBy: ManagedByValue}},
			Type: corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{
				KeyTokenID:     id,
				KeyTokenSecret: secret,
				KeyExpiration:  expires.Format(time.RFC3339),
				KeyUsageAuth:   "true",
				KeyExtraGroups: groups,
				KeyDescription: m.opts.Description,
			},
		}
		err = m.opts.Kube.Create(ctx, tokenSecret)
		if apierrors.IsAlreadyExists(err) && attempt < 3 {
			continue // another token has this ID: draw again
		}
		if err != nil {
			return nil, &Error{fmt.Errorf("creating bootstrap token Secret %s/%s: %w", Namespace, SecretPrefix+id, err)}
		}
		m.opts.Logger.Info("created bootstrap token", "tokenID", id, "expires", expires.Format(time.RFC3339), "groups", groups)
		return &token{id: id, secret: secret, expires: expires}, nil
	}
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

// extraGroups is the auth-extra-groups of new tokens: Options.Group, else
// those of the cluster's own bootstrap token (the first by name of the
// well-formed, authentication-enabled, unexpired token Secrets in
// kube-system this Manager did not create).
func (m *Manager) extraGroups(ctx context.Context) (string, error) {
	if m.opts.Group != "" {
		return m.opts.Group, nil
	}
	var list corev1.SecretList
	if err := m.opts.Kube.List(ctx, &list, client.InNamespace(Namespace)); err != nil {
		return "", &Error{fmt.Errorf("listing Secrets in %s to find the cluster's bootstrap token: %w", Namespace, err)}
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		secret := &list.Items[i]
		if secret.Type != corev1.SecretTypeBootstrapToken || secret.Labels[LabelManagedBy] == ManagedByValue {
			continue
		}
		if tok, ok := parse(secret); !ok || !m.opts.Clock.Now().Before(tok.expires) {
			continue // the authenticator would refuse it: not the cluster's working token
		}
		groups := string(secret.Data[KeyExtraGroups])
		if groups == "" {
			return "", nil // it authenticates as system:bootstrappers only; so do ours
		}
		if err := checkGroups(groups); err != nil {
			return "", &Error{fmt.Errorf("the cluster's bootstrap token Secret %s/%s: %s: %w", Namespace, secret.Name, KeyExtraGroups, err)}
		}
		return groups, nil
	}
	return "", &Error{fmt.Errorf("no bootstrap token Secret of the cluster (type %s, not made by karpfunc) in %s to copy %s from: "+
		"nodes would join with groups the cluster may not bind; check the cluster is AKS, or set the groups explicitly",
		corev1.SecretTypeBootstrapToken, Namespace, KeyExtraGroups)}
}
