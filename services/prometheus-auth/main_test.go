package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestWritesAHashPrometheusAccepts(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("abcdefghijklmnop0123\n"), 0o600)
	out := filepath.Join(dir, "web.yml")
	if err := run(env(map[string]string{"PROMETHEUS_USER": "uds-lab", "PASSWORD_FILE": pw, "WEB_CONFIG": out})); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var web struct {
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &web); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	hash, ok := web.Users["uds-lab"]
	if !ok || len(web.Users) != 1 {
		t.Fatalf("users %v, want uds-lab alone", web.Users)
	}
	// The newline a file ends with is not part of the password.
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte("abcdefghijklmnop0123")) != nil {
		t.Error("the hash does not match the password")
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte("abcdefghijklmnop0124")) == nil {
		t.Error("the hash matches another password")
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v: Prometheus (another user) must read it", fi.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".web-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	for _, c := range []struct {
		name, user, file, want string
	}{
		{"no user", "", file("ok", "abcdefghijklmnop0123"), "PROMETHEUS_USER"},
		{"a user YAML would misread", "a: b", file("ok", "abcdefghijklmnop0123"), "PROMETHEUS_USER"},
		{"no password file", "u", filepath.Join(dir, "missing"), "PROMETHEUS_PASSWORD_FILE"},
		{"short", "u", file("short", "short\n"), "at least 16"},
		{"too long for bcrypt", "u", file("long", strings.Repeat("x", 73)), "at most 72"},
		{"not for a URL", "u", file("url", "abcdefghijklmnop@host"), "-._~"},
		{"two lines", "u", file("two", "abcdefghijklmnop\nqrstuvwxyz0123456\n"), "more than one line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "web.yml")
			os.Remove(out)
			err := run(env(map[string]string{"PROMETHEUS_USER": c.user, "PASSWORD_FILE": c.file, "WEB_CONFIG": out}))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one naming %q", err, c.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("wrote a web config all the same")
			}
		})
	}
}

// A password file's line ending is not part of the password: LF, CRLF (a
// file saved on Windows) or none give the same password.
func TestLineEndingsAreNotThePassword(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"none": "abcdefghijklmnop0123", "LF": "abcdefghijklmnop0123\n",
		"CRLF": "abcdefghijklmnop0123\r\n"} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(dir, name)
			if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := password(f)
			if err != nil || string(p) != "abcdefghijklmnop0123" {
				t.Errorf("password %q, error %v; want abcdefghijklmnop0123", p, err)
			}
		})
	}
}
