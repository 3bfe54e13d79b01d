{{/*
One nginx container: (dict "root" $ "port" 8090 "status" 8091 "suffix" "-lo"
"upstream" "127.0.0.1:8080" "socket" true). The official image's entrypoint
renders /etc/nginx/templates (the ConfigMap of nginx/templates) into /tmp with
this environment, then runs these args, as compose's command.
*/}}
{{- define "uds-lab.nginxContainer" -}}
{{- $v := .root.Values -}}
- name: nginx
  image: {{ $v.images.nginx }}
  imagePullPolicy: {{ $v.images.pullPolicy }}
  args: ["nginx", "-c", "/tmp/nginx.conf", "-g", "daemon off;"]
  env:
    {{- include "uds-lab.nginxEnv" . | nindent 4 }}
  ports:
    - name: nginx-http
      containerPort: {{ include "uds-lab.str" .port }}
    - name: nginx-status
      containerPort: {{ include "uds-lab.str" .status }}
  readinessProbe:
    exec:
      {{- if .socket }}
      # nginx, and through it the app on both listeners, in the app's protocol
      # (nginx/healthcheck.sh, compose's healthcheck): the kubelet cannot dial a
      # Unix socket, so a socket-only app is probed through its sidecar.
      command: ["sh", "/lab/healthcheck.sh"]
      {{- else }}
      # nginx, and through it the app's TCP port (this pod has no socket:
      # nginx/healthcheck.sh's /_uds/ would answer 502 here).
      command:
        - sh
        - -c
        - >-
          curl -fsS -o /dev/null --max-time 2 http://127.0.0.1:{{ include "uds-lab.str" .port }}/healthz || exit 1;
          code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time 2 http://127.0.0.1:{{ include "uds-lab.str" .port }}/_tcp/healthz) || code=000;
          case $code in 000|502|503|504) echo "the app does not answer on its tcp listener (nginx: HTTP $code)" >&2; exit 1;; esac
      {{- end }}
    periodSeconds: 5
    timeoutSeconds: 5
    failureThreshold: 3
  # nginx itself (/healthz is its own answer): a stuck app must not restart nginx.
  livenessProbe:
    httpGet:
      path: /healthz
      port: nginx-http
    periodSeconds: 10
    timeoutSeconds: 3
    failureThreshold: 3
  securityContext:
    {{- include "uds-lab.containerSecurity" (dict "uid" 101 "gid" 101) | nindent 4 }}
  resources:
    {{- include "uds-lab.resources" (dict "r" $v.nginx.resources "guaranteed" $v.pinning.guaranteed) | nindent 4 }}
  volumeMounts:
    - name: nginx-templates
      mountPath: /etc/nginx/templates
      readOnly: true
    {{- if .socket }}
    - name: nginx-lab
      mountPath: /lab
      readOnly: true
    # The app's socket folder. Read-only is enough to connect to a socket.
    - name: sock
      mountPath: {{ include "uds-lab.socketDir" .root }}
      readOnly: true
    {{- end }}
    # The log exporter's FIFO (opening it writes nothing to the file system).
    - name: log
      mountPath: /log
      readOnly: true
    - name: nginx-tmp
      mountPath: /tmp
{{- end }}

{{/* The volumes of a pod with nginx and its log exporter. */}}
{{- define "uds-lab.nginxVolumes" -}}
- name: nginx-templates
  configMap:
    name: {{ .Release.Name }}-nginx-templates
    items:
      {{- include "uds-lab.nginxTemplateItems" . | nindent 6 }}
- name: nginx-lab
  configMap:
    name: {{ .Release.Name }}-nginx-templates
    items:
      - key: healthcheck.sh
        path: healthcheck.sh
- name: catalogue
  configMap:
    name: {{ .Release.Name }}-catalogue
# The exporter's FIFO, shared by nginx and the exporter only (not the app).
- name: log
  emptyDir:
    sizeLimit: 1Mi
# nginx's rendered config, pid and temp files (compose's tmpfs).
- name: nginx-tmp
  emptyDir:
    medium: Memory
    sizeLimit: 64Mi
{{- end }}

{{/*
nginx's access log as per-location metrics (services/nginx-log-exporter), one
beside each nginx: the FIFO lives in the pod's emptyDir. A native sidecar
(an init container that keeps running) with a startup probe, so nginx starts
only once the FIFO is there to open.
*/}}
{{- define "uds-lab.logExporter" -}}
{{- $v := .Values -}}
- name: log-exporter
  image: {{ $v.images.logExporter }}
  imagePullPolicy: {{ $v.images.pullPolicy }}
  restartPolicy: Always
  env:
    - name: LOG_EXPORTER_PIPE
      value: /log/access.pipe
    - name: LOG_EXPORTER_CATALOGUE
      value: /lab-catalogue/catalogue.json
  ports:
    - name: log-metrics
      containerPort: 9114
  startupProbe:
    exec:
      command: ["/nginx-log-exporter", "healthcheck"]
    periodSeconds: 1
    failureThreshold: 30
  # Started (the startup probe), then alive: it has no readiness of its own
  # to give (nginx's is the pod's).
  livenessProbe:
    exec:
      command: ["/nginx-log-exporter", "healthcheck"]
    periodSeconds: 10
    timeoutSeconds: 3
  # nobody, in nginx's group: its FIFO (0660) lets nginx's workers write.
  securityContext:
    {{- include "uds-lab.containerSecurity" (dict "uid" 65534 "gid" 101) | nindent 4 }}
  resources:
    {{- include "uds-lab.resources" (dict "r" $v.logExporter.resources "guaranteed" false) | nindent 4 }}
  volumeMounts:
    - name: log
      mountPath: /log
    - name: catalogue
      mountPath: /lab-catalogue
      readOnly: true
{{- end }}
