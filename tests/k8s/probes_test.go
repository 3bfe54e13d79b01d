package k8s

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// A stand-in app: any answer on a TCP port and on a Unix socket, each of
// which the test can stop.
type probeApp struct {
	tcp, unix *http.Server
	port      int
	socket    string
}

func startProbeApp(t *testing.T) *probeApp {
	t.Helper()
	dir := lab.ShortTempDir(t)
	if err := os.Chmod(dir, 0o755); err != nil { // nginx's workers run as another user here
		t.Fatal(err)
	}
	a := &probeApp{socket: filepath.Join(dir, "app.sock")}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"ok":true}`)) })
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ul, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(a.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	a.port = tl.Addr().(*net.TCPAddr).Port
	a.tcp, a.unix = &http.Server{Handler: h}, &http.Server{Handler: h}
	go func() { _ = a.tcp.Serve(tl) }()
	go func() { _ = a.unix.Serve(ul) }()
	t.Cleanup(func() { a.stop(a.tcp); a.stop(a.unix) })
	return a
}

func (a *probeApp) stop(s *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// The chart's probes, run here against real nginx on the config each nginx
// renders: the sidecar's readiness (nginx/healthcheck.sh) passes with the app
// up, and fails when the app stops answering on its socket alone (what a
// socket-only app's probe must see); the nginx in its own pod's passes with
// the app's TCP port up and fails without it, and fails when nginx itself is
// down; nginx's liveness, its path and port read from the chart, holds while
// the app is down and fails with nginx down.
func TestProbesAgainstRealNginx(t *testing.T) {
	m := parse(t, render(t, nil))
	for _, c := range []struct {
		deploy string
		stop   func(a *probeApp) // what the readiness probe must notice
	}{
		{"app", func(a *probeApp) { a.stop(a.unix) }},
		{"nginx", func(a *probeApp) { a.stop(a.tcp) }},
	} {
		t.Run(c.deploy, func(t *testing.T) {
			app := startProbeApp(t)
			port, status := lab.FreePort(t), lab.FreePort(t)
			pod := &m.must(t, "Deployment", named(c.deploy)).Spec.Template.Spec
			nginxC := pod.Container("nginx")
			override := map[string]string{
				"NGINX_LISTEN_PORT": strconv.Itoa(port), "NGINX_STATUS_PORT": strconv.Itoa(status),
				"APP_TCP_UPSTREAM": "127.0.0.1:" + strconv.Itoa(app.port), "APP_UNIX_SOCKET": app.socket,
			}
			dir, _ := renderChartNginxWith(t, m, c.deploy, override)
			user := ""
			if os.Geteuid() == 0 {
				user = "user nobody nogroup;"
			}
			nginx := exec.Command(lab.Tool(t, "nginx"), "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off; "+user)
			log, err := os.Create(filepath.Join(t.TempDir(), "nginx.log"))
			if err != nil {
				t.Fatal(err)
			}
			nginx.Stdout, nginx.Stderr = log, log
			if err := nginx.Start(); err != nil {
				t.Fatal(err)
			}
			stopped := false
			stopNginx := func() {
				if !stopped {
					stopped = true
					_ = nginx.Process.Signal(os.Interrupt)
					_ = nginx.Wait()
				}
			}
			t.Cleanup(stopNginx)

			// The probe as the kubelet would run it, in the container's environment.
			probe := nginxC.ReadinessProbe
			if probe == nil || probe.Exec == nil {
				t.Fatal("nginx has no exec readiness probe")
			}
			argv := append([]string{}, probe.Exec.Command...)
			for i, a := range argv {
				argv[i] = strings.ReplaceAll(a, "127.0.0.1:"+nginxC.EnvMap()["NGINX_LISTEN_PORT"], "127.0.0.1:"+strconv.Itoa(port))
			}
			if len(argv) == 2 && argv[1] == "/lab/healthcheck.sh" { // the ConfigMap's script, mounted at /lab
				cm := m.must(t, "ConfigMap", release+"-nginx-templates")
				argv[1] = filepath.Join(t.TempDir(), "healthcheck.sh")
				writeFile(t, argv[1], cm.Data["healthcheck.sh"])
			}
			env := []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range nginxC.EnvMap() {
				if o, ok := override[k]; ok {
					v = o
				}
				env = append(env, k+"="+v)
			}
			ready := func() error {
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					return &probeError{err, string(out)}
				}
				return nil
			}
			// nginx's liveness as the chart renders it: its path, on the port it names.
			live := nginxC.LivenessProbe
			if live == nil || live.HTTPGet == nil || !strings.HasPrefix(live.HTTPGet.Path, "/") {
				t.Fatal("nginx has no HTTP liveness probe")
			}
			livePort := map[int]int{
				atoi(t, nginxC.EnvMap()["NGINX_LISTEN_PORT"]): port, atoi(t, nginxC.EnvMap()["NGINX_STATUS_PORT"]): status,
			}[probePort(t, nginxC, live.HTTPGet.Port)]
			if livePort == 0 {
				t.Fatalf("nginx's liveness probe asks port %v: neither its listener nor its status port", live.HTTPGet.Port)
			}
			alive := func() error {
				resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(livePort) + live.HTTPGet.Path)
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return &probeError{nil, resp.Status}
				}
				return nil
			}
			deadline := time.Now().Add(10 * time.Second)
			for ready() != nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if err := ready(); err != nil {
				b, _ := os.ReadFile(log.Name())
				t.Fatalf("readiness with the app up: %v\nnginx:\n%s", err, b)
			}
			c.stop(app)
			if err := ready(); err == nil {
				t.Error("readiness passed with the app down on the listener it must check")
			}
			app.stop(app.tcp) // the app wholly down: nginx's liveness is nginx's own
			app.stop(app.unix)
			if err := alive(); err != nil {
				t.Errorf("nginx's liveness (%s) failed with the app down: %v (a stuck app would restart nginx)", live.HTTPGet.Path, err)
			}
			stopNginx()
			if err := ready(); err == nil {
				t.Error("readiness passed with nginx down")
			}
			if err := alive(); err == nil {
				t.Error("liveness passed with nginx down")
			}
		})
	}
}

type probeError struct {
	err error
	out string
}

func (e *probeError) Error() string {
	if e.err == nil {
		return e.out
	}
	return e.err.Error() + ": " + e.out
}

// probePort: the container port a probe's port names (a number, or the name of one of the container's ports).
func probePort(t *testing.T, c *Container, port any) int {
	t.Helper()
	switch p := port.(type) {
	case int:
		return p
	case string:
		for _, cp := range c.Ports {
			if cp.Name == p {
				return cp.ContainerPort
			}
		}
		return atoi(t, p)
	}
	t.Fatalf("a probe's port %v (%T): neither a number nor a name", port, port)
	return 0
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: not a port number", s)
	}
	return n
}
