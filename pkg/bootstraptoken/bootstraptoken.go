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

// DefaultGroup is the extra group the tokens authenticate into, besides
// system:bootstrappers: the group AKS (like kubeadm) binds to CSR creation
// (ClusterRole system:node-bootstrapper) and to auto-approval of node client
// certificates (system:certificates.k8s.io:certificatesigningrequests:nodeclient),
// so nodes joining with karpfunc's tokens need no extra RBAC.
const DefaultGroup = "system:bootstrappers:kubeadm:default-node-token"

var (
	tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)
	groupRE = regexp.MustCompile(`^system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]$`)
)

// Valid reports whether token has the bootstrap token form <id>.<secret>
// ([a-z0-9]{6}.[a-z0-9]{16}).
func Valid(token string) bool { return tokenRE.MatchString(token) }

// ID is the public half of a well-formed token ("" otherwise).
func ID(token string) string {
	m := tokenRE.FindStringSubmatch(token)
	if m == nil {
		return ""
	}
	return m[1]
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
	// Group is the auth-extra-groups value (default DefaultGroup); it must
	// start with system:bootstrappers:.
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
	if opts.Group == "" {
		opts.Group = DefaultGroup
	}
	if !groupRE.MatchString(opts.Group) {
		return nil, fmt.Errorf("bootstraptoken: group %q is not of the form system:bootstrappers:<name>", opts.Group)
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
	if t := m.cached; t != nil && t.expires.Sub(now) >= m.opts.MinValidity {
		// One GET: the Secret may have been deleted (revoked) meanwhile.
		err := m.opts.Kube.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: SecretPrefix + t.id}, &corev1.Secret{})
		if err == nil {
			return t.id + "." + t.secret, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", &Error{fmt.Errorf("reading bootstrap token Secret %s/%s: %w", Namespace, SecretPrefix+t.id, err)}
		}
		m.opts.Logger.Info("bootstrap token Secret was deleted; replacing it", "tokenID", t.id)
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
		s := &list.Items[i]
		if s.Type != corev1.SecretTypeBootstrapToken {
			continue
		}
		t, ok := parse(s)
		if !ok {
			m.opts.Logger.Warn("ignoring malformed bootstrap token Secret", "secret", s.Name)
			continue
		}
		if !now.Before(t.expires) {
			err := m.opts.Kube.Delete(ctx, s, client.Preconditions{UID: &s.UID})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return nil, &Error{fmt.Errorf("deleting expired bootstrap token Secret %s: %w", s.Name, err)}
			}
			m.opts.Logger.Info("deleted expired bootstrap token", "tokenID", t.id, "expired", t.expires.Format(time.RFC3339))
			continue
		}
		if t.expires.Sub(now) >= m.opts.MinValidity {
			usable = append(usable, t)
		}
	}
	if len(usable) == 0 {
		return nil, nil
	}
	sort.Slice(usable, func(i, j int) bool { return usable[i].expires.After(usable[j].expires) })
	return usable[0], nil
}

func (m *Manager) create(ctx context.Context, now time.Time) (*token, error) {
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
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: SecretPrefix + id, Namespace: Namespace,
				Labels: map[string]string{LabelManagedBy: ManagedByValue}},
			Type: corev1.SecretTypeBootstrapToken,
			StringData: map[string]string{
				KeyTokenID:     id,
				KeyTokenSecret: secret,
				KeyExpiration:  expires.Format(time.RFC3339),
				KeyUsageAuth:   "true",
				KeyExtraGroups: m.opts.Group,
				KeyDescription: m.opts.Description,
			},
		}
		err = m.opts.Kube.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) && attempt < 3 {
			continue // another token has this ID: draw again
		}
		if err != nil {
			return nil, &Error{fmt.Errorf("creating bootstrap token Secret %s/%s: %w", Namespace, SecretPrefix+id, err)}
		}
		m.opts.Logger.Info("created bootstrap token", "tokenID", id, "expires", expires.Format(time.RFC3339), "group", m.opts.Group)
		return &token{id: id, secret: secret, expires: expires}, nil
	}
}

func parse(s *corev1.Secret) (*token, bool) {
	id, secret := string(s.Data[KeyTokenID]), string(s.Data[KeyTokenSecret])
	if !Valid(id+"."+secret) || s.Name != SecretPrefix+id || string(s.Data[KeyUsageAuth]) != "true" {
		return nil, false
	}
	exp, err := time.Parse(time.RFC3339, string(s.Data[KeyExpiration]))
	if err != nil {
		return nil, false
	}
	return &token{id: id, secret: secret, expires: exp}, true
}

const tokenChars = "0123456789abcdefghijklmnopqrstuvwxyz"

func randomString(n int) (string, error) {
	b := make([]byte, n)
	alphabet := big.NewInt(int64(len(tokenChars)))
	for i := range b {
		v, err := rand.Int(rand.Reader, alphabet)
		if err != nil {
			return "", fmt.Errorf("bootstraptoken: reading randomness: %w", err)
		}
		b[i] = tokenChars[v.Int64()]
	}
	return string(b), nil
}
