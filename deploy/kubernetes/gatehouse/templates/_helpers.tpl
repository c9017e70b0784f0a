{{/* The chart's name, or nameOverride. */}}
{{- define "gatehouse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource names: release-chart, or just the release when it holds the chart's name. */}}
{{- define "gatehouse.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gatehouse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gatehouse.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret the pods take their environment from. */}}
{{- define "gatehouse.secretName" -}}
{{- .Values.secret.existingSecret | default (include "gatehouse.fullname" .) }}
{{- end }}

{{/* Whether more than one pod can run: what a PodDisruptionBudget is for. */}}
{{- define "gatehouse.multiPod" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/*
Values that cannot work, refused at render time with what to do
instead. Included by the Deployment.
*/}}
{{- define "gatehouse.validate" -}}
{{- if and (not .Values.cluster.enabled) (include "gatehouse.multiPod" .) }}
{{- fail "more than one pod (replicaCount > 1 or autoscaling.enabled) needs cluster.enabled: in embedded mode each pod keeps its own SQLite file, keys and limits" }}
{{- end }}
{{- if and .Values.cluster.enabled (not .Values.secret.existingSecret) (not (and .Values.secret.redisURL .Values.secret.postgresURL)) }}
{{- fail "cluster.enabled needs secret.redisURL and secret.postgresURL, or secret.existingSecret holding GATEHOUSE_REDIS_URL and GATEHOUSE_POSTGRES_URL" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not (dig "requests" "cpu" "" .Values.resources)) }}
{{- fail "autoscaling.enabled needs resources.requests.cpu: the HPA scales on CPU use as a share of it" }}
{{- end }}
{{- if and .Values.persistence.enabled .Values.cluster.enabled }}
{{- fail "persistence is for embedded mode's SQLite file; in cluster mode the state is in PostgreSQL and Redis" }}
{{- end }}
{{- range $k := list "listen" "admin_key" "storage" }}
{{- if hasKey $.Values.config $k }}
{{- fail (printf "config.%s is set by the chart: leave it out (see values.yaml)" $k) }}
{{- end }}
{{- end }}
{{- if hasKey (.Values.config.server | default dict) "shutdown_grace" }}
{{- fail "config.server.shutdown_grace is set by the chart: use shutdownGraceSeconds" }}
{{- end }}
{{- end }}

{{/*
gatehouse.yaml: the chart's own settings, then the rest of .Values.config.
The ${…} references are quoted, so a URL or key holding YAML syntax
stays one string when gatehouse substitutes it.
*/}}
{{- define "gatehouse.config" -}}
listen: "0.0.0.0:{{ .Values.containerPort }}"
admin_key: "${GATEHOUSE_ADMIN_KEY:-}"
storage:
{{- if .Values.cluster.enabled }}
  redis: "${GATEHOUSE_REDIS_URL}"
  postgres: "${GATEHOUSE_POSTGRES_URL}"
{{- else }}
  sqlite: /var/lib/gatehouse/gatehouse.db
{{- end }}
{{- $own := dict "server" (dict "shutdown_grace" (printf "%ds" (int .Values.shutdownGraceSeconds))) "usage" (dict "spill_dir" "/var/lib/gatehouse/usage-spill") }}
{{- $rest := omit (deepCopy .Values.config) "listen" "admin_key" "storage" }}
{{- if .Values.demo.enabled }}
{{- $models := list (dict "name" "demo-chat" "targets" (list (dict "provider" "demo" "model" "gpt-4o-mini"))) (dict "name" "demo-embed" "targets" (list (dict "provider" "demo" "model" "text-embedding-3-small"))) }}
{{- $_ := set $rest "providers" (append ($rest.providers | default list) (dict "name" "demo" "type" "mock")) }}
{{- $_ = set $rest "models" (concat ($rest.models | default list) $models) }}
{{- $_ = set $rest "keys" (append ($rest.keys | default list) (dict "key" .Values.demo.key "name" "demo" "project" "demo" "models" (list "demo-chat" "demo-embed"))) }}
{{- end }}
{{ merge $own $rest | toYaml }}
{{- end }}
