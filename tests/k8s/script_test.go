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
		{nil, []string{"deploy"}, "unknown command deploy (up, load, report)"},
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
