package k8s

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// scripts/k8s.sh (make k8s-up, k8s-load, k8s-report) refuses a bad setting
// before it reaches the cluster: exit 2 and one line naming the setting.
func TestK8sScriptRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"K8S_PODS=0"}, []string{"load"}, "K8S_PODS=0: a whole number of generator pods, 1 to 16"},
		{[]string{"K8S_PODS=17"}, []string{"load"}, "K8S_PODS=17: a whole number of generator pods, 1 to 16"},
		{[]string{"K8S_PODS=two"}, []string{"load"}, "K8S_PODS=two"},
		{[]string{"K8S_TIMEOUT=0"}, []string{"load"}, "K8S_TIMEOUT=0: seconds"},
		{[]string{"K8S_START_LEAD=0"}, []string{"load"}, "K8S_START_LEAD=0: seconds from making the Job to the run's start"},
		{[]string{"K8S_START_LEAD=soon"}, []string{"load"}, "K8S_START_LEAD=soon: seconds"},
		{[]string{"K8S_NAMESPACE=Lab_1"}, []string{"up"}, "K8S_NAMESPACE=Lab_1: not a namespace's name"},
		{[]string{"K8S_VALUES=/nonexistent/values.yaml"}, []string{"up"}, "K8S_VALUES=/nonexistent/values.yaml: no such file"},
		{[]string{"K8S_SET=load.rate"}, []string{"load"}, `K8S_SET: "load.rate" is not key=value`},
		{nil, []string{"deploy"}, "unknown command deploy (up, load, report, cluster)"},
		{[]string{"K8S_PROMETHEUS=http://prometheus:9090"}, []string{"report"}, "K8S_PROMETHEUS=http://prometheus:9090: the cluster's Prometheus as <namespace>/<service>:<port>"},
		{[]string{"K8S_PROMETHEUS=monitoring/prometheus"}, []string{"report"}, "K8S_PROMETHEUS=monitoring/prometheus: the cluster's Prometheus as"},
	} {
		cmd := exec.Command(lab.Path(t, "scripts", "k8s.sh"), c.args...)
		// No kubectl or helm on PATH: a refusal must come before either runs.
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + os.Getenv("HOME")}, c.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), c.want) ||
			strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v k8s.sh %v: %v\n%s\nwant exit 2 and one line with %q", c.env, c.args, err, out, c.want)
		}
	}
}

// scripts/k8s.sh load gives several generator pods one start instant,
// K8S_START_LEAD seconds after it makes the Job (load.startAt, unix ms), and
// one pod none (it starts when it comes up). A helm on PATH records what it
// is asked; a kubectl says the Job is done and has no pods, so the run stops
// there, naming the missing pod.
func TestK8sLoadGivesSeveralPodsOneStartInstant(t *testing.T) {
	bin, rec := t.TempDir(), filepath.Join(t.TempDir(), "helm-args")
	for name, script := range map[string]string{
		"helm":    "#!/bin/sh\necho \"$*\" >>" + rec + "\n[ \"$1\" != get ] || echo '{}'\n",
		"kubectl": "#!/bin/sh\ncase \"$*\" in *status.succeeded*) echo \"$K8S_PODS\" ;; esac\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	startAt := regexp.MustCompile(`load\.startAt=([0-9]+)`)
	for _, pods := range []string{"1", "2"} {
		os.Remove(rec)
		id := "script-start-" + pods
		t.Cleanup(func() { os.RemoveAll(lab.Path(t, "results", id)) })
		cmd := exec.Command(lab.Path(t, "scripts", "k8s.sh"), "load")
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + os.Getenv("HOME"), "K8S_PODS=" + pods,
			"K8S_START_LEAD=30", "TESTID=" + id}
		before := time.Now()
		out, err := cmd.CombinedOutput()
		after := time.Now()
		if !strings.Contains(string(out), "no pod of job/lab-openloop-"+id+" with index 0") {
			t.Fatalf("K8S_PODS=%s k8s.sh load with a fake helm and kubectl: %v\n%s", pods, err, out)
		}
		b, _ := os.ReadFile(rec)
		var job string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "load.enabled=true") {
				job = line
			}
		}
		m := startAt.FindStringSubmatch(job)
		switch {
		case job == "":
			t.Errorf("K8S_PODS=%s: no helm upgrade with load.enabled=true in %q", pods, b)
		case pods == "1" && m != nil:
			t.Errorf("K8S_PODS=1: helm %s: one pod is given a start instant", job)
		case pods == "2" && m == nil:
			t.Errorf("K8S_PODS=2: helm %s: no load.startAt", job)
		case pods == "2":
			// date +%s: whole seconds, so up to 1 s before now + the lead.
			at, _ := strconv.ParseInt(m[1], 10, 64)
			lo, hi := before.Add(29*time.Second).UnixMilli(), after.Add(30*time.Second).UnixMilli()
			if at < lo || at > hi {
				t.Errorf("K8S_PODS=2: load.startAt=%d, want now + K8S_START_LEAD=30 s, %d to %d", at, lo, hi)
			}
		}
	}
}

// tests/k8s/node/node.sh down cleans up whatever happens: a cgroup that
// cannot be removed (a process still in it; here a file in the folder) is
// named, and the kernel settings the kubelet changed are put back all the
// same, before it exits 1.
func TestNodeDownPutsTheSettingsBackWhenACgroupStays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writes a kernel setting: needs root, as the node does")
	}
	dir, root := t.TempDir(), t.TempDir()
	// A hierarchy with the node's folder in it, which rmdir cannot remove.
	stuck := root + "/cpu/uds-lab-node/pod"
	if err := os.MkdirAll(stuck, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{root + "/cpu/cgroup.procs", stuck + "/tasks"} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The setting to put back: its value now, so that the test changes nothing.
	now, err := os.ReadFile("/proc/sys/kernel/panic_on_oops")
	if err != nil {
		t.Skip(err)
	}
	want := "kernel.panic_on_oops=" + strings.TrimSpace(string(now))
	if err := os.WriteFile(dir+"/sysctls", []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sysctl on PATH that records what it is asked, then does it.
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"$@\" >>" + dir + "/asked\nexec /sbin/sysctl \"$@\"\n"
	if err := os.WriteFile(bin+"/sysctl", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lab.Path(t, "tests", "k8s", "node", "node.sh"), "down", dir)
	cmd.Env = append(os.Environ(), "UDS_LAB_CGROUP_ROOT="+root, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "uds-lab-node is still there") {
		t.Errorf("node.sh down with a cgroup that stays: %v\n%s\nwant exit 1 naming it", err, out)
	}
	asked, _ := os.ReadFile(dir + "/asked")
	if strings.TrimSpace(string(asked)) != "-qw "+want {
		t.Errorf("node.sh down asked sysctl %q, want -qw %s: the settings were not put back", asked, want)
	}
}
