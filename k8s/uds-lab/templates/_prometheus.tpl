{{/*
The lab's scrape jobs: compose's job names (prometheus/prometheus.yml), each
its container port by name, its interval (fast: 1 s) and the series it keeps
(each job only its own). The chart's Prometheus (below) and the PodMonitors
for a cluster's Prometheus (podmonitors.yaml) both read this list.
*/}}
{{- define "uds-lab.scrapeJobs" -}}
{{- toJson (list (dict "name" "app" "port" "app-http" "fast" true "keep" "(app|process|go)_.+") (dict "name" "nginx" "port" "nginx-metrics" "fast" false "keep" "nginx_(connections_.+|http_requests_total|up|exporter_build_info)|(process|go)_.+") (dict "name" "nginx-log" "port" "log-metrics" "fast" true "keep" "(nginx_location|nginx_log|process|go)_.+") (dict "name" "openloop" "port" "gen-metrics" "fast" true "keep" "(openloop|process|go)_.+")) -}}
{{- end }}

{{/* This release's pods, in its namespace. */}}
{{- define "uds-lab.podDiscovery" -}}
- role: pod
  namespaces:
    names: [{{ .Release.Namespace | quote }}]
  selectors:
    - role: pod
      label: "app.kubernetes.io/name=uds-lab,app.kubernetes.io/instance={{ .Release.Name }}"
{{- end }}

{{/* A pod's container port by name (.port), with its component, pod and node. */}}
{{- define "uds-lab.podTarget" -}}
- source_labels: [__meta_kubernetes_pod_container_port_name]
  regex: {{ .port }}
  action: keep
- source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]
  target_label: component
- source_labels: [__meta_kubernetes_pod_name]
  target_label: pod
- source_labels: [__meta_kubernetes_pod_node_name]
  target_label: node
{{- end }}

{{/*
cAdvisor's series that the report and the dashboards read (compose keeps
every container_ series of its own few containers; a cluster's nodes have many).
*/}}
{{- define "uds-lab.cadvisorSeries" -}}
container_(cpu_usage_seconds_total|cpu_cfs_periods_total|cpu_cfs_throttled_periods_total|spec_cpu_quota|spec_cpu_period|memory_working_set_bytes)
{{- end }}

{{/*
Which compose service each of this release's containers stands for, from
the kubelet's cAdvisor labels (namespace, pod, container; a pod's own labels
are not there): a Deployment's pods are <name>-<template hash>-<suffix>, the
Job's <name>-<index>-<suffix>. The app's pod holds the app and nginx-lo (its
sidecar), the nginx pod nginx, the Job's pods openloop.
*/}}
{{- define "uds-lab.cadvisorServices" -}}
{{- /* A pod's generated name is cut to 58 characters before its suffix:
the hash, even the component, would be lost. (Longer names than the
Services' and the Job's own limits are refused elsewhere.) */ -}}
{{- $n := len .Release.Name -}}
{{- if and (gt $n 40) (le $n 52) -}}
{{- fail (printf "costs.cadvisor: the release's name %q has %d characters: its pods' names (<release>-nginx-<hash>-<suffix>) would be cut, and the kubelet's cAdvisor series could not be told apart; a name of up to 40 characters, or costs.cadvisor=false" .Release.Name $n) -}}
{{- end -}}
{{- if .Values.load.enabled -}}
{{- $job := len (printf "%s-openloop-%s" .Release.Name (include "uds-lab.str" .Values.load.testid)) -}}
{{- if and (gt $job 54) (le $job 63) -}}
{{- fail (printf "costs.cadvisor: the run's Job name <release>-openloop-<testid> has %d characters: its pods' names (<job>-<index>-<suffix>) would be cut, and the kubelet's cAdvisor series could not be told apart; up to 54 characters (a shorter load.testid), or costs.cadvisor=false" $job) -}}
{{- end -}}
{{- end -}}
{{- $r := regexQuoteMeta .Release.Name -}}
{{- $d := "-[a-z0-9]+-[a-z0-9]+" -}}
{{- toJson (list (dict "pod" (printf "%s-app%s" $r $d) "container" "app" "service" "app") (dict "pod" (printf "%s-app%s" $r $d) "container" "nginx" "service" "nginx-lo") (dict "pod" (printf "%s-nginx%s" $r $d) "container" "nginx" "service" "nginx") (dict "pod" (printf "%s-openloop-.+-[0-9]+-[a-z0-9]+" $r) "container" "openloop" "service" "openloop")) -}}
{{- end }}

{{/* Prometheus's config (prometheus.yaml), also checksummed to restart it on a change. */}}
{{- define "uds-lab.prometheusConfig" -}}
{{- $v := .Values -}}
global:
  scrape_interval: 5s
  scrape_timeout: 4s
  evaluation_interval: 5s
scrape_configs:
{{- /* Each job keeps only its own series (compose's prometheus.yml does the same). */ -}}
{{- range $job := include "uds-lab.scrapeJobs" . | fromJsonArray }}
  - job_name: {{ $job.name }}
    {{- if $job.fast }}
    scrape_interval: 1s
    scrape_timeout: 1s
    {{- end }}
    kubernetes_sd_configs:
      {{- include "uds-lab.podDiscovery" $ | nindent 6 }}
    relabel_configs:
      {{- include "uds-lab.podTarget" (dict "port" $job.port) | nindent 6 }}
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: {{ $job.keep | quote }}
        action: keep
{{- end }}
{{- if $v.costs.cadvisor }}
  # Each node's kubelet's cAdvisor (CPU per container: the report's nginx CPU
  # per request and the generator's CPU), through the API server's node proxy
  # with this pod's service account (the ClusterRole <release>-<namespace>-prometheus).
  # compose's job name and interval; the kubelet samples every 10-15 s, and
  # the report reads the samples around a short phase.
  - job_name: cadvisor
    scheme: https
    authorization:
      credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token
    tls_config:
      ca_file: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    kubernetes_sd_configs:
      - role: node
    relabel_configs:
      - target_label: __address__
        replacement: kubernetes.default.svc:443
      - source_labels: [__meta_kubernetes_node_name]
        regex: (.+)
        target_label: __metrics_path__
        replacement: /api/v1/nodes/${1}/proxy/metrics/cadvisor
      - source_labels: [__meta_kubernetes_node_name]
        target_label: node
    metric_relabel_configs:
      # The series the report and the dashboards read, of this release's
      # containers alone, each labelled with the compose service it stands
      # for (container_label_com_docker_compose_service, compose's cAdvisor
      # label), so the report and the dashboards read one set of queries.
      - source_labels: [__name__]
        regex: {{ include "uds-lab.cadvisorSeries" . | squote }}
        action: keep
      {{- range $m := include "uds-lab.cadvisorServices" . | fromJsonArray }}
      - source_labels: [namespace, pod, container]
        regex: {{ printf "%s;%s;%s" (regexQuoteMeta $.Release.Namespace) $m.pod $m.container | squote }}
        target_label: container_label_com_docker_compose_service
        replacement: {{ $m.service }}
      {{- end }}
      - source_labels: [container_label_com_docker_compose_service]
        regex: .+
        action: keep
{{- end }}
{{- if $v.costs.nodeExporter }}
  # node-exporter (costs.nodeExporter's DaemonSet): compose's two jobs.
  - job_name: node
    kubernetes_sd_configs:
      {{- include "uds-lab.podDiscovery" . | nindent 6 }}
    relabel_configs:
      {{- include "uds-lab.podTarget" (dict "port" "node-metrics") | nindent 6 }}
    # node_cpu_seconds_total comes from node-cpu below, every second.
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: node_cpu_seconds_total
        action: drop
      - source_labels: [__name__]
        regex: (node|process|go)_.+
        action: keep
  - job_name: node-cpu
    scrape_interval: 1s
    scrape_timeout: 1s
    params:
      collect[]: [cpu]
    kubernetes_sd_configs:
      {{- include "uds-lab.podDiscovery" . | nindent 6 }}
    relabel_configs:
      {{- include "uds-lab.podTarget" (dict "port" "node-metrics") | nindent 6 }}
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: node_.+
        action: keep
{{- end }}
  # Itself, logging in as every reader must.
  - job_name: prometheus
    basic_auth:
      username: {{ $v.prometheus.user }}
      password_file: /run/secrets/prometheus_password
    static_configs:
      - targets: ["localhost:9090"]
{{- end }}
