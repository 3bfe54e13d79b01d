// Package doctor tests scripts/doctor.sh (make doctor) on recorded `docker
// info` outputs of engines the test bed cannot run: Docker Desktop (macOS,
// Windows), rootless, userns-remap, Docker 29 with the containerd image store
// (testdata/README.md names each source). The script parses `docker info`
// into facts and judges facts into rows; both steps run here as they run on a
// user's machine. The states this machine can make (no engine, a port taken,
// a CPU set beyond the cores, / not shared) are tested for real in tests/e2e.
package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// doctor runs scripts/doctor.sh with a mode and stdin.
func doctor(t *testing.T, mode, stdin string) string {
	t.Helper()
	cmd := exec.Command("bash", lab.Path(t, "scripts", "doctor.sh"), mode)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor.sh %s: %v\n%s", mode, err, out)
	}
	return string(out)
}

func recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFactsFromRecordedInfo(t *testing.T) {
	for file, want := range map[string][]string{
		"desktop-macos-29.2.1.txt":               {"server=yes", "server_version=29.2.1", "os=Docker Desktop", "cgroup_version=2", "ncpu=12", "driver_type=io.containerd.snapshotter.v1"},
		"desktop-windows-wsl2-29.7.2.txt":        {"server_version=29.7.2", "os=Docker Desktop", "ncpu=16"},
		"rootless-fedora39-24.0.7-no-cpuset.txt": {"rootless=yes", "no_cpuset=yes", "cgroup_driver=systemd", "ncpu=6"},
		"rootless-ubuntu22.04-24.0.7.txt":        {"rootless=yes", "storage_driver=overlay2", "docker_root=/home/fradantim/.local/share/docker"},
		"rootless-cgroupv1-grep-cgroup.txt":      {"cgroup_driver=none", "cgroup_version=1", "no_cgroups=yes"},
		"userns-remap-ubuntu22.04-23.0.6.txt":    {"userns=yes", "server_version=23.0.6", "docker_root=/var/lib/docker/231072.231072"},
		"docker29-colima-containerd-store.txt":   {"server_version=29.5.2", "driver_type=io.containerd.snapshotter.v1", "os=Ubuntu 24.04.4 LTS", "ncpu=2"},
		"no-engine-cli28.2.2.txt":                {"server_error=Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"},
		"testbed-20.10-cgroupv1.txt":             {"server=yes", "cgroup_version=1", "cgroup_driver=cgroupfs", "storage_driver=overlay2"},
	} {
		t.Run(file, func(t *testing.T) {
			facts := doctor(t, "--facts", recorded(t, file))
			for _, w := range want {
				if !strings.Contains("\n"+facts, "\n"+w+"\n") {
					t.Errorf("want %q in the facts:\n%s", w, facts)
				}
			}
			// Neither flag may leak from one kind of engine to another.
			for _, flag := range []string{"rootless=yes", "userns=yes"} {
				if strings.Contains(facts, flag) && !strings.Contains(strings.Join(want, "\n"), flag) {
					t.Errorf("%s: %s where the engine is not so:\n%s", file, flag, facts)
				}
			}
		})
	}
}

// A Linux host where everything works: what the probes would find there.
const healthyHost = `cli=yes
compose_version=2.40.3
buildx_version=0.29.1
services_all=app nginx nginx-lo nginx-log-exporter nginx-exporter prometheus grafana node-exporter cadvisor 
set_SERVICES=
set_NGINX_PORT=8080
set_PROMETHEUS_PORT=9090
set_GRAFANA_PORT=3000
port_NGINX_PORT=free
port_PROMETHEUS_PORT=free
port_GRAFANA_PORT=free
root_mount=rslave
containerd_sock=yes
make_version=4.3
`

// judge runs the judge on a recorded info plus probe facts; later facts win.
func judge(t *testing.T, file string, facts ...string) (rows, plan string) {
	t.Helper()
	in := healthyHost + doctor(t, "--facts", recorded(t, file)) + strings.Join(facts, "\n") + "\n"
	for _, l := range strings.Split(doctor(t, "--judge", in), "\n") {
		switch {
		case strings.HasPrefix(l, "row|"):
			rows += l + "\n"
		case strings.HasPrefix(l, "plan|"):
			plan += strings.TrimPrefix(l, "plan|") + "\n"
		}
	}
	return rows, plan
}

func has(t *testing.T, what, in string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(in, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, in)
		}
	}
}

func hasNot(t *testing.T, what, in string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(in, w) {
			t.Errorf("%s has %q:\n%s", what, w, in)
		}
	}
}

func TestDockerDesktopLeavesCAdvisorOut(t *testing.T) {
	for _, file := range []string{"desktop-macos-29.2.1.txt", "desktop-windows-wsl2-29.7.2.txt"} {
		rows, plan := judge(t, file, "root_mount=ro", "root_mount_error=path / is mounted on / but it is not a shared or slave mount")
		has(t, file+" rows", rows, "row|warn|cAdvisor|left out: it cannot start on Docker Desktop", "row|info|Docker Desktop|",
			"row|warn|/ for node-exporter|/ is not a shared mount (path / is mounted on / but it is not a shared or slave mount)",
			"row|missing|missing|cAdvisor: nginx CPU per request")
		has(t, file+" plan", plan, "UP_LEFT_OUT='cadvisor'", "UP_OPTIONAL='node-exporter'", "NODE_EXPORTER_ROOT_MOUNT=ro\n",
			"UP_CORE='app nginx nginx-lo nginx-log-exporter nginx-exporter prometheus grafana'")
		hasNot(t, file, rows+plan, "FAIL", "UP_BLOCKED")
	}
}

func TestRootless(t *testing.T) {
	rows, plan := judge(t, "rootless-ubuntu22.04-24.0.7.txt")
	has(t, "rows", rows, "rootless, cgroup v2 (systemd)", "row|warn|cAdvisor|left out: it cannot start on rootless Docker")
	has(t, "plan", plan, "UP_LEFT_OUT='cadvisor'", "NODE_EXPORTER_ROOT_MOUNT=ro,rslave")
	hasNot(t, "rootless", rows+plan, "FAIL", "UP_BLOCKED")

	// Without the cpuset controller delegated, a CPU set cannot start the lab.
	rows, plan = judge(t, "rootless-fedora39-24.0.7-no-cpuset.txt", "set_LOADGEN_CPUSET=1")
	has(t, "rows", rows, "row|FAIL|LOADGEN_CPUSET|LOADGEN_CPUSET=1 but the engine has no cpuset support")
	has(t, "plan", plan, "UP_BLOCKED=1")
	rows, _ = judge(t, "rootless-fedora39-24.0.7-no-cpuset.txt")
	hasNot(t, "no CPU set asked", rows, "FAIL")

	// Rootless on cgroup v1: no limits at all (recorded: `docker info | grep -i cgroup`).
	rows, _ = judge(t, "rootless-cgroupv1-grep-cgroup.txt", "server=yes", "server_version=20.10.7", "rootless=yes")
	has(t, "rows", rows, "row|warn|cgroups|rootless without cgroups: the CPU and memory limits are ignored")
}

func TestUsernsRemap(t *testing.T) {
	rows, plan := judge(t, "userns-remap-ubuntu22.04-23.0.6.txt")
	has(t, "rows", rows, "userns-remap, cgroup v2", "row|info|userns-remap|node-exporter and cAdvisor run in the host's user namespace")
	has(t, "plan", plan, "UP_OPTIONAL='node-exporter cadvisor'")
	hasNot(t, "userns", rows+plan, "FAIL", "UP_BLOCKED")
}

func TestDocker29ContainerdStore(t *testing.T) {
	// containerd's socket out of reach: cAdvisor would label nothing (google/cadvisor#3772).
	rows, plan := judge(t, "docker29-colima-containerd-store.txt", "containerd_sock=no")
	has(t, "rows", rows, "(containerd image store)", "row|warn|cAdvisor|left out: the engine keeps images in containerd", "cadvisor#3772")
	has(t, "plan", plan, "UP_LEFT_OUT='cadvisor'")
	// Reachable (a Linux host with containerd at /run/containerd): cAdvisor runs.
	rows, plan = judge(t, "docker29-colima-containerd-store.txt")
	has(t, "rows", rows, "row|ok|cAdvisor|can start")
	has(t, "plan", plan, "UP_OPTIONAL='node-exporter cadvisor'")
	// Running and labelling nothing: left out after the fact.
	rows, plan = judge(t, "docker29-colima-containerd-store.txt", "cadvisor_running=yes", "cadvisor_labels=0")
	has(t, "rows", rows, "row|warn|cAdvisor|left out: it runs but labels no container")
	has(t, "plan", plan, "UP_LEFT_OUT='cadvisor'")
	// The recorded engine has 2 cores: a CPU set beyond them stops the start.
	rows, plan = judge(t, "docker29-colima-containerd-store.txt", "set_NGINX_CPUSET=0-3", "set_LOADGEN_CPUS=4")
	has(t, "rows", rows, "row|FAIL|NGINX_CPUSET|NGINX_CPUSET=0-3 names core 3; the engine has 2 (0-1)", "row|FAIL|LOADGEN_CPUS|LOADGEN_CPUS=4 is more than the engine's 2 cores")
	has(t, "plan", plan, "UP_BLOCKED=1")
	// The watchers' CPU set is held to the same cores.
	rows, plan = judge(t, "docker29-colima-containerd-store.txt", "set_MONITORING_CPUSET=2")
	has(t, "rows", rows, "row|FAIL|MONITORING_CPUSET|MONITORING_CPUSET=2 names core 2; the engine has 2 (0-1)")
	has(t, "plan", plan, "UP_BLOCKED=1")
	rows, _ = judge(t, "docker29-colima-containerd-store.txt", "set_MONITORING_CPUSET=1")
	hasNot(t, "MONITORING_CPUSET=1 on 2 cores", rows, "FAIL")
}

func TestNoEngineAndOldTools(t *testing.T) {
	rows, plan := judge(t, "no-engine-cli28.2.2.txt")
	has(t, "rows", rows, "row|FAIL|Docker engine|no engine answers: Cannot connect to the Docker daemon")
	has(t, "plan", plan, "UP_BLOCKED=1")

	rows, plan = judge(t, "testbed-20.10-cgroupv1.txt", "compose_version=2.12.2")
	has(t, "rows", rows, "row|FAIL|Compose|2.12.2 is older than 2.17")
	has(t, "plan", plan, "UP_BLOCKED=1")
	// Compose 2.40 builds with Bake and refuses buildx before 0.17; older Compose does not use Bake.
	rows, _ = judge(t, "testbed-20.10-cgroupv1.txt", "buildx_version=0.10.4")
	has(t, "rows", rows, "row|FAIL|buildx|0.10.4: Compose 2.40.3 builds with Bake")
	rows, _ = judge(t, "userns-remap-ubuntu22.04-23.0.6.txt", "compose_version=2.17.3", "buildx_version=0.10.4")
	hasNot(t, "Compose 2.17.3 with buildx 0.10.4", rows, "FAIL")
	rows, _ = judge(t, "testbed-20.10-cgroupv1.txt", "buildx_version=")
	has(t, "rows", rows, "row|warn|buildx|not installed")
	rows, _ = judge(t, "testbed-20.10-cgroupv1.txt", "make_version=3.81")
	has(t, "rows", rows, "row|warn|make|GNU make 3.81 ignores .SHELLFLAGS")
	rows, plan = judge(t, "testbed-20.10-cgroupv1.txt", "python3=no")
	has(t, "rows", rows, "row|info|python3|not on this machine: make up, load, max and report need none")
	hasNot(t, "no python3", plan, "UP_BLOCKED")
}

func TestPortsAndSubsets(t *testing.T) {
	rows, plan := judge(t, "testbed-20.10-cgroupv1.txt", "port_NGINX_PORT=taken", "port_PROMETHEUS_PORT=lab")
	has(t, "rows", rows, "row|FAIL|port 8080|127.0.0.1:8080 is taken by another process (NGINX_PORT)", "row|ok|port 9090|in use by this lab")
	has(t, "plan", plan, "UP_BLOCKED=1")
	// A value that is no port is named as such, never "free".
	for _, bad := range []string{"80000", "abc", "0", ""} {
		rows, _ := judge(t, "testbed-20.10-cgroupv1.txt", "set_NGINX_PORT="+bad)
		has(t, "rows", rows, "row|FAIL|NGINX_PORT|NGINX_PORT="+bad+" is not a port")
		if strings.Contains(rows, "port "+bad+"|free") {
			t.Errorf("NGINX_PORT=%q called free:\n%s", bad, rows)
		}
	}
	// A subset: only what it names is started, and only its ports count.
	rows, plan = judge(t, "testbed-20.10-cgroupv1.txt", "set_SERVICES=app nginx prometheus node-exporter", "port_GRAFANA_PORT=taken")
	has(t, "plan", plan, "UP_CORE='app nginx prometheus'", "UP_OPTIONAL='node-exporter'")
	hasNot(t, "subset", rows+plan, "FAIL", "cAdvisor")
	// / refused even without rslave: node-exporter left out, named as missing.
	rows, plan = judge(t, "testbed-20.10-cgroupv1.txt", "root_mount=none", "root_mount_error=mounts denied")
	has(t, "rows", rows, "node-exporter is left out", "row|missing|missing|node-exporter: context switches per request")
	has(t, "plan", plan, "UP_LEFT_OUT='node-exporter'", "UP_OPTIONAL='cadvisor'")
}

// Compose runs cAdvisor privileged; an engine that starts no privileged
// container (a throwaway one is refused) leaves it out, saying why, before
// make up tries; one that starts it lets it run.
func TestPrivilegedRefused(t *testing.T) {
	rows, plan := judge(t, "testbed-20.10-cgroupv1.txt", "cadvisor_privileged=yes",
		"privileged_run=Error response from daemon: failed to create task: unable to apply caps")
	has(t, "rows", rows, "row|warn|cAdvisor|left out: compose runs it privileged, and this engine starts no privileged container (Error response from daemon")
	has(t, "plan", plan, "UP_LEFT_OUT='cadvisor'")
	hasNot(t, "privileged refused", rows+plan, "FAIL", "UP_BLOCKED")
	rows, plan = judge(t, "testbed-20.10-cgroupv1.txt", "cadvisor_privileged=yes", "privileged_run=ok")
	has(t, "rows", rows, "row|ok|cAdvisor|")
	hasNot(t, "privileged allowed", plan, "UP_LEFT_OUT='cadvisor'")
}
