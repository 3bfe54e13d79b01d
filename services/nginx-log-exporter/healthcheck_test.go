package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestHealthcheckAgainstRunningExporter(t *testing.T) {
	e := startExporter(t, testEnv())
	env := testEnv()
	env["LOG_EXPORTER_METRICS_ADDR"] = e.metricsAddr
	var out syncBuffer
	if err := run(context.Background(), []string{"nginx-log-exporter", "healthcheck"}, envFunc(env), &out, io.Discard); err != nil {
		t.Fatalf("healthcheck: %v (output %q)", err, out.String())
	}
	if !strings.Contains(out.String(), ": ok") {
		t.Errorf("output %q", out.String())
	}
}

func TestHealthcheckAgainstNothing(t *testing.T) {
	env := testEnv()
	env["LOG_EXPORTER_METRICS_ADDR"] = "127.0.0.1:1" // nothing listens on port 1
	var out syncBuffer
	err := run(context.Background(), []string{"nginx-log-exporter", "healthcheck"}, envFunc(env), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "healthcheck failed") || !strings.Contains(out.String(), "127.0.0.1:1") {
		t.Fatalf("err = %v, output %q", err, out.String())
	}
}

func TestHealthcheckRefusesPortZero(t *testing.T) {
	err := run(context.Background(), []string{"nginx-log-exporter", "healthcheck"}, envFunc(testEnv()), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "LOG_EXPORTER_METRICS_ADDR") {
		t.Fatalf("err = %v", err)
	}
}
