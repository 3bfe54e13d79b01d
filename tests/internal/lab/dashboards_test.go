package lab

import "testing"

func TestZeroFallback(t *testing.T) {
	for expr, want := range map[string]bool{
		`max(up{job="node"}) or vector(0)`: true,
		`(sum by (path) (rate(a_total{x="1"}[1m]))) or (sum by (path) (rate(a_total[1m])) * 0)`:                  true,
		`(sum(rate(a_total[1m]))) or (0 * sum(rate(a_total[1m])))`:                                               true,
		`histogram_quantile(0.5, sum(rate(h[1m]))) or histogram_quantile(0.5, sum by (le) (rate(h_bucket[1m])))`: false,
		`sum(rate(a_total[1m])) or vector(1)`:                                                                    false,
		`sum(rate(a_total[1m])) * 0`:                                                                             false,
		`sum(rate(a_total[1m]))`:                                                                                 false,
	} {
		got, err := ZeroFallback(expr)
		if err != nil || got != want {
			t.Errorf("ZeroFallback(%s) = %v, %v; want %v", expr, got, err, want)
		}
	}
	if _, err := ZeroFallback("sum("); err == nil {
		t.Error("a query that does not parse gave no error")
	}
}
