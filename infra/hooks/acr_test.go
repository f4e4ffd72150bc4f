package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/karpfunc/karpfunc/internal/relayimage"
)

// acrRegistry is an OCI distribution registry (go-containerregistry's
// in-process one) behind Azure Container Registry's Entra ID sign-in, as
// Azure/acr docs/AAD-OAuth.md describes it:
//   - /v2/ without a valid ACR access token: 401 with a Bearer challenge
//     naming realm https://<registry>/oauth2/token and service <registry>;
//   - POST /oauth2/exchange, grant_type=access_token, service, access_token
//     (an Entra ID token): {"refresh_token": ...};
//   - POST /oauth2/token, grant_type=refresh_token, service, scope,
//     refresh_token (the ACR refresh token): {"access_token": ...}.
//
// Anything else on /oauth2/ (another grant, a wrong service, an unknown
// token) is refused as ACR refuses it, with 401.
type acrRegistry struct {
	entraToken string // the one Entra ID token the "tenant" issued
	host       string
	inner      http.Handler
	mu         sync.Mutex
	pushed     int // manifests PUT
}

const (
	acrTestRefresh = "acr-refresh-token"
	acrTestAccess  = "acr-access-token"
)

func (r *acrRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/oauth2/exchange":
		r.token(w, req, "access_token", "access_token", r.entraToken, map[string]string{"refresh_token": acrTestRefresh})
		return
	case "/oauth2/token":
		if req.PostFormValue("scope") == "" {
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"scope required"}]}`, http.StatusUnauthorized)
			return
		}
		r.token(w, req, "refresh_token", "refresh_token", acrTestRefresh, map[string]string{"access_token": acrTestAccess})
		return
	}
	if req.Header.Get("Authorization") != "Bearer "+acrTestAccess {
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://`+r.host+`/oauth2/token",service="`+r.host+`"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return
	}
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/") {
		r.mu.Lock()
		r.pushed++
		r.mu.Unlock()
	}
	r.inner.ServeHTTP(w, req)
}

// token answers one OAuth2 POST: the grant must be grant, service this
// registry, and the credential field hold want.
func (r *acrRegistry) token(w http.ResponseWriter, req *http.Request, grant, field, want string, answer map[string]string) {
	if req.Method != http.MethodPost || req.PostFormValue("grant_type") != grant || req.PostFormValue("service") != r.host || req.PostFormValue(field) != want {
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"invalid credentials"}]}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}

func newACRRegistry(t *testing.T, entraToken string) (*acrRegistry, *httptest.Server) {
	t.Helper()
	reg := &acrRegistry{entraToken: entraToken, inner: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewTLSServer(reg)
	t.Cleanup(srv.Close)
	reg.host = strings.TrimPrefix(srv.URL, "https://")
	return reg, srv
}

func TestPushImageSignsInWithTheACRTokenExchange(t *testing.T) {
	idx, err := relayimage.Index(map[string][]byte{"amd64": []byte("amd64 relay"), "arm64": []byte("arm64 relay")})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	reg, srv := newACRRegistry(t, "entra-arm-token")
	ref := reg.host + "/karpfunc/relay:0.1.0"
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}

	pinned, err := pushImage(context.Background(), idx, pushOptions{Ref: ref, Transport: srv.Client().Transport,
		EntraToken: func(context.Context) (string, error) { return "entra-arm-token", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if pinned != ref+"@"+want.String() {
		t.Errorf("pushImage = %q, want %q", pinned, ref+"@"+want.String())
	}
	if reg.pushed == 0 {
		t.Error("no manifest was pushed")
	}
	// The image is there, for whoever holds an ACR token (the kubelet, with AcrPull).
	got, err := remote.Index(parsed, remote.WithTransport(srv.Client().Transport),
		remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: acrNullUser, IdentityToken: acrTestRefresh})))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("registry holds %s, want %s", d, want)
	}
	if _, err := remote.Index(parsed, remote.WithTransport(srv.Client().Transport)); err == nil {
		t.Error("anonymous pull succeeded; the registry stand-in must demand a token")
	}

	for _, tc := range []struct {
		name  string
		token func(context.Context) (string, error)
		want  string
	}{
		{"a token the registry does not accept", func(context.Context) (string, error) { return "someone else's", nil }, "exchanging the Entra ID token"},
		{"not signed in", func(context.Context) (string, error) { return "", errors.New("run azd auth login") }, "run azd auth login"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pushImage(context.Background(), idx, pushOptions{Ref: ref, Transport: srv.Client().Transport, EntraToken: tc.token})
			var re RegistryError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a RegistryError saying %q", err, tc.want)
			}
		})
	}
}
