package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// With the FIFO alone (the lab's setting) no socket is open: a forged syslog
// line sent where the exporter used to listen by default (:5514) is counted
// nowhere, while nginx's line through the FIFO is.
func TestFIFOModeOpensNoSocket(t *testing.T) {
	path := filepath.Join(socketDir(t), "access.pipe")
	e := startExporter(t, pipeEnv(path))
	if !strings.Contains(e.stdout.String(), "syslog=off") {
		t.Errorf("startup line %q: want syslog=off", e.stdout.String())
	}
	forged, err := net.Dial("udp", "127.0.0.1:5514")
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	for i := 0; i < 10; i++ {
		_, _ = forged.Write([]byte(`<190>Nov 22 14:03:07 nginx: {"uri":"/uds-ka/x","status":"500","request_time":"0.001","bytes_sent":"1"}`))
	}
	w := openWriter(t, path)
	defer w.Close()
	if _, err := w.WriteString(pipeLine); err != nil {
		t.Fatal(err)
	}
	s := e.waitLines(t, 1)
	if strings.Contains(s, `status="500"`) {
		t.Errorf("forged syslog lines were counted:\n%s", s)
	}
	if v := metricValue(t, s, `nginx_location_requests_total{path="uds-ka",status="200"}`); v != 1 {
		t.Errorf("uds-ka 200 = %v, want nginx's 1 line from the FIFO", v)
	}
}

func TestNoInputIsRefused(t *testing.T) {
	_, err := loadConfig(envFunc(map[string]string{"LOG_EXPORTER_PIPE": ""}))
	if err == nil || !strings.Contains(err.Error(), "LOG_EXPORTER_PIPE") || !strings.Contains(err.Error(), "LOG_EXPORTER_SYSLOG_ADDR") {
		t.Fatalf("no input: got %v, want an error naming both settings", err)
	}
}

// Both inputs at once, each line through one of them at the same time: every
// line is counted once. Under -race (make test) this fails without the lock
// the two readers share (lines.mu: one parse buffer).
func TestBothInputsAtOnce(t *testing.T) {
	path := filepath.Join(socketDir(t), "access.pipe")
	env := pipeEnv(path)
	env["LOG_EXPORTER_SYSLOG_ADDR"] = "127.0.0.1:0"
	e := startExporter(t, env)
	const n = 500
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		w := openWriter(t, path)
		defer w.Close()
		for i := 0; i < n; i++ {
			if _, err := w.WriteString(pipeLine); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			line := fmt.Sprintf(`<190>Nov 22 14:03:07 nginx: {"uri":"/tcp/ping","status":"200","request_time":"0.00%d","bytes_sent":"10"}`, i%10)
			if _, err := e.udp.Write([]byte(line)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	s := e.waitLines(t, 2*n)
	for _, series := range []string{`nginx_location_requests_total{path="uds-ka",status="200"}`, `nginx_location_requests_total{path="tcp",status="200"}`} {
		if v := metricValue(t, s, series); v != n {
			t.Errorf("%s = %v, want %d", series, v, n)
		}
	}
}
