package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/config"
	"herd/internal/web/auth"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestTLS: over TLS the links are https and the cookie is Secure.
func TestTLS(t *testing.T) {
	cert, key := selfSigned(t, t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Config: config.Web{Listen: "127.0.0.1:0", TLSCert: cert, TLSKey: key}, Backend: &fakeBackend{},
		Verbs: &fakeVerbs{}, Token: "tok", FailDelay: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Run(ctx, ln)
	}()
	defer func() { cancel(); <-done }()
	for !srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	link := srv.LoginURL(auth.ScopeOperate, "/")
	if !strings.HasPrefix(link, "https://") {
		t.Fatalf("[link] expected https … got %s", link)
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp := logIn(t, cl, link)
	resp.Body.Close()
	if ck := resp.Cookies(); resp.StatusCode != 200 || len(ck) != 1 || !ck[0].Secure || !ck[0].HttpOnly {
		t.Errorf("[login] expected a Secure, HttpOnly cookie … got %d %+v", resp.StatusCode, ck)
	}
	plain := "http://" + ln.Addr().String() + "/"
	if resp, err := http.Get(plain); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("[plain http] expected no page over plain HTTP … got 200")
		}
	}
}
