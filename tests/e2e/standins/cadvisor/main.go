// cAdvisor for the test bed: the project's own main over cAdvisor's library
// (github.com/google/cadvisor at .env's CADVISOR_IMAGE version), because the
// module of cAdvisor's command is not in the Go module proxy. It wires what the
// official command wires for the Prometheus endpoint: the container manager
// with its raw and Docker handlers reading the host's cgroups, and cAdvisor's
// container and machine collectors, on :8080 /metrics, plus /healthz.
//
// It takes the flags compose.yaml's cadvisor service passes, with the official
// meaning: those the library registers itself (--docker_only,
// --housekeeping_interval, --allow_dynamic_housekeeping, --jitter_factor, ...)
// and the command's own that the lab uses (--store_container_labels,
// --whitelisted_container_labels, --enable_metrics, --disable_metrics, --port,
// --listen_ip, --prometheus_endpoint). No web UI, no /api, no storage drivers,
// no application-metrics collectors, no perf or resctrl (docs/tests.md).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	// The Docker handler, as the official command registers it.
	_ "github.com/google/cadvisor/container/docker/install"
	"github.com/google/cadvisor/lib/cache/memory"
	"github.com/google/cadvisor/lib/container"
	"github.com/google/cadvisor/lib/manager"
	"github.com/google/cadvisor/lib/metrics"
	info "github.com/google/cadvisor/lib/model"
	"github.com/google/cadvisor/lib/utils/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// metricSet is the official command's -enable_metrics / -disable_metrics value:
// a comma-separated list of metric kinds, each one cAdvisor knows.
type metricSet struct{ set container.MetricSet }

func (m *metricSet) String() string {
	if m == nil || m.set == nil {
		return ""
	}
	kinds := make([]string, 0, len(m.set))
	for k := range m.set {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ",")
}

func (m *metricSet) Set(value string) error {
	m.set = container.MetricSet{}
	if value == "" {
		return nil
	}
	for _, k := range strings.Split(value, ",") {
		kind := container.MetricKind(k)
		if !container.AllMetrics.Has(kind) {
			return fmt.Errorf("unsupported metric %q: want one of %s", k, container.AllMetrics)
		}
		m.set[kind] = struct{}{}
	}
	return nil
}

// The official command's defaults: every kind but these is on unless
// -enable_metrics names the ones to collect.
const defaultDisabled = "advtcp,cpu_topology,cpuset,hugetlb,memory_numa,percpu,perf_event,process,referenced_memory,resctrl,sched,tcp,udp"

var (
	listenIP           = flag.String("listen_ip", "", "IP to listen on, defaults to all IPs")
	port               = flag.Int("port", 8080, "port to listen")
	prometheusEndpoint = flag.String("prometheus_endpoint", "/metrics", "Endpoint to expose Prometheus metrics on")
	storageDuration    = flag.Duration("storage_duration", 2*time.Minute, "How long to keep data stored")
	storeLabels        = flag.Bool("store_container_labels", true, "convert container labels and environment variables into labels on prometheus metrics for each container. If false, only the whitelisted labels will be exported")
	whitelistedLabels  = flag.String("whitelisted_container_labels", "", "comma separated list of container labels to be converted to labels on prometheus metrics for each container. store_container_labels must be set to false for this to take effect")
	envWhitelist       = flag.String("env_metadata_whitelist", "", "a comma-separated list of environment variable keys matched with specified prefix that needs to be collected for containers")
	rawPrefixWhitelist = flag.String("raw_cgroup_prefix_whitelist", "", "A comma-separated list of cgroup path prefix that needs to be collected even when -docker_only is specified")
	enabled, disabled  metricSet
)

func init() {
	flag.Var(&enabled, "enable_metrics", "comma-separated list of metrics to be enabled; if set, overrides disable_metrics")
	flag.Var(&disabled, "disable_metrics", "comma-separated list of metrics to be disabled")
	_ = disabled.Set(defaultDisabled)
}

// included: -enable_metrics where given, else every kind -disable_metrics leaves.
func included() container.MetricSet {
	if len(enabled.set) > 0 {
		return enabled.set
	}
	set := container.MetricSet{}
	for k := range container.AllMetrics {
		if !disabled.set.Has(k) {
			set[k] = struct{}{}
		}
	}
	return set
}

// containerLabels: every label and env, or only the whitelisted labels, as the
// official command decides with -store_container_labels.
func containerLabels() metrics.ContainerLabelsFunc {
	if *storeLabels {
		return metrics.DefaultContainerLabels
	}
	return metrics.BaseContainerLabels(strings.Split(*whitelistedLabels, ","))
}

// metricsHandler serves cAdvisor's collectors: a registry per request, the
// containers' latest stats (recursive from "/"), as the official endpoint does
// when asked with no query parameters.
func metricsHandler(m manager.Manager, set container.MetricSet) http.Handler {
	labels := containerLabels()
	machine := metrics.NewPrometheusMachineCollector(m, set)
	goc, proc := collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	opts := info.RequestOptions{IdType: info.TypeName, Count: 1, Recursive: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(metrics.NewPrometheusCollector(m, labels, set, clock.RealClock{}, opts), machine, goc, proc)
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

func main() {
	klog.InitFlags(nil)
	flag.Parse()
	if flag.NArg() > 0 {
		klog.Exitf("unexpected arguments: %q", flag.Args())
	}
	set := included()
	klog.Infof("enabled metrics: %s", set)

	m, err := manager.New(memory.New(*storageDuration, nil), sysfs.NewRealSysFs(), manager.HousekeepingConfigFlags,
		set, strings.Split(*rawPrefixWhitelist, ","), strings.Split(*envWhitelist, ","), "", 0)
	if err != nil {
		klog.Exitf("cAdvisor's manager: %v", err)
	}
	if err := m.Start(); err != nil {
		klog.Exitf("starting cAdvisor's manager: %v", err)
	}

	mux := http.NewServeMux()
	mux.Handle(*prometheusEndpoint, metricsHandler(m, set))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: net.JoinHostPort(*listenIP, strconv.Itoa(*port)), Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-stop
		_ = m.Stop()
		_ = srv.Close()
	}()
	klog.Infof("serving cAdvisor's metrics on %s%s", srv.Addr, *prometheusEndpoint)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		klog.Exitf("%v", err)
	}
}
