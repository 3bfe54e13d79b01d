package k8s

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"uds-lab/tests/internal/lab"
)

// This file is not a test file, so that tests/e2e (TestKubernetes) installs
// the same CRDs on the test bed's node as these tests on the API server.

// cache is scripts/test-deps.sh's cache folder.
func cache(t testing.TB) string {
	if c := os.Getenv("UDS_LAB_CACHE"); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".cache", "uds-lab")
}

// OperatorCRDs are the prometheus-operator's CRD files that
// scripts/test-deps.sh k8s copied from its Go module, at the version it pins
// (PROMETHEUS_OPERATOR_VERSION).
func OperatorCRDs(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(lab.Path(t, "scripts", "test-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROMETHEUS_OPERATOR_VERSION=(v[0-9.]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/test-deps.sh sets no PROMETHEUS_OPERATOR_VERSION")
	}
	files, _ := filepath.Glob(filepath.Join(cache(t), "k8s-crds", "prometheus-operator-"+string(m[1]), "monitoring.coreos.com_*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no prometheus-operator %s CRDs: run scripts/test-deps.sh k8s", m[1])
	}
	return files
}

// PodMonitorCRD is the operator's PodMonitor CRD file, the one CRD the
// chart's podMonitors need.
func PodMonitorCRD(t testing.TB) string {
	t.Helper()
	for _, f := range OperatorCRDs(t) {
		if filepath.Base(f) == "monitoring.coreos.com_podmonitors.yaml" {
			return f
		}
	}
	t.Fatal("the prometheus-operator's CRDs hold no monitoring.coreos.com_podmonitors.yaml: run scripts/test-deps.sh k8s")
	return ""
}
