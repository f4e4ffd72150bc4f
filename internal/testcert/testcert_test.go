package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A client that trusts only the returned PEM reaches a server using the
// certificate, by address and by name; one that does not trust it is refused.
func TestSelfSignedServesLoopback(t *testing.T) {
	cert, caPEM, err := SelfSigned("testcert test")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("the returned PEM holds no certificate")
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		url := "https://" + net.JoinHostPort(host, port)
		resp, err := trusting.Get(url)
		if err != nil {
			t.Errorf("GET %s with the PEM trusted: %v", url, err)
			continue
		}
		resp.Body.Close()
	}
	if _, err := http.Get(srv.URL); err == nil {
		t.Error("a client that does not trust the PEM reached the server")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "testcert test" || !leaf.IsCA || len(leaf.IPAddresses) != 2 {
		t.Errorf("certificate: CN %q, CA %t, IPs %v; want the name given, a CA, 127.0.0.1 and ::1", leaf.Subject.CommonName, leaf.IsCA, leaf.IPAddresses)
	}
}
