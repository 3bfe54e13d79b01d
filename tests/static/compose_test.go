// Package static checks the lab's config files with the real loaders and tools:
// compose-go (the library inside `docker compose`), nginx -t, promtool, and the
// Grafana provisioning and dashboard files against each other.
package static

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"uds-lab/tests/internal/lab"
)

// loadCompose loads compose.yaml as `docker compose --profile load --profile contract --profile report config`
// would, with .env and no variables from this process's environment.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions(
		[]string{lab.Path(t, "compose.yaml")},
		cli.WithWorkingDirectory(lab.Root(t)),
		cli.WithEnvFiles(lab.Path(t, ".env")),
		cli.WithDotEnv,
		cli.WithProfiles([]string{"load", "contract", "report"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	return p
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:?[-?+][^}]*)?\}`)

// Every ${VAR} in compose.yaml is set in .env or has a default in place, so a
// fresh clone never runs with an empty value.
func TestComposeVariablesComeFromEnv(t *testing.T) {
	src, err := os.ReadFile(lab.Path(t, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := lab.Env(t)
	for _, m := range composeVar.FindAllStringSubmatch(string(src), -1) {
		if _, ok := env[m[1]]; !ok && !strings.HasPrefix(m[2], ":-") {
			t.Errorf("compose.yaml uses ${%s} with no default and .env does not set it", m[1])
		}
	}
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	want := []string{"app", "nginx", "nginx-lo", "nginx-log-exporter", "nginx-exporter", "prometheus", "grafana", "node-exporter", "cadvisor", "k6", "wrk", "oha", "contract"}
	for _, name := range want {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("service %q missing", name)
		}
	}
	for name, profile := range map[string]string{"k6": "load", "wrk": "load", "oha": "load", "contract": "contract", "report": "report"} {
		if got := p.Services[name].Profiles; len(got) != 1 || got[0] != profile {
			t.Errorf("%s profiles = %v, want [%s] so that `make up` does not start it", name, got, profile)
		}
	}
}

// Published ports are for this machine only.
func TestComposePortsOnLoopback(t *testing.T) {
	for name, s := range loadCompose(t).Services {
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q, want 127.0.0.1", name, port.Published, port.HostIP)
			}
		}
	}
}

var exactTag = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)

// Every image users pull has an exact version; only what the lab builds from
// services/ has a local tag.
func TestComposeImagesPinned(t *testing.T) {
	for name, s := range loadCompose(t).Services {
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(s.Build.Context, "Dockerfile")); err != nil {
				t.Errorf("%s builds from %s: %v", name, s.Build.Context, err)
			}
			continue
		}
		i := strings.LastIndex(s.Image, ":")
		if i < 0 || !exactTag.MatchString(s.Image[i+1:]) {
			t.Errorf("%s image %q has no exact x.y.z tag", name, s.Image)
		}
	}
}

// Services start in order of readiness, not of creation.
func TestComposeHealthAndOrder(t *testing.T) {
	p := loadCompose(t)
	// Images without a shell or client to run a healthcheck, or that exit.
	noHealthcheck := map[string]string{
		"nginx-exporter":  "scratch image: no shell, no wget",
		"openloop":        "runs the plan once and exits",
		"k6":              "runs once and exits",
		"wrk":             "runs the plan once and exits",
		"oha":             "runs the plan once and exits",
		"contract":        "runs once per step and exits",
		"report":          "runs once and exits",
		"drive":           "runs once per step of a run and exits",
		"prometheus-auth": "writes Prometheus's web config and exits",
	}
	for name, s := range p.Services {
		if _, ok := noHealthcheck[name]; ok {
			continue
		}
		// What the lab builds carries its HEALTHCHECK in its Dockerfile, so a
		// swapped-in image brings its own.
		if s.HealthCheck == nil && !dockerfileHasHealthcheck(s) {
			t.Errorf("%s has no healthcheck in compose.yaml or its Dockerfile", name)
		}
		for dep, d := range s.DependsOn {
			_, unhealthy := noHealthcheck[dep]
			// Any image may be the app, with or without a HEALTHCHECK: nginx
			// waits for it to be started and decides itself when it answers
			// (TestNginxDecidesAppReadiness).
			if dep == "app" {
				continue
			}
			if unhealthy && s.Profiles == nil && p.Services[dep].Profiles == nil && d.Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s depends on the one-shot %s with condition %q, want service_completed_successfully", name, dep, d.Condition)
			}
			if !unhealthy && d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s depends on %s with condition %q, want service_healthy", name, dep, d.Condition)
			}
		}
	}
}

func dockerfileHasHealthcheck(s types.ServiceConfig) bool {
	if s.Build == nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(s.Build.Context, "Dockerfile"))
	return err == nil && regexp.MustCompile(`(?m)^HEALTHCHECK `).Match(b)
}

// The measured services have CPU and memory limits from .env.
func TestComposeLimits(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"app", "nginx", "k6"} {
		s := p.Services[name]
		if s.CPUS <= 0 || s.MemLimit <= 0 {
			t.Errorf("%s: cpus=%v mem_limit=%v, want both set", name, s.CPUS, s.MemLimit)
		}
	}
}

// nginx-lo is nginx in the app's network namespace: the same image, command,
// user, limits and hardening, and the same settings but for where it listens,
// its locations' suffix and the app's TCP address (loopback, checked by
// TestComposeTCPUpstream). Otherwise a difference between tcp and tcp-lo
// could come from the nginx, not the hop.
func TestNginxLoIsNginx(t *testing.T) {
	p := loadCompose(t)
	n, lo := p.Services["nginx"], p.Services["nginx-lo"]
	if lo.NetworkMode != "service:app" {
		t.Errorf("nginx-lo network_mode %q, want service:app", lo.NetworkMode)
	}
	same := func(what string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: nginx %v, nginx-lo %v", what, a, b)
		}
	}
	same("image", n.Image, lo.Image)
	same("command", n.Command, lo.Command)
	same("user", n.User, lo.User)
	same("cpus", n.CPUS, lo.CPUS)
	same("cpuset", n.CPUSet, lo.CPUSet)
	same("mem_limit", n.MemLimit, lo.MemLimit)
	same("read_only", n.ReadOnly, lo.ReadOnly)
	same("tmpfs", n.Tmpfs, lo.Tmpfs)
	same("cap_drop", n.CapDrop, lo.CapDrop)
	differ := map[string]bool{"NGINX_LISTEN_PORT": true, "NGINX_STATUS_PORT": true, "NGINX_PATH_SUFFIX": true, "APP_TCP_UPSTREAM": true}
	for k, v := range n.Environment {
		if w, ok := lo.Environment[k]; !ok {
			t.Errorf("nginx-lo lacks %s", k)
		} else if !differ[k] && *v != *w {
			t.Errorf("%s: nginx %q, nginx-lo %q", k, *v, *w)
		}
	}
}

// Every client of the app's socket (nginx and nginx-lo through the rendered
// template, the contract checker through CONTRACT_SOCKET) finds it where the
// app creates it: in the same named volume, at the same path inside it. A
// client with another volume, or the volume mounted elsewhere than the path it
// dials, would see no socket.
func TestComposeSocketShared(t *testing.T) {
	p := loadCompose(t)
	app := p.Services["app"]
	sock := *app.Environment["APP_UNIX_SOCKET"]
	volume, rel := inVolume(app, sock)
	if volume == "" {
		t.Fatalf("app: APP_UNIX_SOCKET %s is in no named volume of the app's", sock)
	}
	dialed := map[string][]string{}
	for _, name := range []string{"nginx", "nginx-lo"} {
		for _, m := range unixUpstream.FindAllStringSubmatch(renderedAll(t, p, name), -1) {
			dialed[name] = append(dialed[name], m[1])
		}
	}
	dialed["contract"] = []string{*p.Services["contract"].Environment["CONTRACT_SOCKET"]}
	for name, paths := range dialed {
		if len(paths) == 0 {
			t.Errorf("%s dials no unix: socket", name)
		}
		for _, path := range paths {
			if v, r := inVolume(p.Services[name], path); v != volume || r != rel {
				t.Errorf("%s dials %s: in volume %q at %q; the app creates it in volume %q at %q", name, path, v, r, volume, rel)
			}
		}
	}
}

// Both nginx write their access log where the exporter reads it: .env's
// NGINX_ACCESS_LOG names LOG_EXPORTER_PIPE, in the same named volume at the
// same place (nginx read-only), written a buffer at a time, and the exporter
// runs in nginx's group (the FIFO is 0660), and the exporter opens no socket
// (anything on the lab's network could send it lines); or, the alternative,
// sends by syslog to the exporter's UDP port, which then opens it. No service
// sets a sysctl: a rootless engine hides many in a container (net.unix.*,
// net.core.*) and would not start it.
func TestComposeLogSocket(t *testing.T) {
	p := loadCompose(t)
	exp := p.Services["nginx-log-exporter"]
	pipe := *exp.Environment["LOG_EXPORTER_PIPE"]
	syslog := *exp.Environment["LOG_EXPORTER_SYSLOG_ADDR"]
	al := lab.Env(t)["NGINX_ACCESS_LOG"]
	switch {
	case strings.HasPrefix(al, pipe+" "):
		if !strings.Contains(al, " buffer=") {
			t.Errorf(".env NGINX_ACCESS_LOG=%q: the pipe is there to be written a buffer at a time (buffer=)", al)
		}
		if syslog != "" {
			t.Errorf("nginx-log-exporter: LOG_EXPORTER_SYSLOG_ADDR=%q with the log through the pipe: a socket nobody needs, open to forged lines", syslog)
		}
	case strings.HasPrefix(al, "syslog:server=nginx-log-exporter:"):
		_, port, err := net.SplitHostPort(syslog)
		if err != nil || !strings.HasPrefix(al, "syslog:server=nginx-log-exporter:"+port+",") {
			t.Errorf(".env NGINX_ACCESS_LOG=%q: LOG_EXPORTER_SYSLOG_ADDR=%q, want its port (%v)", al, syslog, err)
		}
	default:
		t.Errorf(".env NGINX_ACCESS_LOG=%q, want %s ... or syslog:server=nginx-log-exporter:<port>,...", al, pipe)
	}
	volume, rel := inVolume(exp, pipe)
	if volume == "" {
		t.Fatalf("nginx-log-exporter: %s is in no named volume of its own", pipe)
	}
	_, expGroup, _ := strings.Cut(exp.User, ":")
	for _, name := range []string{"nginx", "nginx-lo"} {
		s := p.Services[name]
		if *s.Environment["NGINX_ACCESS_LOG"] != al {
			t.Errorf("%s: NGINX_ACCESS_LOG %q, want .env's", name, *s.Environment["NGINX_ACCESS_LOG"])
		}
		if v, r := inVolume(s, pipe); v != volume || r != rel {
			t.Errorf("%s finds %s in volume %q at %q; the exporter has it in %q at %q", name, pipe, v, r, volume, rel)
		}
		for _, v := range s.Volumes {
			if v.Source == volume && !v.ReadOnly {
				t.Errorf("%s mounts the log volume writable", name)
			}
		}
		if _, group, _ := strings.Cut(s.User, ":"); group == "" || group != expGroup {
			t.Errorf("%s runs as %q, the exporter as %q: the FIFO's group (0660) must be nginx's", name, s.User, exp.User)
		}
	}
	for name, s := range p.Services {
		if len(s.Sysctls) > 0 {
			t.Errorf("%s sets sysctls %v: a rootless engine cannot start it", name, s.Sysctls)
		}
	}
}

// Every client of the app's TCP listener reaches its port: nginx across the
// bridge at the app's service name, nginx-lo (in the app's network namespace)
// on loopback, the contract checker as nginx does.
func TestComposeTCPUpstream(t *testing.T) {
	p := loadCompose(t)
	_, port, err := net.SplitHostPort(*p.Services["app"].Environment["APP_TCP_ADDR"])
	if err != nil {
		t.Fatalf("app APP_TCP_ADDR: %v", err)
	}
	want := map[string]string{"nginx": "app", "nginx-lo": "127.0.0.1", "contract": "app"}
	dialed := map[string][]string{"contract": {*p.Services["contract"].Environment["CONTRACT_TCP"]}}
	for _, name := range []string{"nginx", "nginx-lo"} {
		for _, m := range tcpUpstream.FindAllStringSubmatch(renderedAll(t, p, name), -1) {
			dialed[name] = append(dialed[name], m[1]+m[2])
		}
	}
	for name, addrs := range dialed {
		if len(addrs) == 0 {
			t.Errorf("%s dials no TCP upstream", name)
		}
		for _, a := range addrs {
			if a != want[name]+":"+port {
				t.Errorf("%s dials %s, want %s:%s (the app listens on %s)", name, a, want[name], port, port)
			}
		}
	}
}

var (
	// server unix:/sock/app.sock;, proxy_pass http://unix:/sock/app.sock:/;
	// and fastcgi_pass unix:/sock/app.sock; (not the access log's
	// syslog:server=unix:..., see TestComposeLogSocket)
	unixUpstream = regexp.MustCompile(`(?:server |http://|fastcgi_pass )unix:(/[^;:\s]+)`)
	// server host:port; in an upstream block, proxy_pass http://host:port/;
	// and fastcgi_pass host:port;
	tcpUpstream = regexp.MustCompile(`(?m)^\s*(?:server ([^\s;:]+:[0-9]+);|(?:proxy_pass http://|fastcgi_pass )([^\s/:;]+:[0-9]+)/?;)`)
)

// renderedAll renders the templates as compose service svc would, in every
// protocol a stack uses (APP_PROTOCOL), and returns all the files rendered:
// the main config and the pass/<protocol>/ snippets that dial the app.
func renderedAll(t *testing.T, p *types.Project, svc string) string {
	t.Helper()
	var all strings.Builder
	for _, protocol := range protocols(t) {
		dir := t.TempDir()
		// The upstream as compose gives it (renderNginx maps service names to
		// 127.0.0.1 for nginx -t, which must resolve them).
		renderNginx(t, p, svc, dir, map[string]string{
			"APP_PROTOCOL": protocol, "APP_TCP_UPSTREAM": *p.Services[svc].Environment["APP_TCP_UPSTREAM"]})
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".conf") {
				b, rerr := os.ReadFile(path)
				all.Write(b)
				return rerr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all.String()
}

// inVolume tells which named volume of s holds path, and where inside it.
func inVolume(s types.ServiceConfig, path string) (volume, rel string) {
	for _, v := range s.Volumes {
		if r, ok := strings.CutPrefix(path, v.Target+"/"); ok && v.Type == types.VolumeTypeVolume {
			return v.Source, r
		}
	}
	return "", ""
}

// cAdvisor samples at a fixed interval: with dynamic housekeeping a quiet
// container's samples drift up to 60 s apart, and with the default jitter
// factor (1.0) up to twice the interval, so a 10 s phase held no sample at all
// and the report's per-phase figures went missing. At most 6 s apart, a 10 s
// phase holds one or two samples and the report reads the rest around it.
func TestCAdvisorSamplesAtAFixedInterval(t *testing.T) {
	flags := map[string]string{"allow_dynamic_housekeeping": "true", "jitter_factor": "1.0"} // cAdvisor's defaults
	for _, arg := range loadCompose(t).Services["cadvisor"].Command {
		k, v, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		flags[k] = v
	}
	if flags["allow_dynamic_housekeeping"] != "false" {
		t.Errorf("cadvisor: --allow_dynamic_housekeeping=%s, want false", flags["allow_dynamic_housekeeping"])
	}
	interval, err := time.ParseDuration(flags["housekeeping_interval"])
	jitter, err2 := strconv.ParseFloat(flags["jitter_factor"], 64)
	if err != nil || err2 != nil {
		t.Fatalf("cadvisor: housekeeping_interval %q, jitter_factor %q: %v %v", flags["housekeeping_interval"], flags["jitter_factor"], err, err2)
	}
	if gap := time.Duration(float64(interval) * (1 + jitter)); gap > 6*time.Second {
		t.Errorf("cadvisor samples up to %s apart (interval %s, jitter factor %g), want at most 6s", gap, interval, jitter)
	}
}
