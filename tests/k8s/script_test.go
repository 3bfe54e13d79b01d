package k8s

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

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
