package socketmode

import (
	"encoding/json"
	"os"
	"testing"
)

// Cases is contract/socket-modes.json: the modes every implementation of the
// rule must keep and break.
type Cases struct {
	Keep  []string `json:"keep"`
	Break []string `json:"break"`
}

func TestParseAgainstTheSharedCases(t *testing.T) {
	b, err := os.ReadFile("../../socket-modes.json")
	if err != nil {
		t.Fatal(err)
	}
	var c Cases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Keep) == 0 || len(c.Break) == 0 {
		t.Fatalf("no cases in socket-modes.json: %+v", c)
	}
	for _, s := range c.Keep {
		if _, err := Parse(s); err != nil {
			t.Errorf("%s: %v, want it kept", s, err)
		}
	}
	for _, s := range c.Break {
		if _, err := Parse(s); err == nil {
			t.Errorf("%s: kept, want it refused", s)
		}
	}
	for _, s := range []string{"", "abc", "0689", "-660"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("%q: parsed", s)
		}
	}
}
