package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
)

const (
	accessUser     = "alice"
	accessPassword = "alice-factory-password"
	accessToken    = "ci-factory-token-0123456789"
)

// TestFactoryAccessConfig: the config file says every flag under its
// name, relative to itself; flags given override it; an unknown key is
// named; plain HTTP off loopback needs saying so.
func TestFactoryAccessConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "factory.yaml")
	os.WriteFile(cfg, []byte(`release:
  - store: oci:releases/p11
    key: [keys/p11.pub]
  - oci:/srv/releases/p10
key: keys/common.pub
cache: oci:cache
signing-key: keys/factory.key
listen: 0.0.0.0:8443
metrics-listen: 127.0.0.1:9090
external-url: https://factory.example
max-builds: 3
max-queue: 7
build-timeout: 90s
build-rate: 0
build-burst: 2
tls-cert: tls/cert.pem
tls-key: /etc/tls/key.pem
htpasswd: htpasswd
tokens: tokens
login: [build, metrics]
ca-file: ca.pem
allow-http: true
broken-versions: [v1.10.0, 1.10.1]
allowed-origins: https://ui.example
trusted-proxies: [10.0.0.0/8, "fd00::/8"]
`), 0o644)
	settle := func(args ...string) (*serveFlags, error) {
		cmd, f := factoryServeCommand()
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f, f.settle(cmd.Flags())
	}
	f, err := settle("--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := func(p string) string { return filepath.Join(dir, p) }
	want := []factory.ConfigRelease{{Store: "oci:" + in("releases/p11"), Key: []string{in("keys/p11.pub")}}, {Store: "oci:/srv/releases/p10", Key: []string{in("keys/common.pub")}}}
	if fmt.Sprint(f.releases) != fmt.Sprint(want) {
		t.Errorf("releases %v, want %v", f.releases, want)
	}
	for _, c := range []struct{ got, want any }{
		{f.cache, "oci:" + in("cache")}, {f.signingKey, in("keys/factory.key")}, {f.listen, "0.0.0.0:8443"},
		{f.metricsListen, "127.0.0.1:9090"}, {f.external, "https://factory.example"}, {f.maxBuilds, 3}, {f.maxQueue, 7},
		{f.buildTimeout, 90 * time.Second}, {f.shutdownGrace, 90 * time.Second}, {f.buildRate, 0.0}, {f.buildBurst, 2}, {f.tlsCert, in("tls/cert.pem")},
		{f.tlsKey, "/etc/tls/key.pem"}, {f.htpasswd, in("htpasswd")}, {f.tokens, in("tokens")},
		{strings.Join(f.login, ","), "build,metrics"}, {f.sf.caFile, in("ca.pem")}, {f.sf.allowHTTP, true},
		{strings.Join(f.brokenVersions, ","), "v1.10.0,1.10.1"}, {strings.Join(f.allowedOrigins, ","), "https://ui.example"},
		{strings.Join(f.proxies, ","), "10.0.0.0/8,fd00::/8"},
	} {
		if c.got != c.want {
			t.Errorf("from the file: %v, want %v", c.got, c.want)
		}
	}
	// Flags override the file.
	f, err = settle("--config", cfg, "--release", "oci:/flag", "--listen", "127.0.0.1:9999", "--login", "download", "--max-builds", "5", "--build-rate", "12", "--shutdown-grace", "45s")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(f.releases) != fmt.Sprint([]factory.ConfigRelease{{Store: "oci:/flag", Key: []string{in("keys/common.pub")}}}) ||
		f.listen != "127.0.0.1:9999" || strings.Join(f.login, ",") != "download" || f.maxBuilds != 5 || f.buildRate != 12 || f.maxQueue != 7 || f.shutdownGrace != 45*time.Second {
		t.Errorf("flags over the file: %+v", f)
	}
	// The environment says flags too: over the file, under the flags.
	t.Setenv("NODEFORGE_FACTORY_LISTEN", "127.0.0.1:7777")
	t.Setenv("NODEFORGE_FACTORY_MAX_BUILDS", "4")
	t.Setenv("NODEFORGE_FACTORY_LOGIN", "pull,metrics")
	t.Setenv("NODEFORGE_FACTORY_TRUSTED_PROXIES", "192.0.2.1, 192.0.2.2")
	f, err = settle("--config", cfg, "--max-builds", "6")
	if err != nil {
		t.Fatal(err)
	}
	if f.listen != "127.0.0.1:7777" || f.maxBuilds != 6 || strings.Join(f.login, ",") != "pull,metrics" || f.maxQueue != 7 || strings.Join(f.proxies, ",") != "192.0.2.1,192.0.2.2" {
		t.Errorf("environment between flags and file: listen %s, max-builds %d, login %v, max-queue %d, trusted proxies %v", f.listen, f.maxBuilds, f.login, f.maxQueue, f.proxies)
	}
	t.Setenv("NODEFORGE_FACTORY_MAX_BUILDS", "many")
	if _, err := settle("--config", cfg); err == nil || !strings.Contains(err.Error(), "NODEFORGE_FACTORY_MAX_BUILDS") {
		t.Errorf("a bad environment value: %v", err)
	}
	for _, k := range []string{"LISTEN", "MAX_BUILDS", "LOGIN"} {
		os.Unsetenv("NODEFORGE_FACTORY_" + k)
	}
	// Logins given, no surface named: a login to build.
	os.WriteFile(cfg, []byte("release: [oci:/r]\nkey: k.pub\ntokens: tokens\n"), 0o644)
	if f, err = settle("--config", cfg); err != nil || strings.Join(f.login, ",") != "build" {
		t.Errorf("the default login: %v %v", f.login, err)
	}
	if f, err = settle("--config", cfg, "--login", "none"); err != nil || len(f.login) != 0 {
		t.Errorf("--login none: %v %v", f.login, err)
	}
	for _, c := range []struct {
		config string
		args   []string
		says   string
	}{
		{"release: [oci:/r]\nkey: k.pub\nlisen: 127.0.0.1:1\n", nil, "line 3: field lisen is not a setting"},
		{"release:\n  - stroe: oci:/r\n", nil, "line 2: field stroe is not a release's (store, key)"},
		{"release: [oci:/r]\n", nil, "release oci:/r: no key to verify it with"},
		{"key: k.pub\n", nil, "--release STORE (or release: in --config) is required"},
		{"release: [oci:/r]\nkey: k.pub\nmax-builds: many\n", nil, "cannot unmarshal"},
		{"release: [oci:/r]\nkey: k.pub\nlisten: 0.0.0.0:8080\n", nil, "--listen 0.0.0.0:8080 is not a loopback address: serve HTTPS there (--tls-cert, --tls-key), or pass --insecure-listen"},
		{"release: [oci:/r]\nkey: k.pub\n", []string{"--metrics-listen", ":9090"}, "--metrics-listen :9090 is not a loopback address"},
		{"release: [oci:/r]\nkey: k.pub\nmax-builds: 0\n", nil, "--max-builds 0"},
	} {
		os.WriteFile(cfg, []byte(c.config), 0o644)
		if _, err := settle(append([]string{"--config", cfg}, c.args...)...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q %v: %v, want %q", c.config, c.args, err, c.says)
		}
	}
	os.WriteFile(cfg, []byte("release: [oci:/r]\nkey: k.pub\nlisten: 0.0.0.0:8080\n"), 0o644)
	for _, args := range [][]string{{"--insecure-listen"}, {"--tls-cert", "c.pem", "--tls-key", "k.pem"}, {"--listen", "[::1]:8080"}, {"--listen", "localhost:8080"}} {
		if _, err := settle(append([]string{"--config", cfg}, args...)...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if _, err := (&serveFlags{tlsCert: "c.pem"}).tlsConfig(); err == nil || !strings.Contains(err.Error(), "--tls-cert and --tls-key go together") {
		t.Errorf("a certificate without its key: %v", err)
	}
	// The command refuses before it opens anything.
	if _, err := runBuilder(t, "factory", "serve", "--release", "oci:/nonexistent", "--key", "k.pub", "--listen", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "--insecure-listen") {
		t.Errorf("plain HTTP off loopback: %v", err)
	}
}

// privateCA writes a CA (ca.pem) and a certificate it signed for
// 127.0.0.1 and localhost (server.pem, server.key) into dir.
func privateCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nodeforge test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, IsCA: true, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nodeforge factory"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return caFile, certFile, keyFile
}

// factoryCLI is builder factory serve running in-process.
type factoryCLI struct {
	url, metrics string // https://127.0.0.1:PORT
	log          *testutil.Log
	stop         func() error
}

// startFactoryCLI runs builder factory serve with args until the test
// ends (or stop), once it says where it serves.
func startFactoryCLI(t *testing.T, args ...string) *factoryCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	c := &factoryCLI{log: &testutil.Log{}}
	root.SetOut(io.Discard)
	root.SetErr(c.log)
	root.SetArgs(append([]string{"factory", "serve"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var once sync.Once
	var err error
	c.stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { c.stop() })
	serving, metrics := regexp.MustCompile(`msg=serving address=(\S+)`), regexp.MustCompile(`msg=metrics address=(\S+)/metrics`)
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if m := serving.FindStringSubmatch(c.log.String()); m != nil {
			c.url = m[1]
			if m := metrics.FindStringSubmatch(c.log.String()); m != nil {
				c.metrics = m[1]
			}
			return c
		}
		select {
		case err := <-done:
			t.Fatalf("factory serve ended: %v\n%s", err, c.log)
		default:
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("factory serve did not start:\n%s", c.log)
		}
	}
}

// accessFiles writes a private CA with the factory's certificate, an
// htpasswd file (bcrypt, as htpasswd -B writes it) and a token file into
// dir.
func accessFiles(t *testing.T, dir string) (caFile string) {
	t.Helper()
	caFile, _, _ = privateCA(t, dir)
	h, err := bcrypt.GenerateFromPassword([]byte(accessPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(accessUser+":$2y$"+string(h[4:])+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "tokens"), []byte("ci:"+accessToken+"\n"), 0o600)
	return caFile
}

// tlsClient trusts only the CA in caFile.
func tlsClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(caFile)
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("no CA in", caFile)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// call sends a request (with a user and password, or a token) and
// returns the response with its body read.
func call(t *testing.T, c *http.Client, method, url, body string, login ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	switch len(login) {
	case 1:
		req.Header.Set("Authorization", "Bearer "+login[0])
	case 2:
		req.SetBasicAuth(login[0], login[1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var hdr strings.Builder
	resp.Header.Write(&hdr)
	testutil.CheckNoLocalPaths(t, method+" "+url, hdr.String()+string(b))
	return resp, string(b)
}

// curl runs curl -sS with args and returns the HTTP status and the body.
func curl(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "body")
	b, err := exec.Command(testutil.NeedTool(t, "curl"), append([]string{"-sS", "-o", out, "-w", "%{http_code}"}, args...)...).CombinedOutput()
	if err != nil {
		t.Errorf("curl %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	body, _ := os.ReadFile(out)
	testutil.CheckNoLocalPaths(t, "curl "+strings.Join(args, " "), string(body))
	return string(b), string(body)
}

// TestFactoryAccess: builder factory serve from a config file (flags
// overriding it) over HTTPS with a private CA, logins to build and to
// read metrics, anonymous downloads; no secret in the log or /readyz.
// (The factory's access rules themselves, its registry front behind a
// login over TLS, and a client hanging up mid-build: factory/server's
// tests.)
func TestFactoryAccess(t *testing.T) {
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	dir := t.TempDir()
	caFile := accessFiles(t, dir)
	cfg := filepath.Join(dir, "factory.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`release:
  - store: oci:%s
    key: %s
signing-key: %s
listen: 192.0.2.1:8443  # overridden
metrics-listen: 127.0.0.1:0
external-url: https://config.invalid  # overridden
tls-cert: server.pem
tls-key: server.key
htpasswd: htpasswd
tokens: tokens
login: [build, metrics]
max-builds: 1
`, layout, d.devPub, d.devKey)), 0o644)
	srv := startFactoryCLI(t, "--config", cfg, "--listen", "127.0.0.1:0", "--external-url", "https://flag.example")
	if !strings.HasPrefix(srv.url, "https://127.0.0.1:") || !strings.HasPrefix(srv.metrics, "https://") {
		t.Fatalf("serving at %s, metrics at %s", srv.url, srv.metrics)
	}
	c := tlsClient(t, caFile)

	// curl trusts the private CA when told, and only then.
	if code, body := curl(t, "--cacert", caFile, srv.url+"/versions"); code != "200" || !strings.Contains(body, "1.11.0-demo") {
		t.Errorf("curl --cacert /versions: %s %q", code, body)
	}
	if out, err := exec.Command("curl", "-sS", srv.url+"/versions").CombinedOutput(); err == nil {
		t.Errorf("curl without the CA: %s", out)
	}
	// Schematics: a login to create one.
	resp, body := call(t, c, "POST", srv.url+"/schematics", "{}")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="nodeforge-factory"` {
		t.Errorf("anonymous POST: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	if resp, body := call(t, c, "POST", srv.url+"/schematics", "{}", accessUser, "wrong"); resp.StatusCode != 401 || !strings.Contains(body, "wrong user name, password or token") {
		t.Errorf("a wrong password: %d %q", resp.StatusCode, body)
	}
	resp, body = call(t, c, "POST", srv.url+"/schematics", "{}", accessUser, accessPassword)
	var created struct{ ID string }
	if json.Unmarshal([]byte(body), &created); resp.StatusCode != 201 || len(created.ID) != 64 {
		t.Fatalf("a valid login: %d %q", resp.StatusCode, body)
	}
	if code, body := curl(t, "--cacert", caFile, "-u", accessUser+":"+accessPassword, "--data-binary", "{}", srv.url+"/schematics"); code != "201" || !strings.Contains(body, created.ID) {
		t.Errorf("curl -u POST: %s %q", code, body)
	}
	if resp, _ := call(t, c, "POST", srv.url+"/schematics", "{}", accessToken); resp.StatusCode != 201 {
		t.Errorf("a bearer token: %d", resp.StatusCode)
	}
	// A build needs the login; what the cache holds does not.
	pxe := srv.url + "/pxe/" + created.ID + "/1.11.0-demo/metal-amd64"
	if resp, body := call(t, c, "GET", pxe, ""); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("an anonymous build: %d %q", resp.StatusCode, body)
	}
	if resp, body := call(t, c, "GET", pxe, "", accessToken); resp.StatusCode != 200 || !strings.Contains(body, "kernel https://flag.example/image/"+created.ID) {
		t.Errorf("PXE with a login (and --external-url over the file's): %d %q", resp.StatusCode, body)
	}
	if code, body := curl(t, "--cacert", caFile, srv.url+"/image/"+created.ID+"/1.11.0-demo/cmdline-metal-amd64"); code != "200" || !strings.Contains(body, "talos.platform=metal") {
		t.Errorf("the cached command line, anonymously: %s %q", code, body)
	}
	// Metrics: a login.
	if resp, _ := call(t, c, "GET", srv.metrics+"/metrics", ""); resp.StatusCode != 401 {
		t.Errorf("anonymous metrics: %d", resp.StatusCode)
	}
	resp, metrics := call(t, c, "GET", srv.metrics+"/metrics", "", accessToken)
	if resp.StatusCode != 200 || !strings.Contains(metrics, `nodeforge_factory_requests_total{code="401",route="POST /schematics"} 2`) {
		t.Errorf("metrics with a token: %d\n%s", resp.StatusCode, metrics)
	}
	// No secret in /readyz or the log.
	_, ready := call(t, c, "GET", srv.url+"/readyz", "")
	if err := srv.stop(); err != nil {
		t.Errorf("factory serve ended with %v", err)
	}
	logs := srv.log.String()
	if !strings.Contains(logs, "user=alice ") || !strings.Contains(logs, "user=ci ") || !strings.Contains(logs, "user=127.0.0.1 ") {
		t.Errorf("the log does not name the users:\n%s", logs)
	}
	secrets := []string{accessPassword, accessToken, os.Getenv("COSIGN_PASSWORD"), base64.StdEncoding.EncodeToString([]byte(accessUser + ":" + accessPassword))}
	for _, f := range []string{d.devKey, filepath.Join(dir, "server.key")} {
		b, _ := os.ReadFile(f)
		secrets = append(secrets, strings.Split(string(b), "\n")[1]) // the key's first line of base64
	}
	for _, s := range secrets {
		if len(s) < 8 {
			t.Fatalf("secret %q is too short to look for", s)
		}
		if strings.Contains(logs, s) || strings.Contains(ready, s) {
			t.Errorf("a secret (%.4s...) is in the log or /readyz:\n%s\n%s", s, ready, logs)
		}
	}
}
