package kubeauth

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/utils/clock"
)

// AKSServerAppID is the well-known application ID of the AKS server
// application: the audience of every Entra token an AKS API server with
// Entra ID integration accepts.
const AKSServerAppID = "6dae42f8-4368-4678-94ff-3960e28e3630"

// AKSScope is the scope to request a token for AKSServerAppID with.
const AKSScope = AKSServerAppID + "/.default"

// RefreshBefore is how long before its expiry a cached token is replaced.
// Entra's managed identity tokens live about 24 hours; five minutes covers
// clock skew and a slow request.
const RefreshBefore = 5 * time.Minute

// TokenSource hands out bearer tokens from an azcore.TokenCredential,
// caching each until RefreshBefore its expiry. Safe for concurrent use.
type TokenSource struct {
	cred   azcore.TokenCredential
	scopes []string
	clock  clock.PassiveClock

	mu  sync.Mutex
	tok azcore.AccessToken
}

// NewTokenSource returns a TokenSource for scope (AKSScope for AKS). A nil
// clock means the real one.
func NewTokenSource(cred azcore.TokenCredential, scope string, clk clock.PassiveClock) *TokenSource {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &TokenSource{cred: cred, scopes: []string{scope}, clock: clk}
}

// Token returns a token valid for at least RefreshBefore, fetching a new one
// when the cached one is due for refresh.
func (s *TokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Token != "" && !s.due(s.clock.Now()) {
		return s.tok.Token, nil
	}
	tok, err := s.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: s.scopes})
	if err != nil {
		return "", &TokenError{Scope: s.scopes[0], error: err}
	}
	if tok.Token == "" {
		return "", &TokenError{Scope: s.scopes[0], error: fmt.Errorf("the credential returned an empty token")}
	}
	s.tok = tok
	return tok.Token, nil
}

// due reports whether the cached token must be replaced at now.
func (s *TokenSource) due(now time.Time) bool {
	if !s.tok.RefreshOn.IsZero() && !now.Before(s.tok.RefreshOn) {
		return true
	}
	return !now.Before(s.tok.ExpiresOn.Add(-RefreshBefore))
}

// Invalidate drops the cached token if it is still the one given; the next
// Token call fetches a new one.
func (s *TokenSource) Invalidate(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok.Token == token {
		s.tok = azcore.AccessToken{}
	}
}

// TokenError means no token could be obtained for the API server. It keeps
// the credential's error, which says what the identity endpoint answered.
type TokenError struct {
	Scope string
	error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("getting an Entra token for the AKS API server (scope %s) with the managed identity: %v", e.Scope, e.error)
}

func (e *TokenError) Unwrap() error { return e.error }

// Transport returns a RoundTripper that sends each request through next
// with "Authorization: Bearer <token>" from s, replacing any the request had.
func (s *TokenSource) Transport(next http.RoundTripper) http.RoundTripper {
	return &bearerTransport{src: s, next: next}
}

type bearerTransport struct {
	src  *TokenSource
	next http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.src.Token(req.Context())
	if err != nil {
		return nil, err
	}
	clone := req.Clone(req.Context())
	clone.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(clone)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.src.Invalidate(tok)
	}
	return resp, err
}

// WrappedRoundTripper lets client-go see through the transport (for
// connection management, e.g. closing idle connections).
func (t *bearerTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
