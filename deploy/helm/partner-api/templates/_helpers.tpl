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
  "orders" (dict "port" 8084 "admin" 9184)
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
{{- if .Values.redis.existingSecret }}
- name: {{ ternary "REDIS_CLUSTER_URL" "REDIS_URL" (eq .Values.redis.existingSecretKey "clusterUrl") }}
  valueFrom: {secretKeyRef: {name: {{ .Values.redis.existingSecret | quote }}, key: {{ .Values.redis.existingSecretKey | quote }}}}
{{- else if .Values.redis.clusterUrl }}
- name: REDIS_CLUSTER_URL
  valueFrom: {secretKeyRef: {name: {{ include "pa.fullname" . }}-redis-url, key: clusterUrl}}
{{- else if .Values.redis.url }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ include "pa.fullname" . }}-redis-url, key: url}}
{{- else if .Values.redis.deploy }}
- name: REDIS_URL
  value: {{ printf "redis://%s-redis:6379/0" (include "pa.fullname" .) | quote }}
{{- else }}
{{- fail "set redis.existingSecret, redis.url, redis.clusterUrl, or redis.deploy=true (sandbox)" }}
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

{{/* GOMEMLIMIT: 90% of a memory limit given in Mi or Gi, in MiB. */}}
{{- define "pa.gomemlimit" -}}
{{- $m := toString . -}}
{{- if hasSuffix "Mi" $m -}}
{{- div (mul (trimSuffix "Mi" $m | atoi) 9) 10 }}MiB
{{- else if hasSuffix "Gi" $m -}}
{{- div (mul (trimSuffix "Gi" $m | atoi) 9216) 10 }}MiB
{{- else -}}
{{- fail (printf "memory limit %q: give it in Mi or Gi (GOMEMLIMIT is 90%% of it)" $m) -}}
{{- end -}}
{{- end -}}
