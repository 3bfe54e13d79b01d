package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// socketDir is a short folder: a socket's path may not exceed 107 bytes.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "logexp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func unixEnv(path string) map[string]string {
	env := testEnv()
	env["LOG_EXPORTER_SYSLOG_ADDR"] = "unix:" + path
	return env
}

// stop ends the exporter cleanly (startExporter's cleanup then finds it stopped).
func (e *testExporter) stop(t *testing.T) {
	t.Helper()
	e.cancel()
	if err := <-e.done; err != nil {
		t.Fatal(err)
	}
	e.done <- nil
}

// asGroup asks for the group nobody's (65534) where the test may chown (root).
func asGroup(env map[string]string) map[string]string {
	if os.Geteuid() == 0 {
		env["LOG_EXPORTER_SOCKET_GID"] = "65534"
	}
	return env
}

// checkShared: path is a file of type typ (a socket, a FIFO), 0660 (the owner
// and nginx's group write, others nothing), in the group asGroup asked for.
func checkShared(t *testing.T, path string, typ os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&typ == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("%s: mode %v, want type %v and 0660", path, fi.Mode(), typ)
	}
	if gid := fi.Sys().(*syscall.Stat_t).Gid; os.Geteuid() == 0 && gid != 65534 {
		t.Errorf("%s: group %d, want LOG_EXPORTER_SOCKET_GID 65534", path, gid)
	}
}

// nginx's lines over a Unix datagram socket (the per-line log) are counted as
// over UDP; the socket is 0660 (the owner and nginx's group send, others
// nothing), in the group asked for, and gone after a clean stop.
func TestUnixSocketCountsLines(t *testing.T) {
	path := filepath.Join(socketDir(t), "syslog.sock")
	e := startExporter(t, asGroup(unixEnv(path)))
	if e.syslogNet != "unixgram" || e.syslogAddr != path {
		t.Fatalf("listening on %s:%s, want unixgram:%s", e.syslogNet, e.syslogAddr, path)
	}
	checkShared(t, path, os.ModeSocket)
	line := `<190>nginx: {"uri":"/uds-ka/ping","status":"200","request_time":"0.001","upstream_connect_time":"0.000",` +
		`"upstream_header_time":"0.001","upstream_response_time":"0.001","bytes_sent":"180"}`
	e.send(t, line, line, line)
	s := e.waitLines(t, 3)
	if v := metricValue(t, s, `nginx_location_requests_total{path="uds-ka",status="200"}`); v != 3 {
		t.Errorf("uds-ka 200 = %v, want 3", v)
	}
	e.stop(t)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("after the stop %s: %v, want it removed", path, err)
	}
}

// A crash leaves the socket behind: the next start replaces it. A file that is
// not a socket is never removed: the start fails naming the setting.
func TestUnixSocketStaleAndForeignFiles(t *testing.T) {
	dir := socketDir(t)
	stale := filepath.Join(dir, "stale.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: stale, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close() // a datagram socket's file stays after its close, as after a crash
	if _, err := os.Lstat(stale); err != nil {
		t.Fatalf("no stale socket to start over: %v", err)
	}
	e := startExporter(t, unixEnv(stale))
	e.send(t, `<190>nginx: {"uri":"/tcp/ping","status":"200","request_time":"0.001","upstream_connect_time":"0.000","upstream_header_time":"0.001","upstream_response_time":"0.001","bytes_sent":"1"}`)
	e.waitLines(t, 1)

	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"nginx-log-exporter"}, envFunc(unixEnv(foreign)), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "LOG_EXPORTER_SYSLOG_ADDR") || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a regular file at the socket's path: err = %v", err)
	}
	if b, _ := os.ReadFile(foreign); string(b) != "keep me" {
		t.Errorf("the file at the socket's path was touched: %q", b)
	}
}

func TestUnixSocketSettingsRefused(t *testing.T) {
	for _, bad := range []map[string]string{
		{"LOG_EXPORTER_SYSLOG_ADDR": "unix:relative.sock"},
		{"LOG_EXPORTER_SYSLOG_ADDR": "unix:/" + strings.Repeat("x", 107)},
		{"LOG_EXPORTER_SOCKET_GID": "nginx"},
		{"LOG_EXPORTER_SOCKET_GID": "-1"},
	} {
		env := testEnv()
		var name string
		for k, v := range bad {
			env[k], name = v, k
		}
		err := run(context.Background(), []string{"nginx-log-exporter"}, envFunc(env), io.Discard, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), name+"=") {
			t.Errorf("%v: err = %v, want one naming %s", bad, err, name)
		}
	}
}
