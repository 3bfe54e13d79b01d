package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// straightToTheApp checks a make max GENERATOR=oha run of the direct paths
// beside the same pairs through nginx-lo: the report's "Straight to the app"
// has the direct ratio and the pooled one, each a mean inside its 95% interval
// computed from the run's two rounds, and seed 000's figure beside them.
func straightToTheApp(t *testing.T, run string) {
	var r struct {
		Direct map[string]struct {
			Ratio  *struct{ Mean, Lo, Hi *float64 }
			Beside []struct {
				Term  string
				Ratio *struct{ Mean, Lo, Hi *float64 }
			}
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", run, "report.json"))), &r); err != nil {
		t.Fatal(err)
	}
	d, ok := r.Direct["ping"]
	if !ok {
		t.Fatalf("report.json has no direct section for ping: %+v", r.Direct)
	}
	inside := func(what string, x *struct{ Mean, Lo, Hi *float64 }) {
		if x == nil || x.Mean == nil || x.Lo == nil || x.Hi == nil || *x.Lo > *x.Mean || *x.Mean > *x.Hi || *x.Mean <= 0 {
			t.Errorf("%s: %+v, want a ratio inside its interval", what, x)
		}
	}
	inside("direct-uds against direct-tcp", d.Ratio)
	for _, b := range d.Beside {
		if b.Term == "socket_pooled" {
			inside("uds-lo-ka against tcp-lo-ka", b.Ratio)
		}
	}
	md := mustRead(t, lab.Path(t, "results", run, "report.md"))
	for _, want := range []string{"## Straight to the app", "straight to the app, `direct-uds`", "seed 000"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md has no %q", want)
		}
	}
}
