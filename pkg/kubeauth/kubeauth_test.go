package kubeauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/karpfunc/karpfunc/internal/entra"
)

// countingCredential is a real azcore.TokenCredential that mints "tok-N"
// tokens living for lifetime on clk and records the scopes it was asked for.
type countingCredential struct {
	mu       sync.Mutex
	clk      *clocktesting.FakeClock
	lifetime time.Duration
	refresh  time.Duration // RefreshOn after this, when > 0
	calls    int
	scopes   []string
	err      error
}

func (c *countingCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return azcore.AccessToken{}, c.err
	}
	c.calls++
	c.scopes = append(c.scopes, o.Scopes...)
	now := c.clk.Now()
	tok := azcore.AccessToken{Token: fmt.Sprintf("tok-%d", c.calls), ExpiresOn: now.Add(c.lifetime)}
	if c.refresh > 0 {
		tok.RefreshOn = now.Add(c.refresh)
	}
	return tok, nil
}

func TestTokenSourceRefreshesBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lifetime  time.Duration
		refresh   time.Duration
		advance   time.Duration
		wantCalls int
		wantToken string
	}{
		{"fresh token is reused", time.Hour, 0, 54 * time.Minute, 1, "tok-1"},
		{"token within RefreshBefore of expiry is replaced", time.Hour, 0, 55 * time.Minute, 2, "tok-2"},
		{"expired token is replaced", time.Hour, 0, 2 * time.Hour, 2, "tok-2"},
		{"Entra's refresh_on is honoured", 24 * time.Hour, 12 * time.Hour, 12 * time.Hour, 2, "tok-2"},
		{"before refresh_on the token is reused", 24 * time.Hour, 12 * time.Hour, 11 * time.Hour, 1, "tok-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			cred := &countingCredential{clk: clk, lifetime: tc.lifetime, refresh: tc.refresh}
			src := NewTokenSource(cred, AKSScope, clk)
			if tok, err := src.Token(context.Background()); err != nil || tok != "tok-1" {
				t.Fatalf("first Token = %q, %v; want tok-1", tok, err)
			}
			clk.Step(tc.advance)
			tok, err := src.Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if tok != tc.wantToken || cred.calls != tc.wantCalls {
				t.Errorf("after %s: token %q from %d credential calls; want %q from %d", tc.advance, tok, cred.calls, tc.wantToken, tc.wantCalls)
			}
			for _, s := range cred.scopes {
				if s != "6dae42f8-4368-4678-94ff-3960e28e3630/.default" {
					t.Errorf("asked for scope %q; want AKS's server application", s)
				}
			}
		})
	}
}

func TestTokenSourceErrorKeepsCause(t *testing.T) {
	cause := errors.New("identity endpoint said no")
	src := NewTokenSource(&countingCredential{clk: clocktesting.NewFakeClock(time.Now()), err: cause}, AKSScope, nil)
	_, err := src.Token(context.Background())
	var te *TokenError
	if !errors.As(err, &te) || !errors.Is(err, cause) || !strings.Contains(err.Error(), AKSScope) {
		t.Fatalf("err = %v; want a TokenError naming the scope and wrapping the cause", err)
	}
}

// TestTransportSendsBearerAndDropsRejectedToken runs the transport against a
// local HTTPS server that accepts only the second token it is shown.
func TestTransportSendsBearerAndDropsRejectedToken(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok-2" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	cred := &countingCredential{clk: clk, lifetime: time.Hour}
	client := &http.Client{Transport: NewTokenSource(cred, AKSScope, clk).Transport(srv.Client().Transport)}
	var codes []int
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Authorization", "Bearer stale-from-caller")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	want := []string{"Bearer tok-1", "Bearer tok-2", "Bearer tok-2"}
	if fmt.Sprint(seen) != fmt.Sprint(want) || fmt.Sprint(codes) != "[401 200 200]" {
		t.Errorf("server saw %v with answers %v; want %v with [401 200 200] (a 401 drops the token, a good one is reused)", seen, codes, want)
	}
}

// TestManagedIdentityAgainstLocalEndpoint runs azidentity's real
// ManagedIdentityCredential against the App Service identity endpoint
// stand-in: the token it gets is for AKS's server application, names the
// user-assigned identity, and is cached until it is due for refresh.
func TestManagedIdentityAgainstLocalEndpoint(t *testing.T) {
	const principal = "99999999-8888-7777-6666-555555555555"
	// MSAL caches managed identity tokens process-wide, keyed by identity:
	// each case uses its own client ID.
	for _, tc := range []struct {
		name       string
		clientID   string
		lifetime   time.Duration
		wantMinted int
	}{
		{"long-lived token is fetched once", "11111111-2222-3333-4444-555555555555", time.Hour, 1},
		{"token shorter than RefreshBefore is fetched every time", "22222222-2222-3333-4444-555555555555", 4 * time.Minute, 3},
	} {
		clientID := tc.clientID
		t.Run(tc.name, func(t *testing.T) {
			idp, err := entra.Start(entra.Options{Identities: []entra.Identity{{ClientID: clientID, PrincipalID: principal}}, TokenLifetime: tc.lifetime})
			if err != nil {
				t.Fatal(err)
			}
			defer idp.Close()
			for _, kv := range idp.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			cred, err := NewManagedIdentityCredential(clientID)
			if err != nil {
				t.Fatal(err)
			}
			src := NewTokenSource(cred, AKSScope, nil)
			var tok string
			for range 3 {
				if tok, err = src.Token(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			claims := jwtClaims(t, tok)
			if claims["aud"] != AKSServerAppID || claims["oid"] != principal || claims["appid"] != clientID || claims["iss"] != idp.Issuer() {
				t.Errorf("token claims %v; want aud %s, oid %s, appid %s, iss %s", claims, AKSServerAppID, principal, clientID, idp.Issuer())
			}
			if got := idp.Minted(); got != tc.wantMinted {
				t.Errorf("identity endpoint minted %d tokens for 3 requests; want %d", got, tc.wantMinted)
			}
		})
	}
}

func TestManagedIdentityUnknownClientIDFails(t *testing.T) {
	idp, err := entra.Start(entra.Options{Identities: []entra.Identity{{ClientID: "11111111-2222-3333-4444-555555555555", PrincipalID: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer idp.Close()
	for _, kv := range idp.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cred, err := NewManagedIdentityCredential("aaaaaaaa-2222-3333-4444-555555555555")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewTokenSource(cred, AKSScope, nil).Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "aaaaaaaa-2222-3333-4444-555555555555") {
		t.Fatalf("err = %v; want the endpoint's refusal naming the unknown client ID", err)
	}
}

func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

func TestRESTConfigSettings(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	caPEM := string(pemOf(t, srv))
	caB64 := base64.StdEncoding.EncodeToString([]byte(caPEM))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:6443}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		wantErr  string // substring; "" means success
		wantHost string
	}{
		{"nothing set", nil, "KARPFUNC_API_SERVER_URL: not set: the handler cannot reach the cluster", ""},
		{"kubeconfig", map[string]string{EnvKubeconfig: kubeconfig}, "", "https://127.0.0.1:6443"},
		{"kubeconfig missing file", map[string]string{EnvKubeconfig: "/nonexistent/kubeconfig"}, "app setting KUBECONFIG: loading kubeconfig /nonexistent/kubeconfig", ""},
		{"both ways", map[string]string{EnvKubeconfig: kubeconfig, EnvAPIServerURL: srv.URL, EnvAPIServerCA: caB64}, "set only one", ""},
		{"identity", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: caB64}, "", srv.URL},
		{"user-assigned identity", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: caB64, EnvClientID: "11111111-2222-3333-4444-555555555555"}, "", srv.URL},
		{"URL without CA", map[string]string{EnvAPIServerURL: srv.URL}, "app setting KARPFUNC_API_SERVER_CA: not set, but KARPFUNC_API_SERVER_URL is", ""},
		{"CA without URL", map[string]string{EnvAPIServerCA: caB64}, "app setting KARPFUNC_API_SERVER_URL: not set, but KARPFUNC_API_SERVER_CA is", ""},
		{"http URL", map[string]string{EnvAPIServerURL: "http://aks.example:443", EnvAPIServerCA: caB64}, "must be an https:// URL", ""},
		{"URL with a path", map[string]string{EnvAPIServerURL: "https://aks.example:443/api", EnvAPIServerCA: caB64}, "must be only scheme, host and port", ""},
		{"bare host name", map[string]string{EnvAPIServerURL: "aks.example", EnvAPIServerCA: caB64}, "must be an https:// URL", ""},
		{"CA as PEM text", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: caPEM}, "holds PEM text; it must be base64 of the PEM", ""},
		{"CA not base64", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: "%%%"}, "KARPFUNC_API_SERVER_CA: is not base64", ""},
		{"CA base64 of junk", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: base64.StdEncoding.EncodeToString([]byte("hello"))}, "decodes to no PEM CERTIFICATE block", ""},
		{"client ID not a GUID", map[string]string{EnvAPIServerURL: srv.URL, EnvAPIServerCA: caB64, EnvClientID: "my-identity"}, `app setting AZURE_CLIENT_ID: "my-identity" is not a client ID`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotClientID *string
			cred := func(id string) (azcore.TokenCredential, error) {
				gotClientID = &id
				return &countingCredential{clk: clocktesting.NewFakeClock(time.Now()), lifetime: time.Hour}, nil
			}
			cfg, err := RESTConfig(func(k string) string { return tc.env[k] }, cred)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !IsSettingError(err) {
					t.Fatalf("err = %v; want a SettingError containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("Host = %q; want %q", cfg.Host, tc.wantHost)
			}
			if tc.env[EnvAPIServerURL] != "" {
				if gotClientID == nil || *gotClientID != tc.env[EnvClientID] {
					t.Errorf("credential built for client ID %v; want %q", gotClientID, tc.env[EnvClientID])
				}
				// The config reaches the server over TLS with the CA and
				// sends the token.
				rt, err := rest.TransportFor(cfg)
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/version", nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatalf("request through the config's transport: %v", err)
				}
				resp.Body.Close()
			}
		})
	}
}

func pemOf(t *testing.T, srv *httptest.Server) []byte {
	t.Helper()
	cert := srv.Certificate()
	return []byte("-----BEGIN CERTIFICATE-----\n" + base64.StdEncoding.EncodeToString(cert.Raw) + "\n-----END CERTIFICATE-----\n")
}
