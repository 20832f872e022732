{{/* The release's base name. */}}
{{- define "pa.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The binaries this release runs, in start order, with their ports and grace. */}}
{{- define "pa.services" -}}
{{- $s := dict
  "payout" (dict "port" 8081 "admin" 9181)
  "consent" (dict "port" 8083 "admin" 9183)
  "fiat" (dict "port" 8082 "admin" 9182)
  "gateway" (dict "port" 8080 "admin" 9180) -}}
{{- if .Values.sandbox -}}
{{- $_ := set $s "sandboxbank" (dict "port" 8090 "admin" 9190) -}}
{{- end -}}
{{- toJson $s -}}
{{- end -}}

{{- define "pa.labels" -}}
app.kubernetes.io/name: partner-api
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "pa.selector" -}}
app.kubernetes.io/name: partner-api
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "pa.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "pa.fullname" .)) -}}
{{- end -}}

{{- define "pa.keysSecretName" -}}
{{- .Values.keys.existingSecret | default (printf "%s-keys" (include "pa.fullname" .)) -}}
{{- end -}}

{{/* The system of record: the CloudNativePG Cluster's app Secret, or an external one. */}}
{{- define "pa.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
{{- if .Values.database.cnpg.enabled }}
      name: {{ include "pa.fullname" . }}-db-app
      key: uri
{{- else if .Values.database.existingSecret }}
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.existingSecretKey }}
{{- else }}
{{- fail "set database.cnpg.enabled=true (a CloudNativePG Cluster) or database.existingSecret (an external PostgreSQL)" }}
{{- end }}
{{- end -}}

{{/* Where the quote offers and rate buckets live: one node or a Redis Cluster. */}}
{{- define "pa.redisEnv" -}}
{{- if .Values.redis.clusterUrl }}
- name: REDIS_CLUSTER_URL
  value: {{ .Values.redis.clusterUrl | quote }}
{{- else if .Values.redis.url }}
- name: REDIS_URL
  value: {{ .Values.redis.url | quote }}
{{- else if .Values.redis.deploy }}
- name: REDIS_URL
  value: {{ printf "redis://%s-redis:6379/0" (include "pa.fullname" .) | quote }}
{{- else }}
{{- fail "set redis.url, redis.clusterUrl, or redis.deploy=true (sandbox)" }}
{{- end }}
{{- end -}}

{{/* The money upstream every binary derives its environment from. */}}
{{- define "pa.bankProviderURL" -}}
{{- if .Values.bankProvider.url -}}
{{- .Values.bankProvider.url -}}
{{- else if .Values.sandbox -}}
{{- printf "http://%s-sandboxbank:8090" (include "pa.fullname" .) -}}
{{- else -}}
{{- fail "bankProvider.url is required outside sandbox" -}}
{{- end -}}
{{- end -}}

{{- define "pa.secretEnv" -}}
- name: {{ .env }}
  valueFrom:
    secretKeyRef:
      name: {{ include "pa.secretName" .root }}
      key: {{ .env }}
{{- end -}}
