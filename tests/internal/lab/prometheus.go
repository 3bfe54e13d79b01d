package lab

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// PasswordFile is the Prometheus password make up generated
// (PROMETHEUS_PASSWORD_FILE in .env, relative to the repository's top).
func PasswordFile(t testing.TB) string {
	t.Helper()
	p := Env(t)["PROMETHEUS_PASSWORD_FILE"]
	if !filepath.IsAbs(p) {
		p = Path(t, p)
	}
	return p
}

// PrometheusUser is the user Prometheus lets in (PROMETHEUS_USER in .env).
func PrometheusUser(t testing.TB) string { return Env(t)["PROMETHEUS_USER"] }

// PrometheusGet asks the lab's Prometheus for u with the lab's credentials:
// every endpoint of it needs them (its web config, written at make up).
func PrometheusGet(t testing.TB, u string) (*http.Response, error) {
	t.Helper()
	pw, err := os.ReadFile(PasswordFile(t))
	if err != nil {
		t.Fatalf("the lab's Prometheus password (make up writes it): %v", err)
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(PrometheusUser(t), strings.TrimSpace(string(pw)))
	return http.DefaultClient.Do(req)
}
