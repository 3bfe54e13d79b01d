{{/*
The lab's scrape jobs: compose's job names (prometheus/prometheus.yml), each
its container port by name, its interval (fast: 1 s) and the series it keeps
(each job only its own). The chart's Prometheus (below) and the PodMonitors
for a cluster's Prometheus (podmonitors.yaml) both read this list.
*/}}
{{- define "uds-lab.scrapeJobs" -}}
{{- toJson (list (dict "name" "app" "port" "app-http" "fast" true "keep" "(app|process|go)_.+") (dict "name" "nginx" "port" "nginx-metrics" "fast" false "keep" "nginx_(connections_.+|http_requests_total|up|exporter_build_info)|(process|go)_.+") (dict "name" "nginx-log" "port" "log-metrics" "fast" true "keep" "(nginx_location|nginx_log|process|go)_.+") (dict "name" "openloop" "port" "gen-metrics" "fast" true "keep" "(openloop|process|go)_.+")) -}}
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
      - role: pod
        namespaces:
          names: [{{ $.Release.Namespace | quote }}]
        selectors:
          - role: pod
            label: "app.kubernetes.io/name=uds-lab,app.kubernetes.io/instance={{ $.Release.Name }}"
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: {{ $job.port }}
        action: keep
      - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_component]
        target_label: component
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
      - source_labels: [__meta_kubernetes_pod_node_name]
        target_label: node
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: {{ $job.keep | quote }}
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
