package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Prometheus asks for protobuf first: native histograms exist only there.
const scrapeAccept = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3`

// families is one scrape of /metrics, by family name.
type families map[string]*dto.MetricFamily

// scrape reads /metrics from l as Prometheus would.
func scrape(l listener) (families, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://app/metrics", nil)
	req.Header.Set("Accept", scrapeAccept)
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	fams := families{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			return fams, nil
		} else if err != nil {
			return nil, fmt.Errorf("/metrics: %w", err)
		}
		fams[mf.GetName()] = &mf
	}
}

// family finds the family a query's metric name belongs to: histograms are
// queried as name_bucket, name_count and name_sum, or as name (native).
func (f families) family(name string) *dto.MetricFamily {
	if mf, ok := f[name]; ok {
		return mf
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if mf, ok := f[base]; ok && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY) {
				return mf
			}
		}
	}
	return nil
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// listeners returns the listener label values a family has.
func listeners(mf *dto.MetricFamily) map[string]bool {
	seen := map[string]bool{}
	for _, m := range mf.GetMetric() {
		if v := label(m, "listener"); v != "" {
			seen[v] = true
		}
	}
	return seen
}

// routeDeltas: how much app_http_requests_total of listener grew since
// before, per route label (summed over the other labels), where it grew.
func (f families) routeDeltas(before families, listener string) map[string]float64 {
	sum := func(fs families) map[string]float64 {
		s := map[string]float64{}
		for _, m := range fs[requestsMetric].GetMetric() {
			if label(m, "listener") == listener {
				s[label(m, "route")] += m.GetCounter().GetValue()
			}
		}
		return s
	}
	was, d := sum(before), map[string]float64{}
	for r, n := range sum(f) {
		if n > was[r] {
			d[r] = n - was[r]
		}
	}
	return d
}

// labelValuesContaining lists label values of any family that contain s.
func (f families) labelValuesContaining(s string) []string {
	var found []string
	for name, mf := range f {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), s) {
					found = append(found, fmt.Sprintf("%s{%s=%q}", name, lp.GetName(), lp.GetValue()))
				}
			}
		}
	}
	return found
}

// native tells whether a histogram family carries native histograms.
func native(mf *dto.MetricFamily) bool {
	for _, m := range mf.GetMetric() {
		if h := m.GetHistogram(); h != nil && (h.Schema != nil || len(h.GetPositiveSpan()) > 0 || h.GetZeroThreshold() > 0) {
			return true
		}
	}
	return false
}
