-- Prints one JSON line after wrk's own summary: what `make max` records.
-- Latencies in milliseconds; errors are wrk's socket errors plus non-2xx/3xx.
done = function(summary, latency, requests)
  local e = summary.errors
  local function ms(us) return us / 1000 end
  io.write(string.format(
    '{"wrk_summary":{"requests":%d,"duration_s":%.6f,"errors":%d,"non_2xx_3xx":%d,' ..
    '"by_kind":{"connect":%d,"read":%d,"write":%d,"timeout":%d},' ..
    '"latency_ms":{"avg":%.4f,"p50":%.4f,"p90":%.4f,"p95":%.4f,"p99":%.4f,"p999":%.4f,"max":%.4f}}}\n',
    summary.requests, summary.duration / 1e6,
    e.connect + e.read + e.write + e.timeout + e.status, e.status,
    e.connect, e.read, e.write, e.timeout,
    ms(latency.mean), ms(latency:percentile(50)), ms(latency:percentile(90)),
    ms(latency:percentile(95)), ms(latency:percentile(99)), ms(latency:percentile(99.9)), ms(latency.max)))
end
