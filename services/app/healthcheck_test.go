package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestHealthcheckAgainstRunningApp(t *testing.T) {
	a := startApp(t, testEnv(socketDir(t)))
	env := map[string]string{}
	for k, v := range a.env {
		env[k] = v
	}
	env["APP_TCP_ADDR"] = a.tcpAddr
	var out syncBuffer
	if err := run(context.Background(), []string{"app", "healthcheck"}, envFunc(env), &out, io.Discard); err != nil {
		t.Fatalf("healthcheck: %v (output %q)", err, out.String())
	}
	if strings.Count(out.String(), "ready") != 2 {
		t.Errorf("output %q", out.String())
	}
}

func TestHealthcheckAgainstNothing(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_TCP_ADDR"] = "127.0.0.1:1" // nothing listens on port 1
	var out syncBuffer
	err := run(context.Background(), []string{"app", "healthcheck"}, envFunc(env), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "tcp 127.0.0.1:1") || !strings.Contains(err.Error(), "unix ") {
		t.Fatalf("err = %v", err)
	}
}
