// prometheus-auth writes Prometheus's web configuration (--web.config.file):
// basic auth on every endpoint, so only what holds the lab's password
// (Grafana, make report, Prometheus's own scrape; k6 where
// PROMETHEUS_REMOTE_WRITE switches the remote-write receiver on) reads or
// writes series, and the app under test, on the same network, cannot.
// Prometheus takes only a bcrypt hash of the password, which nothing on a
// user's host can be counted on to compute: this one-shot does it at make up,
// from the password file compose hands it (PROMETHEUS_PASSWORD_FILE in .env).
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if err := run(os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus-auth:", err)
		os.Exit(1)
	}
}

type config struct {
	user         string // PROMETHEUS_USER
	passwordFile string // PASSWORD_FILE
	webConfig    string // WEB_CONFIG: where Prometheus reads it
}

// A user name that needs no quoting as a YAML key.
var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		user:         getenv("PROMETHEUS_USER"),
		passwordFile: getenv("PASSWORD_FILE"),
		webConfig:    getenv("WEB_CONFIG"),
	}
	if c.passwordFile == "" {
		c.passwordFile = "/run/secrets/prometheus_password"
	}
	if c.webConfig == "" {
		c.webConfig = "/web/web.yml"
	}
	if !userName.MatchString(c.user) {
		return c, fmt.Errorf("PROMETHEUS_USER=%q: want 1-64 letters, digits, '.', '_' or '-'", c.user)
	}
	return c, nil
}

var urlSafe = regexp.MustCompile(`^[A-Za-z0-9._~-]*$`)

// password reads the password: one line, long enough to resist guessing, and
// within bcrypt's 72 bytes (it ignores the rest, so a longer one is refused).
func password(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("the password (PROMETHEUS_PASSWORD_FILE; make up generates it): %w", err)
	}
	p := strings.TrimRight(string(b), "\r\n")
	switch {
	case strings.ContainsAny(p, "\r\n"):
		return nil, errors.New("the password file holds more than one line")
	case !urlSafe.MatchString(p):
		return nil, fmt.Errorf("the password in %s has characters other than letters, digits and -._~ (healthchecks put it in a URL)", file)
	case len(p) < 16:
		return nil, fmt.Errorf("the password in %s has %d characters: at least 16", file, len(p))
	case len(p) > 72:
		return nil, fmt.Errorf("the password in %s has %d bytes: bcrypt takes at most 72", file, len(p))
	}
	return []byte(p), nil
}

func run(getenv func(string) string) error {
	c, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	p, err := password(c.passwordFile)
	if err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword(p, bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	body := fmt.Sprintf("# Written at make up by services/prometheus-auth: basic auth on every endpoint.\n"+
		"basic_auth_users:\n  %s: %s\n", c.user, hash)
	// Prometheus reads the file at every request: replace it whole.
	tmp, err := os.CreateTemp(filepath.Dir(c.webConfig), ".web-*.yml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), c.webConfig)
}
