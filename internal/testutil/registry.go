package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryOptions choose how a test registry is served.
type RegistryOptions struct {
	TLS  bool // HTTPS with a self-signed certificate for 127.0.0.1
	Auth bool // htpasswd basic auth (User, Password)
}

// Registry is a CNCF distribution registry (Debian's docker-registry) on
// loopback, stopped when the test ends.
type Registry struct {
	Host   string // 127.0.0.1:PORT
	CAFile string // the certificate to trust, with TLS
	// DockerConfig is a directory holding config.json with the
	// credentials, with Auth (point $DOCKER_CONFIG at it).
	DockerConfig   string
	User, Password string
	Dir            string // storage
}

// StartRegistry starts docker-registry on a free loopback port. The tool
// missing skips the test on a workstation and fails it in CI.
func StartRegistry(t testing.TB, o RegistryOptions) *Registry {
	t.Helper()
	bin := NeedTool(t, "docker-registry")
	dir := t.TempDir()
	r := &Registry{Dir: dir}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Host = ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), r.Host)
	scheme := "http"
	if o.TLS {
		cert, key := selfSigned(t, dir)
		cfg += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", cert, key)
		r.CAFile = cert
		scheme = "https"
	}
	if o.Auth {
		r.User, r.Password = "nodeforge", "s3cret-"+filepath.Base(dir)
		h, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		pw := filepath.Join(dir, "htpasswd")
		os.WriteFile(pw, []byte(r.User+":"+string(h)+"\n"), 0o600)
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: nodeforge-test\n    path: %s\n", pw)
		r.DockerConfig = filepath.Join(dir, "docker")
		os.MkdirAll(r.DockerConfig, 0o700)
		auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
		os.WriteFile(filepath.Join(r.DockerConfig, "config.json"), []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.Host, auth)), 0o600)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for i := 0; ; i++ {
		resp, err := client.Get(scheme + "://" + r.Host + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			t.Fatalf("docker-registry did not start on %s: %v\n%s", r.Host, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// selfSigned writes a certificate and key for 127.0.0.1 and localhost.
func selfSigned(t testing.TB, dir string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeforge test registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certPath, keyPath
}
