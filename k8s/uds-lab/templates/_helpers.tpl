{{/*
Shared pieces. The lab's own files (nginx/templates, nginx/healthcheck.sh,
catalogue.json, loadgen/) are read from files/, which holds symbolic links to
them (docs/kubernetes.md, "One source of truth").
*/}}

{{- define "uds-lab.labels" -}}
app.kubernetes.io/name: uds-lab
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
An object's name: <release>-<component>, so that releases in one namespace
never share a name. A Service's or Job's name is a DNS label (63 characters
at most): (dict "root" $ "component" "app")
*/}}
{{- define "uds-lab.name" -}}
{{- $n := printf "%s-%s" .root.Release.Name .component -}}
{{- if gt (len $n) 63 -}}
{{- fail (printf "the release's name %q is too long: the object %q would have more than 63 characters (a shorter release name, or a shorter load.testid)" .root.Release.Name $n) -}}
{{- end -}}
{{- $n -}}
{{- end }}

{{/* The selector of one component: (dict "root" $ "component" "app") */}}
{{- define "uds-lab.selector" -}}
app.kubernetes.io/name: uds-lab
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The catalogue (files/catalogue.json), parsed. */}}
{{- define "uds-lab.catalogue" -}}
{{- $c := .Files.Get "files/catalogue.json" -}}
{{- if not (hasKey (fromJson $c) "paths") -}}
{{- fail (printf "files/catalogue.json is not the lab's catalogue (%q...): the chart reads it through the link k8s/uds-lab/files/catalogue.json, which this checkout holds as a file (git's core.symlinks is false?)" (trunc 40 $c)) -}}
{{- end -}}
{{- if not (.Files.Glob "files/nginx/templates/*.template") -}}
{{- fail "files/nginx/templates holds no nginx.conf.template: the chart reads nginx/templates through the link k8s/uds-lab/files/nginx/templates, which this checkout holds as a file (git's core.symlinks is false?)" -}}
{{- end -}}
{{- if not (.Files.Glob "files/grafana/dashboards/*.json") -}}
{{- fail "files/grafana/dashboards holds no dashboard: the chart reads grafana/dashboards through the link k8s/uds-lab/files/grafana/dashboards, which this checkout holds as a file (git's core.symlinks is false?)" -}}
{{- end -}}
{{- $linked := list "files/nginx/healthcheck.sh" "files/grafana/datasource.yaml" -}}
{{- range $path, $_ := .Files.Glob "files/loadgen/*.py" -}}
{{- $linked = append $linked $path -}}
{{- end -}}
{{- range $linked -}}
{{- if not (contains "\n" ($.Files.Get .)) -}}
{{- fail (printf "%s is not the lab's file but %q: the chart reads it through a link, which this checkout holds as a file (git's core.symlinks is false?)" . ($.Files.Get .)) -}}
{{- end -}}
{{- end -}}
{{- $c -}}
{{- end }}

{{/* The run's Job: <release>-openloop-<load.testid>. */}}
{{- define "uds-lab.job" -}}
{{- include "uds-lab.name" (dict "root" . "component" (printf "openloop-%s" (include "uds-lab.str" .Values.load.testid))) -}}
{{- end }}

{{/*
The catalogue as the chart's pods read it: catalogue.json with the host of
each nginx's URL, a compose service (nginx:8080, app:8090), made this
release's Service (<release>-nginx:8080, <release>-app:8090), so that
loadgen/plan.py writes URLs that reach this release's nginx. Every other byte
is catalogue.json's.
*/}}
{{- define "uds-lab.clusterCatalogue" -}}
{{- $text := include "uds-lab.catalogue" . -}}
{{- $want := dict -}}
{{- range $name, $n := (fromJson $text).nginx -}}
{{- $host := regexFind "^http://[a-z0-9-]+" $n.url | trimPrefix "http://" -}}
{{- $new := printf "http://%s%s" (include "uds-lab.name" (dict "root" $ "component" $host)) (trimPrefix (printf "http://%s" $host) $n.url) -}}
{{- $text = replace (printf "%q" $n.url) (printf "%q" $new) $text -}}
{{- $_ := set $want $name $new -}}
{{- end -}}
{{- range $name, $n := (fromJson $text).nginx -}}
{{- if ne $n.url (get $want $name) -}}
{{- fail (printf "catalogue.json: nginx %s's url could not be given this release's Service (%q, want %q)" $name $n.url (get $want $name)) -}}
{{- end -}}
{{- end -}}
{{- $text -}}
{{- end }}

{{/*
The paths the generator drives, as a comma list: load.paths, or every catalogue path that
exists on Kubernetes (its "kubernetes" entry says so, or why not) but the A/A
twins.
*/}}
{{- define "uds-lab.paths" -}}
{{- $cat := include "uds-lab.catalogue" . | fromJson -}}
{{- $want := .Values.load.paths -}}
{{- if not $want -}}
{{- $want = list -}}
{{- range $name, $p := $cat.paths -}}
{{- if and (not $p.calibration) $p.kubernetes.exists -}}
{{- $want = append $want $name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $want -}}
{{- $p := get $cat.paths . -}}
{{- if not $p -}}{{- fail (printf "load.paths: %q is not a path of catalogue.json" .) -}}{{- end -}}
{{- if not $p.kubernetes.exists -}}{{- fail (printf "load.paths: %q does not exist on Kubernetes: %s (catalogue.json)" . $p.kubernetes.why) -}}{{- end -}}
{{- end -}}
{{- join "," $want -}}
{{- end }}

{{/* The socket's path, and its folder: the emptyDir both containers mount. */}}
{{- define "uds-lab.socket" -}}/sock/app.sock{{- end }}
{{- define "uds-lab.socketDir" -}}/sock{{- end }}

{{/*
The environment of one nginx, as compose gives it (the official image's
entrypoint renders /etc/nginx/templates/*.template with it):
(dict "root" $ "port" 8080 "status" 8081 "suffix" "" "upstream" "lab-app:8080")
*/}}
{{- define "uds-lab.nginxEnv" -}}
- name: NGINX_ENVSUBST_OUTPUT_DIR
  value: /tmp
- name: NGINX_RUN_DIR
  value: /tmp
- name: NGINX_LISTEN_PORT
  value: {{ include "uds-lab.str" .port | quote }}
- name: NGINX_STATUS_PORT
  value: {{ include "uds-lab.str" .status | quote }}
- name: NGINX_PATH_SUFFIX
  value: {{ .suffix | quote }}
- name: APP_TCP_UPSTREAM
  value: {{ .upstream | quote }}
- name: APP_UNIX_SOCKET
  value: {{ include "uds-lab.socket" .root }}
{{ include "uds-lab.settingsEnv.nginx" .root }}
{{- end }}

{{/*
A container's resources: (dict "r" <a component's resources: {limits, requests}>
"guaranteed" bool). Kubernetes' own shape. A request not given is its limit
(so a container whose values give no requests is in the Guaranteed class);
guaranteed (pinning.guaranteed) makes every request its limit, which the static
CPU manager needs to pin a container to whole cores.
*/}}
{{- define "uds-lab.resources" -}}
{{- $lim := .r.limits | default dict -}}
{{- $req := .r.requests | default dict -}}
{{- $g := .guaranteed -}}
limits:
{{- range list "cpu" "memory" "ephemeral-storage" }}
{{- if hasKey $lim . }}
  {{ . }}: {{ include "uds-lab.str" (get $lim .) | quote }}
{{- end }}
{{- end }}
requests:
{{- range list "cpu" "memory" "ephemeral-storage" }}
{{- if and (hasKey $lim .) (or $g (not (hasKey $req .)) (eq (toString (get $req .)) "<nil>")) }}
  {{ . }}: {{ include "uds-lab.str" (get $lim .) | quote }}
{{- else if and (hasKey $req .) (ne (toString (get $req .)) "<nil>") }}
  {{ . }}: {{ include "uds-lab.str" (get $req .) | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* A container's security context: no root, no privilege, read-only root. */}}
{{- define "uds-lab.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: {{ include "uds-lab.str" .uid }}
runAsGroup: {{ include "uds-lab.str" .gid }}
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The nginx template ConfigMap's items: each template at its folder under /etc/nginx/templates. */}}
{{- define "uds-lab.nginxTemplateItems" -}}
{{- range $path, $_ := .Files.Glob "files/nginx/templates/**.template" }}
{{- $rel := trimPrefix "files/nginx/templates/" $path }}
- key: {{ $rel | replace "/" "_" }}
  path: {{ $rel }}
{{- end }}
{{- end }}

{{/*
A pod's placement: (dict "nodeSelector" map "tolerations" list "affinity" map),
each a component's own values (app, nginx, prometheus, load), written as given.
*/}}
{{- define "uds-lab.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The placement of a pod under test (the app's, the nginx pod): its component's
values (.c: .Values.app or .Values.nginx), its nodeSelector joined with
nodeUnderTest.labels (the component's own wins on a key both name).
*/}}
{{- define "uds-lab.underTest" -}}
{{- $sel := merge (dict) (.c.nodeSelector | default dict) (.root.Values.nodeUnderTest.labels | default dict) -}}
{{- include "uds-lab.placement" (dict "nodeSelector" $sel "tolerations" .c.tolerations "affinity" .c.affinity) -}}
{{- end }}

{{/*
A cluster-wide object's name: the release's and its namespace's (two
namespaces may each hold a release of one name).
*/}}
{{- define "uds-lab.clusterName" -}}
{{- printf "%s-%s-prometheus" .Release.Name .Release.Namespace -}}
{{- end }}

{{/*
Refuse what Pod Security admits at its privileged level only (.what, why),
where the release's namespace enforces another level (read with lookup:
nothing is checked where the installer may not read namespaces, nor offline).
*/}}
{{- define "uds-lab.needsPrivileged" -}}
{{- $ns := lookup "v1" "Namespace" "" .root.Release.Namespace -}}
{{- $level := dig "metadata" "labels" "pod-security.kubernetes.io/enforce" "" ($ns | default dict) -}}
{{- if and $level (ne $level "privileged") -}}
{{- fail (printf "%s: namespace %s enforces Pod Security %q, which refuses %s: %s in a namespace labelled pod-security.kubernetes.io/enforce=privileged (docs/kubernetes.md)" .value .root.Release.Namespace $level .what .fix) -}}
{{- end -}}
{{- end }}

{{/* A NetworkPolicy peer: the pods of one component of this release. */}}
{{- define "uds-lab.peer" -}}
- podSelector:
    matchLabels:
      app.kubernetes.io/name: uds-lab
      app.kubernetes.io/instance: {{ .root.Release.Name }}
      app.kubernetes.io/component: {{ .component }}
{{- end }}
{{/*
Who scrapes the lab's pods (NetworkPolicy peers): the chart's Prometheus,
and with podMonitors the cluster's (podMonitors.scrapers).
*/}}
{{- define "uds-lab.scrapers" -}}
{{- if .Values.prometheus.enabled }}
{{ include "uds-lab.peer" (dict "root" . "component" "prometheus") }}
{{- end }}
{{- if .Values.podMonitors.enabled }}
{{- if not .Values.podMonitors.scrapers }}
{{- fail "podMonitors.scrapers is empty: the NetworkPolicies need to know who scrapes the lab (the operator's Prometheus pods), or set networkPolicies.enabled=false" }}
{{- end }}
{{ toYaml .Values.podMonitors.scrapers }}
{{- end }}
{{- end }}
{{- define "uds-lab.dns" -}}
# Names (<release>-app, <release>-nginx) through the cluster's DNS, wherever it runs.
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end }}

{{/*
A value as text, whole numbers in full: values.yaml's numbers are floats to
Helm, and toString or quote would write 1048576 as "1.048576e+06".
*/}}
{{- define "uds-lab.str" -}}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) -}}{{ int64 . }}{{- else -}}{{ toString . }}{{- end -}}
{{- end }}
