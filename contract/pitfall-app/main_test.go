package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := loadConfig(env(nil))
	if err != nil || c.backlog != 1 || c.workers != 3 || c.port != 8080 || c.socket != "/sock/app.sock" {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for k, v := range map[string]string{"PITFALL_BACKLOG": "0", "PITFALL_WORKERS": "1", "APP_SOCKET_GID": "x",
		"APP_TCP_ADDR": "nowhere", "APP_SOCKET_MODE": "999"} {
		if _, err := loadConfig(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want an error naming it", k, v, err)
		}
	}
}

// The proxy header is honoured over TCP and dropped over the socket.
func TestClientDropsTheHeaderOnTheSocket(t *testing.T) {
	r := httptest.NewRequest("GET", "/client", nil)
	r.Header.Set("X-Real-IP", "203.0.113.7")
	r.RemoteAddr = "127.0.0.1:5000"
	if got := client(r, false); got != "203.0.113.7" {
		t.Errorf("tcp: %q", got)
	}
	r.RemoteAddr = "@"
	if got := client(r, true); got != "" {
		t.Errorf("socket: %q, want no address", got)
	}
}
