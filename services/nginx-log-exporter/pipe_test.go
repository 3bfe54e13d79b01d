package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const pipeLine = `{"uri":"/uds-ka/ping","status":"200","request_time":"0.001","upstream_connect_time":"0.000",` +
	`"upstream_header_time":"0.001","upstream_response_time":"0.001","bytes_sent":"180"}` + "\n"

// pipeEnv: the FIFO only, as compose runs the exporter.
func pipeEnv(path string) map[string]string {
	return map[string]string{"LOG_EXPORTER_PIPE": path, "LOG_EXPORTER_METRICS_ADDR": "127.0.0.1:0"}
}

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

// openWriter opens the pipe as nginx does its access log.
func openWriter(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// nginx's buffered access log (the lab's default): many lines per write, a
// line split across writes, a writer that closes and comes back (nginx
// restarted) all count; the FIFO is 0660 in the group asked for, and stays
// after the stop for the next exporter to read.
func TestPipeCountsBufferedLines(t *testing.T) {
	path := filepath.Join(socketDir(t), "access.pipe")
	e := startExporter(t, asGroup(pipeEnv(path)))
	if !strings.Contains(e.stdout.String(), " pipe="+path) {
		t.Errorf("startup line: %q", e.stdout.String())
	}
	checkShared(t, path, os.ModeNamedPipe)
	w := openWriter(t, path)
	half := len(pipeLine) / 2
	if _, err := w.WriteString(strings.Repeat(pipeLine, 3) + pipeLine[:half]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString(pipeLine[half:]); err != nil {
		t.Fatal(err)
	}
	e.waitLines(t, 4)
	w.Close() // nginx stops: the exporter reads on
	w = openWriter(t, path)
	if _, err := w.WriteString(pipeLine); err != nil {
		t.Fatal(err)
	}
	w.Close()
	s := e.waitLines(t, 5)
	if v := metricValue(t, s, `nginx_location_requests_total{path="uds-ka",status="200"}`); v != 5 {
		t.Errorf("uds-ka 200 = %v, want 5", v)
	}
	e.stop(t)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("after the stop %s: %v %v, want the FIFO kept", path, fi, err)
	}
	// The next exporter reads the same FIFO (nginx still holds it open).
	e = startExporter(t, pipeEnv(path))
	w = openWriter(t, path)
	defer w.Close()
	if _, err := w.WriteString(pipeLine); err != nil {
		t.Fatal(err)
	}
	e.waitLines(t, 1)
}

// A line over 64 KiB is counted malformed, and the lines after it still count.
func TestPipeOverlongLine(t *testing.T) {
	path := filepath.Join(socketDir(t), "access.pipe")
	e := startExporter(t, pipeEnv(path))
	w := openWriter(t, path)
	defer w.Close()
	go w.WriteString(`{"uri":"/` + strings.Repeat("x", 100<<10) + "\"}\n" + pipeLine)
	s := e.waitLines(t, 2)
	if ok, bad := metricValue(t, s, `nginx_log_lines_total{result="ok"}`), metricValue(t, s, `nginx_log_lines_total{result="malformed"}`); ok != 1 || bad != 1 {
		t.Errorf("ok %v malformed %v, want 1 and 1", ok, bad)
	}
}

func TestPipeRefusesOtherFilesAndRelativePaths(t *testing.T) {
	file := filepath.Join(socketDir(t), "notes.txt")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{file: "not a FIFO", "access.pipe": "absolute"} {
		err := run(context.Background(), []string{"nginx-log-exporter"}, envFunc(pipeEnv(path)), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "LOG_EXPORTER_PIPE") || !strings.Contains(err.Error(), want) {
			t.Errorf("LOG_EXPORTER_PIPE=%s: err = %v, want one naming the setting and %q", path, err, want)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Errorf("the file at the pipe's path was touched: %q", b)
	}
}
