{{/*
Generated from settings.toml by scripts/settings.py (make settings): do not
edit. Each helper is the environment compose gives one of its environment
lists (compose.yaml's region of that name), for the settings the chart
carries, from their values keys; its argument is the chart's root context.
*/}}
{{- define "uds-lab.settingsEnv.app" -}}
- name: APP_SOCKET_MODE
  value: {{ include "uds-lab.str" .Values.app.socketMode | quote }}
- name: APP_DOWNLOAD_SIZE
  value: {{ include "uds-lab.str" .Values.app.downloadSize | quote }}
{{- end }}
{{- define "uds-lab.settingsEnv.nginx" -}}
- name: APP_PROTOCOL
  value: {{ include "uds-lab.str" .Values.app.protocol | quote }}
- name: APP_FASTCGI_SCRIPT
  value: {{ include "uds-lab.str" .Values.app.fastcgiScript | quote }}
- name: NGINX_UPSTREAM_KEEPALIVE
  value: {{ include "uds-lab.str" .Values.nginx.upstreamKeepalive | quote }}
- name: NGINX_WORKER_PROCESSES
  value: {{ include "uds-lab.str" .Values.nginx.workerProcesses | quote }}
- name: NGINX_WORKER_CONNECTIONS
  value: {{ include "uds-lab.str" .Values.nginx.workerConnections | quote }}
- name: NGINX_MAX_IN_FLIGHT
  value: {{ include "uds-lab.str" .Values.nginx.maxInFlight | quote }}
- name: NGINX_ACCESS_LOG
  value: {{ include "uds-lab.str" .Values.nginx.accessLog | quote }}
{{- end }}
{{- define "uds-lab.settingsEnv.plan" -}}
- name: SCENARIO
  value: {{ include "uds-lab.str" .Values.load.scenario | quote }}
- name: RATE
  value: {{ include "uds-lab.str" .Values.load.rate | quote }}
- name: INTERLEAVE
  value: {{ include "uds-lab.str" .Values.load.interleave | quote }}
- name: BLOCK
  value: {{ include "uds-lab.str" .Values.load.block | quote }}
- name: DURATION
  value: {{ include "uds-lab.str" .Values.load.duration | quote }}
- name: ROUNDS
  value: {{ include "uds-lab.str" .Values.load.rounds | quote }}
- name: WARMUP
  value: {{ include "uds-lab.str" .Values.load.warmup | quote }}
- name: IDLE
  value: {{ include "uds-lab.str" .Values.load.idle | quote }}
- name: PRECISION
  value: {{ include "uds-lab.str" .Values.load.precision | quote }}
- name: MAX_ROUNDS
  value: {{ include "uds-lab.str" .Values.load.maxRounds | quote }}
- name: ENDPOINT
  value: {{ include "uds-lab.str" .Values.load.endpoint | quote }}
- name: CPU_ITERATIONS
  value: {{ include "uds-lab.str" .Values.load.cpuIterations | quote }}
- name: SLEEP_MS
  value: {{ include "uds-lab.str" .Values.load.sleepMs | quote }}
- name: CONNECTIONS
  value: {{ include "uds-lab.str" .Values.load.connections | quote }}
- name: SWEEP_RATES
  value: {{ include "uds-lab.str" .Values.load.sweepRates | quote }}
- name: SWEEP_FROM
  value: {{ include "uds-lab.str" .Values.load.sweepFrom | quote }}
- name: SWEEP_TO
  value: {{ include "uds-lab.str" .Values.load.sweepTo | quote }}
- name: SWEEP_STEPS
  value: {{ include "uds-lab.str" .Values.load.sweepSteps | quote }}
- name: SWEEP_ROUNDS
  value: {{ include "uds-lab.str" .Values.load.sweepRounds | quote }}
{{- end }}
