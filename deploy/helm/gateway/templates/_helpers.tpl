{{- define "gateway.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gateway.labels" -}}
{{ include "gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gateway.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gateway.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The config file: the operator's, with the listeners and storage switches the chart owns. */}}
{{- define "gateway.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $server := dict "host" "0.0.0.0" "http_port" .Values.ports.http "grpc_port" .Values.ports.grpc "grpc_max_connection_age_s" .Values.grpcMaxConnectionAgeSeconds -}}
{{- $_ := set $config "server" (merge $server (default (dict) $config.server)) -}}
{{- if .Values.database.pgbouncer -}}
{{- $_ := set $config "storage" (merge (dict "pgbouncer" true) (default (dict) $config.storage)) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The environment every gateway container gets: storage URLs from Secrets, then the operator's. */}}
{{- define "gateway.env" -}}
- name: GATEWAY_STATE_DIR
  value: /var/lib/gateway
{{- if .Values.database.existingSecret }}
- name: GATEWAY_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.database.existingSecret }}, key: {{ .Values.database.secretKey }}}
{{- end }}
{{- if .Values.redis.existingSecret }}
- name: GATEWAY_REDIS_URL
  valueFrom:
    secretKeyRef: {name: {{ .Values.redis.existingSecret }}, key: {{ .Values.redis.secretKey }}}
{{- end }}
{{- if gt (int .Values.workers) 1 }}
- name: PROMETHEUS_MULTIPROC_DIR
  value: /tmp/metrics
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gateway.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}
