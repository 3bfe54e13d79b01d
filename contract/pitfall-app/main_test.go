package main

import (
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := loadConfig(env(nil))
	if err != nil || c.backlog != 1 || c.workers != 3 || c.port != 8080 || c.socket != "/sock/app.sock" ||
		c.idle != time.Second || !c.leak {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	if c, err := loadConfig(env(map[string]string{"PITFALL_IDLE_TIMEOUT": "0", "PITFALL_CLOSE_WAIT": "false"})); err != nil || c.idle != 0 || c.leak {
		t.Errorf("no idle timeout, no leak: %+v %v", c, err)
	}
	for k, v := range map[string]string{"PITFALL_BACKLOG": "0", "PITFALL_WORKERS": "1", "APP_SOCKET_GID": "x",
		"APP_TCP_ADDR": "nowhere", "APP_SOCKET_MODE": "999", "PITFALL_IDLE_TIMEOUT": "-1s", "PITFALL_CLOSE_WAIT": "sometimes"} {
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

// A connection its client closed first stays open on the app's side (Close
// does nothing); one the app closes first closes, and the client sees it.
func TestLeakyConnKeepsWhatItsClientClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := leakyListener{ln}
	defer l.Close()
	pair := func() (client net.Conn, app *leakyConn) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return c, s.(*leakyConn)
	}
	c, s := pair()
	c.Close()
	if _, err := s.Read(make([]byte, 8)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the client closed: %v, want EOF", err)
	}
	if err := s.Close(); err != nil || s.Conn.SetDeadline(time.Now()) != nil {
		t.Errorf("the client closed first: Close %v, and the app's side is closed; want it left open", err)
	}
	c, s = pair()
	defer c.Close()
	s.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, io.EOF) {
		t.Errorf("the app closed first: the client reads %v, want EOF", err)
	}
}
