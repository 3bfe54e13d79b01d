package k8s

// The chart on a real kube-apiserver and etcd (the second stage of
// docs/kubernetes.md): what no offline check can know, the server's own
// validation, admission and defaulting of every object, RBAC's check that
// whoever grants a Role holds what it grants, and the chart's lookup of its
// own Secret on an upgrade. Each variant is installed with helm for real.
// There is no kubelet or controller here, so no pod runs: that is the next
// stage. Both servers listen on 127.0.0.1 only, on ports picked free.

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

type apiServer struct {
	url, token, kubeconfig string
	client                 *http.Client
}

// start runs bin with args in the background, its output in dir/<name>.log,
// stopped when the test ends; the log's tail is what a failure shows.
func start(t *testing.T, dir, name, bin string, args ...string) string {
	t.Helper()
	log := filepath.Join(dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
	return log
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// waitFor polls ok until it is true or the time is up.
func waitFor(t *testing.T, what, log string, limit time.Duration, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s not ready after %v; its log ends:\n%s", what, limit, logTail(log))
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startAPIServer starts etcd and kube-apiserver (scripts/test-deps.sh
// k8s-server builds both) and returns the server with an admin's token.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	dir := lab.ShortTempDir(t)
	local := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
	client, peer, secure := lab.FreePort(t), lab.FreePort(t), lab.FreePort(t)
	etcdLog := start(t, dir, "etcd", lab.Tool(t, "etcd"), "--name", "lab", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", local(client), "--advertise-client-urls", local(client),
		"--listen-peer-urls", local(peer), "--initial-advertise-peer-urls", local(peer),
		"--initial-cluster", "lab="+local(peer), "--log-level", "warn")
	waitFor(t, "etcd", etcdLog, 30*time.Second, func() bool {
		r, err := http.Get(local(client) + "/health")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})

	// The service accounts' signing key, and a token of system:masters for helm.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := x509.MarshalPKCS8PrivateKey(key)
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	writePEM(t, filepath.Join(dir, "sa.key"), "PRIVATE KEY", priv)
	writePEM(t, filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
	raw := make([]byte, 24)
	_, _ = rand.Read(raw)
	s := &apiServer{url: fmt.Sprintf("https://127.0.0.1:%d", secure), token: hex.EncodeToString(raw)}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(s.token+`,uds-lab-test,uds-lab-test,"system:masters"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	apiLog := start(t, dir, "kube-apiserver", lab.Tool(t, "kube-apiserver"),
		"--etcd-servers", local(client), "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(secure),
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"), "--service-cluster-ip-range", "10.96.0.0/16",
		// No Endpoints for the kubernetes Service: nothing here dials it.
		"--endpoint-reconciler-type", "none")
	// Its certificate is self-signed, made at start in --cert-dir.
	s.client = &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test's own server
	waitFor(t, "kube-apiserver", apiLog, 3*time.Minute, func() bool {
		code, _ := s.get("/readyz")
		return code == http.StatusOK
	})
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: lab, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: lab, context: {cluster: lab, user: admin}}]
current-context: lab
`, s.url, s.token)
	if err := os.WriteFile(s.kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *apiServer) get(path string) (int, []byte) {
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.token)
	r, err := s.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// password is the Prometheus login the chart keeps in its Secret.
func (s *apiServer) password(t *testing.T, ns string) string {
	t.Helper()
	code, body := s.get("/api/v1/namespaces/" + ns + "/secrets/" + release + "-prometheus-auth")
	if code != http.StatusOK {
		t.Fatalf("the chart's Secret in %s: HTTP %d: %s", ns, code, body)
	}
	var secret struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(body, &secret); err != nil {
		t.Fatal(err)
	}
	p, err := base64.StdEncoding.DecodeString(secret.Data["password"])
	if err != nil || len(p) == 0 {
		t.Fatalf("the chart's Secret has no password (%v): %v", err, secret.Data)
	}
	return string(p)
}

func TestChartOnARealAPIServer(t *testing.T) {
	s := startAPIServer(t)
	// The prometheus-operator's PodMonitor CRD, for the cluster-prometheus
	// variant: the server checks its objects against the CRD's schema.
	installCRDs(t, s)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ns := "lab-" + v.name
			args := append([]string{"install", release, chartDir(t), "--namespace", ns, "--create-namespace",
				"--kubeconfig", s.kubeconfig}, setArgs(v.sets)...)
			if out, err := helm(t, args...); err != nil {
				t.Fatalf("helm install %v: the server refused it: %v\n%s", v.sets, err, out)
			}
			// Every object the chart rendered is on the server, in its namespace.
			m := parse(t, render(t, v.sets))
			for _, o := range m {
				if clusterScoped[o.Kind] { // named after the namespace too: render's is not ns
					o.Metadata.Name = strings.Replace(o.Metadata.Name, "-"+namespace+"-", "-"+ns+"-", 1)
				}
				code, body := s.get(objectPath(ns, o))
				if code != http.StatusOK {
					t.Errorf("%s %s: HTTP %d after the install: %.200s", o.Kind, o.Metadata.Name, code, body)
				}
			}
		})
	}
	// The server's own rules reach further than the OpenAPI schemas
	// kubeconform checks: a container port's name of more than 15 characters
	// passes every offline check and is refused here, so this stage must
	// stay a real server's.
	t.Run("refuses what only the server knows", func(t *testing.T) {
		chart := filepath.Join(t.TempDir(), "uds-lab")
		if out, err := exec.Command("cp", "-RL", chartDir(t), chart).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		app := filepath.Join(chart, "templates", "app.yaml")
		b, err := os.ReadFile(app)
		if err != nil {
			t.Fatal(err)
		}
		const port = "            - name: app-http\n"
		if !strings.Contains(string(b), port) {
			t.Fatalf("%s names no port app-http: update this test", app)
		}
		if err := os.WriteFile(app, []byte(strings.Replace(string(b), port, "            - name: app-http-listener\n", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = helm(t, "install", release, chart, "--namespace", "lab-refused", "--create-namespace", "--kubeconfig", s.kubeconfig)
		if err == nil || !strings.Contains(err.Error(), "must be no more than 15 characters") {
			t.Fatalf("a port named app-http-listener: want the server's refusal, got %v", err)
		}
	})
	// Two releases in one namespace, each with a run: both are installed,
	// and every object of each is on the server, labelled with its release.
	t.Run("two releases in one namespace", func(t *testing.T) {
		const ns = "lab-two"
		sets := setArgs([]string{"load.enabled=true", "load.testid=t1"})
		for _, rel := range []string{release, "second"} {
			args := append([]string{"install", rel, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig}, sets...)
			if out, err := helm(t, args...); err != nil {
				t.Fatalf("helm install %s beside another release: %v\n%s", rel, err, out)
			}
		}
		for _, rel := range []string{release, "second"} {
			out, err := helm(t, append([]string{"template", rel, chartDir(t), "--namespace", ns}, sets...)...)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range parse(t, out) {
				code, body := s.get(objectPath(ns, o))
				if code != http.StatusOK || !strings.Contains(string(body), `"app.kubernetes.io/instance":"`+rel+`"`) {
					t.Errorf("release %s: %s %s: HTTP %d, not the release's: %.200s", rel, o.Kind, o.Metadata.Name, code, body)
				}
			}
		}
	})
	t.Run("restricted pod security", func(t *testing.T) { testPodSecurity(t, s) })
	t.Run("cadvisor permissions", func(t *testing.T) { testCadvisorRBAC(t, s) })
	t.Run("node-exporter needs privileged", func(t *testing.T) { testNodeExporterPodSecurity(t, s) })
	t.Run("cluster.json names each pod's node", func(t *testing.T) { testClusterPlacement(t, s) })
	t.Run("the replay's ConfigMaps", func(t *testing.T) { testReplayConfigMaps(t, s) })
	t.Run("uninstall leaves nothing", func(t *testing.T) { uninstallLeavesNothing(t, s) })
	t.Run("the report reads the cluster's Prometheus", func(t *testing.T) { reportReadsTheClusterPrometheus(t, s) })
	t.Run("upgrade keeps the password", func(t *testing.T) {
		ns := "lab-upgrade"
		if out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig); err != nil {
			t.Fatalf("helm install: %v\n%s", err, out)
		}
		before := s.password(t, ns)
		if out, err := helm(t, "upgrade", release, chartDir(t), "--namespace", ns, "--kubeconfig", s.kubeconfig,
			"--set", "load.enabled=true", "--set", "load.testid=u1"); err != nil {
			t.Fatalf("helm upgrade: %v\n%s", err, out)
		}
		if after := s.password(t, ns); after != before {
			t.Errorf("the upgrade made a new Prometheus password: readers that hold the old one are locked out")
		}
	})
}

// objectPath is the API path of an object the chart renders (in ns where namespaced).
func objectPath(ns string, o *Object) string {
	group := map[string]string{"v1": "/api/v1"}[o.APIVersion]
	if group == "" {
		group = "/apis/" + o.APIVersion
	}
	plural := strings.ToLower(o.Kind) + "s"
	if strings.HasSuffix(plural, "ys") {
		plural = strings.TrimSuffix(plural, "ys") + "ies"
	}
	if clusterScoped[o.Kind] {
		return fmt.Sprintf("%s/%s/%s", group, plural, o.Metadata.Name)
	}
	return fmt.Sprintf("%s/namespaces/%s/%s/%s", group, ns, plural, o.Metadata.Name)
}

// The chart's cluster-wide kinds (costs.cadvisor's RBAC).
var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true}

// make k8s-load's Job is the release's: scripts/k8s.sh load (run for real,
// against this server) adds it with helm upgrade, so helm get manifest lists
// it and helm uninstall removes it with everything else; after the uninstall
// the namespace holds no object at all (every namespaced resource the server
// serves is listed). Before the Job joined the release, k8s.sh applied it
// with kubectl, and it stayed. A run's settings are its own (the last run's
// K8S_SET does not leak into the next), the release's other values stay
// (a sysctl given at install), and the last run's Job goes.
func uninstallLeavesNothing(t *testing.T, s *apiServer) {
	const ns = "lab-uninstall"
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig,
		"--set", "sysctls.somaxconn=64"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	// No kubelet here: no pod ever gets ready, so helm's --wait (k8s.sh's
	// first upgrade) could only time out. A helm on PATH drops it.
	bin := t.TempDir()
	shim := "#!/usr/bin/env bash\na=(); for x in \"$@\"; do [ \"$x\" = --wait ] || a+=(\"$x\"); done\nexec " + lab.Tool(t, "helm") + " \"${a[@]}\"\n"
	if err := os.WriteFile(filepath.Join(bin, "helm"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(id string, env ...string) []byte {
		t.Helper()
		t.Cleanup(func() { os.RemoveAll(lab.Path(t, "results", id)) })
		cmd := exec.Command(lab.Path(t, "scripts", "k8s.sh"), "load")
		cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+filepath.Dir(lab.Tool(t, "kubectl"))+":"+os.Getenv("PATH"),
			"KUBECONFIG="+s.kubeconfig, "K8S_NAMESPACE="+ns, "TESTID="+id, "K8S_TIMEOUT=1"), env...)
		out, err := cmd.CombinedOutput()
		// The Job never runs here: k8s.sh waits K8S_TIMEOUT and says so.
		job := named("openloop-" + id)
		if !strings.Contains(string(out), "job/"+job+": not finished after K8S_TIMEOUT=1 s") {
			t.Fatalf("k8s.sh load: %v\n%s\nwant it to start job/%s and wait for it", err, out, job)
		}
		code, body := s.get("/apis/batch/v1/namespaces/" + ns + "/jobs/" + job)
		if code != http.StatusOK {
			t.Fatalf("job/%s after k8s.sh load: HTTP %d %.200s", job, code, body)
		}
		return body
	}
	if job := load("gone1", "K8S_SET=load.rate=50"); !strings.Contains(string(job), `{"name":"RATE","value":"50"}`) {
		t.Errorf("job/lab-openloop-gone1 does not run K8S_SET's rate: %.300s", job)
	}
	manifest, err := helm(t, "get", "manifest", release, "--namespace", ns, "--kubeconfig", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Job\nmetadata:\n  name: " + named("openloop-gone1"), "name: " + release + "-openloop"} {
		if !strings.Contains(manifest, want) {
			t.Errorf("the release's manifest after k8s.sh load has no %q: the run's Job is not the release's", want)
		}
	}
	if job := load("gone2"); !strings.Contains(string(job), `{"name":"RATE","value":"500"}`) {
		t.Errorf("job/lab-openloop-gone2 does not run values.yaml's rate (the last run's K8S_SET leaked?): %.300s", job)
	}
	if code, _ := s.get("/apis/batch/v1/namespaces/" + ns + "/jobs/" + named("openloop-gone1")); code != http.StatusNotFound {
		t.Errorf("job/lab-openloop-gone1 after the next run: HTTP %d, want 404 (the release's last run only)", code)
	}
	if _, body := s.get("/apis/apps/v1/namespaces/" + ns + "/deployments/" + named("app")); !strings.Contains(string(body), `"sysctls":[{"name":"net.core.somaxconn","value":"64"}]`) {
		t.Errorf("the app's pod lost the release's sysctls.somaxconn=64 in a run: %.300s", body)
	}
	if out, err := helm(t, "uninstall", release, "--namespace", ns, "--kubeconfig", s.kubeconfig, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if left := s.objectsIn(t, ns); len(left) > 0 {
		t.Errorf("helm uninstall left %d object(s) in %s: %v", len(left), ns, left)
	}
}

// scripts/k8s.sh report with the cluster's Prometheus (prometheus.enabled=false):
// without K8S_PROMETHEUS it says the release runs none and how to name the
// cluster's; with it, it port-forwards to that Service in its namespace (no
// pod answers here, so kubectl's refusal names it) and reads no Secret of the
// release's (there is none). helm uninstall removes the PodMonitors too.
func reportReadsTheClusterPrometheus(t *testing.T, s *apiServer) {
	const ns = "lab-report"
	args := append([]string{"install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig}, setArgs(clusterPrometheusSets)...)
	if out, err := helm(t, args...); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	report := func(env ...string) string {
		cmd := exec.Command(lab.Path(t, "scripts", "k8s.sh"), "report")
		cmd.Env = append(append(os.Environ(), "PATH="+filepath.Dir(lab.Tool(t, "helm"))+":"+filepath.Dir(lab.Tool(t, "kubectl"))+":"+os.Getenv("PATH"),
			"KUBECONFIG="+s.kubeconfig, "K8S_NAMESPACE="+ns, "RUN=r1"), env...)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := report(); !strings.Contains(out, "release lab runs no Prometheus (prometheus.enabled=false): name the cluster's, K8S_PROMETHEUS=<namespace>/<service>:<port>") {
		t.Errorf("k8s.sh report without K8S_PROMETHEUS: %s", out)
	}
	if out := report("K8S_PROMETHEUS=monitoring/kube-prometheus-stack-prometheus:9090"); !strings.Contains(out, "kubectl port-forward to svc/kube-prometheus-stack-prometheus in monitoring did not start") ||
		strings.Contains(out, "prometheus-auth") {
		t.Errorf("k8s.sh report with K8S_PROMETHEUS: %s\nwant its port-forward to that Service, and no Secret read", out)
	}
	// The PodMonitors go with the release.
	if out, err := helm(t, "uninstall", release, "--namespace", ns, "--kubeconfig", s.kubeconfig, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	if left := s.objectsIn(t, ns); len(left) > 0 {
		t.Errorf("helm uninstall left %d object(s) in %s: %v", len(left), ns, left)
	}
}

// objectsIn lists every object in a namespace, of every namespaced resource
// the server serves that can be listed (discovery), but what the namespace's
// own controllers would make in any namespace (none run here) and Events.
func (s *apiServer) objectsIn(t *testing.T, ns string) []string {
	t.Helper()
	type resources struct {
		GroupVersion string `json:"groupVersion"`
		Resources    []struct {
			Name       string   `json:"name"`
			Kind       string   `json:"kind"`
			Namespaced bool     `json:"namespaced"`
			Verbs      []string `json:"verbs"`
		} `json:"resources"`
	}
	prefixes := []string{"/api/v1"}
	code, body := s.get("/apis")
	if code != http.StatusOK {
		t.Fatalf("/apis: HTTP %d", code)
	}
	var groups struct {
		Groups []struct {
			PreferredVersion struct {
				GroupVersion string `json:"groupVersion"`
			} `json:"preferredVersion"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(body, &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		prefixes = append(prefixes, "/apis/"+g.PreferredVersion.GroupVersion)
	}
	var left []string
	listed := 0
	for _, p := range prefixes {
		code, body := s.get(p)
		if code != http.StatusOK {
			t.Fatalf("%s: HTTP %d", p, code)
		}
		var rs resources
		if err := json.Unmarshal(body, &rs); err != nil {
			t.Fatal(err)
		}
		for _, r := range rs.Resources {
			if !r.Namespaced || strings.Contains(r.Name, "/") || !contains(r.Verbs, "list") {
				continue
			}
			code, body := s.get(p + "/namespaces/" + ns + "/" + r.Name)
			if code != http.StatusOK {
				t.Fatalf("listing %s in %s: HTTP %d %.200s", r.Name, ns, code, body)
			}
			listed++
			var list struct {
				Items []struct {
					Metadata struct {
						Name string `json:"name"`
					} `json:"metadata"`
					Reason  string `json:"reason"`  // an Event's
					Message string `json:"message"` // an Event's
				} `json:"items"`
			}
			if err := json.Unmarshal(body, &list); err != nil {
				t.Fatal(err)
			}
			for _, it := range list.Items {
				if (r.Kind == "ConfigMap" && it.Metadata.Name == "kube-root-ca.crt") || (r.Kind == "ServiceAccount" && it.Metadata.Name == "default") {
					continue
				}
				// An Event is the cluster's record about an object, which
				// expires (--event-ttl), not an object of the lab's: the API
				// server's own controllers write some here.
				if r.Kind == "Event" {
					t.Logf("an Event in %s, not counted: %s: %s %s", ns, it.Metadata.Name, it.Reason, it.Message)
					continue
				}
				left = append(left, r.Kind+"/"+it.Metadata.Name)
			}
		}
	}
	if listed < 20 {
		t.Fatalf("listed only %d kinds of objects: discovery is not what this test expects", listed)
	}
	return left
}
