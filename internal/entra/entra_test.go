package entra

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestIdentityEndpointRefusesWhatAppServiceRefuses: the endpoint answers
// only requests shaped as azidentity sends them on App Service.
func TestIdentityEndpointRefusesWhatAppServiceRefuses(t *testing.T) {
	s, err := Start(Options{Identities: []Identity{{ClientID: "11111111-2222-3333-4444-555555555555", PrincipalID: "p"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	good := url.Values{"api-version": {AppServiceAPIVersion}, "resource": {"aud"}, "client_id": {"11111111-2222-3333-4444-555555555555"}}
	with := func(k, v string) url.Values {
		q := url.Values{}
		for kk, vv := range good {
			q[kk] = vv
		}
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
		return q
	}
	for _, tc := range []struct {
		name   string
		header string
		query  url.Values
		code   int
		want   string
	}{
		{"good", env["IDENTITY_HEADER"], good, http.StatusOK, ""},
		{"no identity header", "", good, http.StatusBadRequest, "X-IDENTITY-HEADER"},
		{"wrong identity header", "nope", good, http.StatusBadRequest, "X-IDENTITY-HEADER"},
		{"other api-version", env["IDENTITY_HEADER"], with("api-version", "2017-09-01"), http.StatusBadRequest, "api-version"},
		{"no resource", env["IDENTITY_HEADER"], with("resource", ""), http.StatusBadRequest, "resource"},
		{"unknown client ID", env["IDENTITY_HEADER"], with("client_id", "99999999-2222-3333-4444-555555555555"), http.StatusBadRequest, "no user-assigned identity"},
		{"system-assigned not enabled", env["IDENTITY_HEADER"], with("client_id", ""), http.StatusBadRequest, "no system-assigned identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, env["IDENTITY_ENDPOINT"]+"?"+tc.query.Encode(), nil)
			if tc.header != "" {
				req.Header.Set("X-IDENTITY-HEADER", tc.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != tc.code || (tc.want != "" && !strings.Contains(body["message"].(string), tc.want)) {
				t.Errorf("%d %v; want %d with %q", resp.StatusCode, body, tc.code, tc.want)
			}
			if tc.code == http.StatusOK && (body["access_token"] == "" || body["expires_on"] == "") {
				t.Errorf("token response %v lacks access_token or expires_on", body)
			}
		})
	}
}
